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
//  * sdpa: LSE finite on rows with allowed keys (-inf and O = 0 without), O and LSE within 2e-4 of fp64.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
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
  return 0;
}
