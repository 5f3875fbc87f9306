// libFuzzer target 2: structured differential. Bytes -> the campaign's generator at tiny dims, each
// decision drawn from the bytes (FdpChoices over FuzzedDataProvider; byte 0 is the format version,
// so files of another byte meaning are skipped, not misread) -> the production reference (`cpu-ref`
// through ao::Trial: layout.cpp + reference_*.cpp) vs the independent naive fp64 reference
// (oracle/tests/support/naive_reference.*, which re-derives offsets, CP chunks and masks from the Case).
// Properties (abort on violation), on every row of the rank:
//  * both derive the same rows, positions and pad rows;
//  * indexer: every returned index is allowed (same document, causal), no duplicates, exactly
//    min(k, allowed) indices then -1, pad rows all -1, and every returned key scores >= the naive
//    k-th score - tolerance (tie-aware);
//  * sdpa: LSE finite on rows with allowed keys (-inf and O = 0 without), O and LSE within 2e-4 of fp64;
//  * pass=bwd (both ops): the gradients (and the indexer's loss) against the naive fp64 backward, within
//    the rounding relative to the terms' magnitudes.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <vector>
#include <string>

#if defined(AO_FDP_HEADER)
#include AO_FDP_HEADER
#else
#include <fuzzer/FuzzedDataProvider.h>
#endif

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/compare/tolerance.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/pipeline/trial.h"
#include "attn_oracle/reference/reference.h"
#include "naive_reference.h"

namespace {

constexpr uint8_t kFormatVersion = 2;  // 2: bytes are generator choices (1: the old own decoder)

[[noreturn]] void violated(const ao::Case& c, const std::string& what) {
  std::fprintf(stderr, "fuzz_differential: property violated: %s\n  case: %s\n", what.c_str(),
               ao::print_case(c).c_str());
  std::abort();
}

// The campaign's generator (generator.h) at tiny dims, every decision read from the input's bytes.
ao::Case case_from(FuzzedDataProvider& f) {
  ao::FdpChoices<FuzzedDataProvider> src(f);
  ao::GenOptions opt;
  opt.dims = ao::DimsProfile::Tiny;
  return ao::generate_case(src, opt);
}

// |got - want| within the fp64 reference's rounding to its fp32 outputs, relative to the terms' magnitudes.
void check_close(const ao::Case& c, const std::vector<float>& got, const std::vector<double>& want,
                 const std::vector<double>& mag, const std::vector<char>& judged, size_t width, const char* what) {
  if (got.size() != want.size()) violated(c, std::string(what) + ": output has the wrong size");
  for (size_t r = 0; r < judged.size(); ++r) {
    if (!judged[r]) continue;
    for (size_t e = 0; e < width; ++e) {
      const size_t i = r * width + e;
      const double tol = 1e-10 * mag[i] + 0x1p-22 * std::fabs(want[i]) + 1e-30;
      if (!(std::fabs(double(got[i]) - want[i]) <= tol))
        violated(c, std::string(what) + " row " + std::to_string(r) + " elem " + std::to_string(e) + ": " +
                        std::to_string(got[i]) + " vs fp64 " + std::to_string(want[i]));
    }
  }
}

// pass=bwd: every gradient of a valid Q row and of every K/V row of a document (the rank's partial under
// CP) against the naive fp64 backward; the indexer's loss too. SDPA's exact backward is its fp64 mode
// (precision=f32 emulates an fp32 kernel, whose error the comparator's gates judge, not this target).
void check_gradients(const ao::Case& c, const ao::Layout& l, const naive::NaiveLayout& nl, const ao::Inputs& in,
                     const ao::Outputs& ran) {
  ao::Outputs exact;
  if (c.op == ao::Op::Sdpa && c.precision != ao::Precision::F64) {
    ao::Layout lx = l;
    lx.c.precision = ao::Precision::F64;
    exact = ao::make_sentinel_outputs(lx);
    ao::reference_sdpa_bwd(lx, in, exact);
  }
  const ao::Outputs& out = exact.dq.empty() ? ran : exact;
  std::vector<char> q_rows(size_t(nl.q_rows), 0), kv_rows(nl.kv_owner.size(), 0);
  for (const naive::QRow& r : nl.rows) q_rows[size_t(r.row)] = r.valid;
  for (size_t k = 0; k < kv_rows.size(); ++k) kv_rows[k] = nl.kv_owner[k] >= 0;
  if (c.op == ao::Op::Sdpa) {
    const naive::SdpaGrads g = naive::sdpa_bwd(c, nl, in);
    check_close(c, out.dq, g.dq, g.dq_mag, q_rows, size_t(c.hq * c.dim), "dq");
    check_close(c, out.dk, g.dk, g.dk_mag, kv_rows, size_t(c.hkv * c.dim), "dk");
    check_close(c, out.dv, g.dv, g.dv_mag, kv_rows, size_t(c.hkv * c.dim_v), "dv");
    return;
  }
  const naive::IndexerGrads g = naive::indexer_bwd(c, nl, in);
  check_close(c, out.dq, g.dq, g.dq_mag, q_rows, size_t(c.heads * c.dim), "dq");
  check_close(c, out.dw, g.dw, g.dw_mag, q_rows, size_t(c.heads), "dw");
  check_close(c, out.dk, g.dk, g.dk_mag, kv_rows, size_t(c.dim), "dk");
  if (!out.loss.empty() &&
      !(std::fabs(double(out.loss[0]) - g.loss) <= 1e-10 * g.loss_mag + 0x1p-22 * std::fabs(g.loss) + 1e-30))
    violated(c, "loss " + std::to_string(out.loss[0]) + " vs fp64 " + std::to_string(g.loss));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || data[0] != kFormatVersion) return 0;
  FuzzedDataProvider f(data + 1, size - 1);
  ao::Case c;
  std::optional<ao::Trial> trial;
  try {
    c = case_from(f);
    trial.emplace(c);
  } catch (const ao::BadInput& e) {  // every choice sequence must give a valid case
    std::fprintf(stderr, "fuzz_differential: the generator made an invalid case: %s\n", e.what());
    std::abort();
  }
  // The production reference through the one pipeline object (inputs, sentinels, input fingerprint).
  static const std::unique_ptr<ao::Backend> cpu_ref = ao::make_backend("cpu-ref");
  const ao::TrialRun run = trial->run(*cpu_ref);
  if (!run.ok()) violated(c, "cpu-ref did not run: " + run.status.reason);
  const ao::Layout& l = trial->layout();
  const ao::Inputs& in = trial->inputs();
  const ao::Outputs& out = run.out;
  const naive::NaiveLayout nl = naive::derive(c);
  if (nl.rows.size() != l.check_rows.size()) violated(c, "naive and layout disagree on the rank's rows");
  const double kmax = c.op == ao::Op::Indexer ? ao::max_abs_key(l, in) : 0;
  for (size_t i = 0; i < nl.rows.size(); ++i) {
    const naive::QRow& qr = nl.rows[i];
    const int64_t r = qr.row;
    if (l.check_rows[i] != r || l.valid_row(r) != qr.valid || (qr.valid && l.pos_of(r) != qr.pos))
      violated(c, "naive and layout disagree on row " + std::to_string(r) + " (layout: row " +
                      std::to_string(l.check_rows[i]) + " valid " + std::to_string(l.valid_row(l.check_rows[i])) +
                      " pos " + std::to_string(l.pos_of(l.check_rows[i])) + "; naive: valid " +
                      std::to_string(qr.valid) + " pos " + std::to_string(qr.pos) + ")");
    if (c.pass == ao::Pass::Bwd) continue;  // the gradients: after the loop, over the whole rank
    if (c.op == ao::Op::Indexer) {
      const size_t K = size_t(c.topk);
      const int32_t* got = out.topk.data() + size_t(r) * K;
      if (!qr.valid) {
        for (size_t e = 0; e < K; ++e)
          if (got[e] != -1) violated(c, "pad row " + std::to_string(r) + " returned an index");
        continue;
      }
      const naive::TopK t = naive::indexer_row(c, nl, in, qr);
      int64_t lo = 0, hi = 0;
      naive::allowed(c, nl, qr.doc, qr.pos, lo, hi);
      const size_t expect = std::min<size_t>(K, size_t(t.allowed));
      const double tol = ao::indexer_score_tolerance(l, in, r, kmax);
      std::set<int32_t> seen;
      for (size_t e = 0; e < K; ++e) {
        const int32_t v = got[e];
        if (e >= expect) {
          if (v != -1) violated(c, "row " + std::to_string(r) + ": expected -1 fill after " + std::to_string(expect));
          continue;
        }
        if (v < 0 || v >= int32_t(nl.kv_owner.size()) || nl.kv_owner[size_t(v)] != qr.doc)
          violated(c, "row " + std::to_string(r) + ": index " + std::to_string(v) + " outside the document");
        const int64_t s = v - nl.kv_off[size_t(qr.doc)];
        if (s < lo || s >= hi) violated(c, "row " + std::to_string(r) + ": index " + std::to_string(v) + " not allowed");
        if (!seen.insert(v).second) violated(c, "row " + std::to_string(r) + ": duplicate index");
        if (naive::indexer_score(c, in, r, v) < t.kth - tol)
          violated(c, "row " + std::to_string(r) + ": index " + std::to_string(v) + " scores below the k-th");
      }
    } else {
      if (!qr.valid) continue;
      const naive::SdpaRow sr = naive::sdpa_row(c, nl, in, qr);
      for (int h = 0; h < c.hq; ++h) {
        const float lse = out.lse[size_t(qr.stats_row * c.hq + h)];
        if (sr.allowed > 0) {
          if (!std::isfinite(lse)) violated(c, "row " + std::to_string(r) + ": LSE not finite with allowed keys");
          if (std::fabs(lse - sr.lse[size_t(h)]) > 2e-4 * (1 + std::fabs(sr.lse[size_t(h)])))
            violated(c, "row " + std::to_string(r) + ": LSE differs from fp64");
        } else if (!(std::isinf(lse) && (lse < 0) == (c.empty_rows == ao::EmptyRows::NegInf))) {
          violated(c, "row " + std::to_string(r) + ": LSE must be " +
                          (c.empty_rows == ao::EmptyRows::NegInf ? "-inf" : "+inf (empty_rows=posinf)") +
                          " without allowed keys");
        }
        for (int e = 0; e < c.dim_v; ++e) {
          const double x = sr.o[size_t(h * c.dim_v + e)];
          const float g = out.o[size_t((qr.o_row * c.hq + h) * c.dim_v + e)];
          if (!(std::fabs(double(g) - x) <= 2e-4 + 2e-4 * std::fabs(x)))
            violated(c, "row " + std::to_string(r) + ": O differs from fp64");
        }
      }
    }
  }
  if (c.pass == ao::Pass::Bwd) check_gradients(c, l, nl, in, out);
  return 0;
}
