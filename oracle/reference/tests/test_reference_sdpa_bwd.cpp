// The SDPA backward reference (reference_sdpa_bwd.cpp) against a naive dense fp64 backward written
// from the formulas (P = exp(s - lse) from the saved LSE, D = rowsum(dO o O) from the saved O,
// dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO, GQA sums over the group) on
// random layouts from recorded seeds; CP ranks' partial dK/dV summed over the ranks against cp=1's.
// Tolerance: the reference runs at precision=fp64 and stores fp32: |x - naive| <= 1e-9 + 2^-23 |naive|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/case/case.h"
#include "attn_oracle/layout/layout.h"
#include "attn_oracle/reference/reference.h"

namespace ao {
namespace {

struct Grads {
  std::vector<double> dq, dk, dv;
};

Grads naive_bwd(const Layout& l, const Inputs& in) {
  const Case& c = l.c;
  const int Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = Hq / Hkv;
  Grads g;
  g.dq.assign(size_t(l.q_rows * Hq * D), 0);
  g.dk.assign(size_t(l.kv_rows * Hkv * D), 0);
  g.dv.assign(size_t(l.kv_rows * Hkv * Dv), 0);
  for (const auto& s : l.segments)
    for (int64_t i = 0; i < s.valid; ++i) {
      const int64_t r = s.row0 + i, orow = s.o_row0 + i, srow = s.stats_row0 + i;
      int64_t lo, hi;
      l.allowed_range(s.doc, s.pos0 + i, lo, hi);
      const int64_t base = l.docs[size_t(s.doc)].kv_off;
      for (int h = 0; h < Hq; ++h) {
        const int kh = h / G;
        const double lse = in.lse[size_t(srow * Hq + h)];
        if (hi <= lo || std::isinf(lse)) continue;
        double Dsum = 0;
        for (int e = 0; e < Dv; ++e)
          Dsum += double(in.dout[size_t((r * Hq + h) * Dv + e)]) * double(in.o[size_t((orow * Hq + h) * Dv + e)]);
        for (int64_t k = base + lo; k < base + hi; ++k) {
          double sc = 0, dp = 0;
          for (int e = 0; e < D; ++e)
            sc += double(in.q[size_t((r * Hq + h) * D + e)]) * double(in.k[size_t((k * Hkv + kh) * D + e)]);
          for (int e = 0; e < Dv; ++e)
            dp += double(in.dout[size_t((r * Hq + h) * Dv + e)]) * double(in.v[size_t((k * Hkv + kh) * Dv + e)]);
          const double p = std::exp(l.scale * sc - lse), ds = p * (dp - Dsum);
          for (int e = 0; e < Dv; ++e) g.dv[size_t((k * Hkv + kh) * Dv + e)] += p * in.dout[size_t((r * Hq + h) * Dv + e)];
          for (int e = 0; e < D; ++e) {
            g.dq[size_t((r * Hq + h) * D + e)] += l.scale * ds * in.k[size_t((k * Hkv + kh) * D + e)];
            g.dk[size_t((k * Hkv + kh) * D + e)] += l.scale * ds * in.q[size_t((r * Hq + h) * D + e)];
          }
        }
      }
    }
  return g;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<char>& rows,
                  size_t width, const std::string& what) {
  int64_t bad = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r]) continue;
    for (size_t e = 0; e < width; ++e) {
      const double x = got[r * width + e], y = want[r * width + e];
      if (!(std::fabs(x - y) <= 1e-9 + 0x1p-23 * std::fabs(y)) && bad++ < 3)
        ADD_FAILURE() << what << " row " << r << " elem " << e << ": " << x << " vs naive " << y;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

std::string random_bwd_line(std::mt19937_64& g) {
  const int hkv = 1 + int(g() % 2), hq = hkv * (1 + int(g() % 3));
  const int docs = 1 + int(g() % 3);
  std::string q, kv;
  for (int d = 0; d < docs; ++d) {
    q += fmt::format("{}{}", d ? "," : "", g() % 70);
    kv += fmt::format("{}{}", d ? "," : "", 1 + g() % 70);
  }
  const char* masks[] = {"causal", "bottomright", "none"};
  const char* mask = masks[g() % 3];
  std::string win = std::string(mask) != "none" && g() % 2 ? fmt::format(" window={}", 1 + g() % 20) : "";
  return fmt::format("op=sdpa pass=bwd q_lens={} kv_lens={} q_pad={} kv_pad={} hq={} hkv={} dim={} dim_v={} mask={}{} "
                     "dtype={} precision=fp64 seed={}",
                     q, kv, g() % 5, g() % 5, hq, hkv, 8 + 8 * (g() % 3), 8 + 8 * (g() % 2), mask, win,
                     g() % 2 ? "bf16" : "fp16", g() % 100000);
}

TEST(SdpaBwdReference, MatchesNaiveDenseBackward) {
  std::mt19937_64 g(20261204);
  for (int t = 0; t < 40; ++t) {
    const std::string line = random_bwd_line(g);
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_case_inputs(l);
    Outputs out = make_sentinel_outputs(l);
    reference_sdpa_bwd(l, in, out);
    const Grads want = naive_bwd(l, in);
    expect_close(out.dq, want.dq, valid_rows(l, RowBuffer::Q), size_t(l.c.hq * l.c.dim), "dq");
    expect_close(out.dk, want.dk, valid_rows(l, RowBuffer::KV), size_t(l.c.hkv * l.c.dim), "dk");
    expect_close(out.dv, want.dv, valid_rows(l, RowBuffer::KV), size_t(l.c.hkv * l.c.dim_v), "dv");
    // Pad slots of every gradient stay as they were handed over.
    const auto qv = valid_rows(l, RowBuffer::Q), kvv = valid_rows(l, RowBuffer::KV);
    for (size_t r = 0; r < qv.size(); ++r)
      if (!qv[r]) { EXPECT_TRUE(is_sentinel(out.dq[r * size_t(l.c.hq * l.c.dim)])) << "dq pad row " << r; }
    for (size_t r = 0; r < kvv.size(); ++r)
      if (!kvv[r]) { EXPECT_TRUE(is_sentinel(out.dk[r * size_t(l.c.hkv * l.c.dim)])) << "dk pad row " << r; }
  }
}

// dV alone (the comparator's column sums of P): dO's first `cols` columns replaced by fresh random
// weights, out.dv's first `cols` columns against the naive backward's dV on those weights, the other
// columns 0, dQ and dK left as handed over (sentinels), and a column count outside [1, dim_v] refused.
TEST(SdpaBwdReference, DvAloneIsTheNaiveDvOfItsColumns) {
  std::mt19937_64 g(20261205);
  for (int t = 0; t < 30; ++t) {
    const std::string line = random_bwd_line(g);
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    Inputs in = make_case_inputs(l);
    const int Dv = l.c.dim_v, cols = 1 + int(g() % 2);
    std::uniform_real_distribution<float> w(0.f, 1.f);
    std::vector<float> weights(in.dout.size(), 0.f);
    for (size_t i = 0; i < weights.size(); ++i)
      if (int(i % size_t(Dv)) < cols) weights[i] = w(g);
    Outputs out = make_sentinel_outputs(l);
    reference_sdpa_bwd_dv(l, in, weights, cols, out);
    in.dout = weights;
    const Grads want = naive_bwd(l, in);
    const auto kvv = valid_rows(l, RowBuffer::KV);
    std::vector<float> got_cols;
    std::vector<double> want_cols;
    for (size_t i = 0; i < out.dv.size(); ++i) {
      const size_t e = i % size_t(Dv), r = i / size_t(l.c.hkv * Dv);
      if (!kvv[r]) continue;
      if (int(e) < cols) {
        got_cols.push_back(out.dv[i]);
        want_cols.push_back(want.dv[i]);
      } else if (out.dv[i] != 0.f) {
        ADD_FAILURE() << "dv column " << e << " of row " << r << " is " << out.dv[i] << ", not 0";
        break;
      }
    }
    expect_close(got_cols, want_cols, std::vector<char>(got_cols.size(), 1), 1, "dv columns");
    for (float x : out.dq) ASSERT_TRUE(is_sentinel(x)) << "dq written";
    for (float x : out.dk) ASSERT_TRUE(is_sentinel(x)) << "dk written";
  }
  const Layout l = make_layout(parse_case("op=sdpa pass=bwd docs=20 hq=2 hkv=1 dim=8"));
  const Inputs in = make_case_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  EXPECT_THROW(reference_sdpa_bwd_dv(l, in, in.dout, 0, out), std::invalid_argument);
  EXPECT_THROW(reference_sdpa_bwd_dv(l, in, in.dout, l.c.dim_v + 1, out), std::invalid_argument);
}

// The comparator's two fp32 answers from one backward are, bit for bit, the fp32 reference's and the
// emulation's own runs: random layouts (GQA groups, masks, windows, pads, empty rows) and CP ranks.
TEST(SdpaBwdReference, OneRunGivesTheFp32AndEmulatedBackwardsBitForBit) {
  std::mt19937_64 g(20261206);
  std::vector<std::string> lines;
  for (int t = 0; t < 30; ++t) lines.push_back(random_bwd_line(g));
  lines.push_back("op=sdpa pass=bwd docs=40,24 cp=2 rank=1 hq=6 hkv=2 dim=16 dtype=fp16 seed=3");
  lines.push_back("op=sdpa pass=bwd docs=64 cp=4 rank=2 cp_scheme=contiguous hq=4 hkv=1 dim=8 seed=4");
  lines.push_back("op=sdpa pass=bwd q_lens=30,5 kv_lens=10,9 mask=bottomright hq=4 hkv=2 dim=8 seed=5");
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_case_inputs(l);
    Layout l32 = l;
    l32.c.precision = Precision::F32;
    Outputs f32 = make_sentinel_outputs(l), emul = make_sentinel_outputs(l);
    reference_sdpa_bwd(l32, in, f32);
    emulate_sdpa_bwd(l, in, emul);
    Outputs f32_one = make_sentinel_outputs(l), emul_one = make_sentinel_outputs(l);
    reference_and_emulate_sdpa_bwd_f32(l, in, f32_one, emul_one);
    for (auto t : {&Outputs::dq, &Outputs::dk, &Outputs::dv}) {
      ASSERT_EQ((f32.*t).size(), (f32_one.*t).size());
      EXPECT_EQ(std::memcmp((f32.*t).data(), (f32_one.*t).data(), 4 * (f32.*t).size()), 0) << "fp32";
      EXPECT_EQ(std::memcmp((emul.*t).data(), (emul_one.*t).data(), 4 * (emul.*t).size()), 0) << "emulation";
    }
    // The two answers differ (the emulation rounds P and dS to the dtype): neither is the other's copy.
    EXPECT_NE(std::memcmp(f32.dq.data(), emul.dq.data(), 4 * f32.dq.size()), 0);
  }
}

// The exact backward with the comparator's column sums beside it is, bit for bit, the backward alone and
// dV alone on the same weights (fp64 and fp32; random layouts, CP ranks, 1 or 2 columns); a column count
// outside [1, dim_v] is refused.
TEST(SdpaBwdReference, ColumnSumsBesideTheBackwardAreDvAloneBitForBit) {
  std::mt19937_64 g(20261207);
  std::vector<std::string> lines;
  for (int t = 0; t < 24; ++t) lines.push_back(random_bwd_line(g));
  lines.push_back("op=sdpa pass=bwd docs=40,24 cp=2 rank=1 hq=6 hkv=2 dim=16 dtype=fp16 precision=fp64 seed=3");
  lines.push_back("op=sdpa pass=bwd q_lens=30,5 kv_lens=10,9 mask=bottomright hq=4 hkv=2 dim=8 precision=fp64 seed=5");
  for (size_t t = 0; t < lines.size(); ++t) {
    SCOPED_TRACE(lines[t]);
    Layout l = make_layout(parse_case(lines[t]));
    if (t % 2) l.c.precision = Precision::F32;
    const Inputs in = make_case_inputs(l);
    const int cols = 1 + int(g() % 2);
    std::uniform_real_distribution<float> w(0.f, 1.f);
    std::vector<float> weights(in.dout.size(), 0.f);
    for (size_t i = 0; i < weights.size(); ++i)
      if (int(i % size_t(l.c.dim_v)) < cols) weights[i] = w(g);
    Outputs whole = make_sentinel_outputs(l), alone = make_sentinel_outputs(l);
    reference_sdpa_bwd(l, in, whole);
    reference_sdpa_bwd_dv(l, in, weights, cols, alone);
    Outputs both = make_sentinel_outputs(l), beside = make_sentinel_outputs(l);
    reference_sdpa_bwd_with_columns(l, in, both, weights, cols, beside);
    for (auto x : {&Outputs::dq, &Outputs::dk, &Outputs::dv})
      EXPECT_EQ(std::memcmp((whole.*x).data(), (both.*x).data(), 4 * (whole.*x).size()), 0) << "the backward";
    for (auto x : {&Outputs::dq, &Outputs::dk, &Outputs::dv})
      EXPECT_EQ(std::memcmp((alone.*x).data(), (beside.*x).data(), 4 * (alone.*x).size()), 0) << "the column sums";
  }
  const Layout l = make_layout(parse_case("op=sdpa pass=bwd docs=20 hq=2 hkv=1 dim=8"));
  const Inputs in = make_case_inputs(l);
  Outputs out = make_sentinel_outputs(l), cols = make_sentinel_outputs(l);
  EXPECT_THROW(reference_sdpa_bwd_with_columns(l, in, out, in.dout, 0, cols), std::invalid_argument);
  EXPECT_THROW(reference_sdpa_bwd_with_columns(l, in, out, in.dout, l.c.dim_v + 1, cols), std::invalid_argument);
}

// A CP rank's dK/dV is its partial over the all-gathered K/V buffer: the ranks' partials sum to the
// cp=1 gradient; each rank's dQ rows are cp=1's rows of the same tokens.
TEST(SdpaBwdReference, CpRankPartialsSumToTheWholeGradient) {
  std::mt19937_64 g(77);
  for (const char* scheme : {"zigzag", "contiguous"})
    for (int t = 0; t < 4; ++t) {
      const int cp = 2 + int(g() % 2);
      const int64_t a = 2 * cp * (1 + int64_t(g() % 6)), b = 2 * cp * (1 + int64_t(g() % 6));
      const std::string base = fmt::format("op=sdpa pass=bwd docs={},{} hq=4 hkv=2 dim=16 mask={} dtype=bf16 "
                                           "precision=fp64 seed={}",
                                           a, b, g() % 2 ? "causal" : "bottomright", g() % 1000);
      SCOPED_TRACE(base + " " + scheme + " cp=" + std::to_string(cp));
      const Layout whole = make_layout(parse_case(base));
      const Inputs win = make_case_inputs(whole);
      Outputs wout = make_sentinel_outputs(whole);
      reference_sdpa_bwd(whole, win, wout);
      std::vector<double> dk(wout.dk.size(), 0), dv(wout.dv.size(), 0);
      const size_t WQ = size_t(whole.c.hq * whole.c.dim);
      std::vector<int64_t> whole_row_of_token(size_t(whole.q_rows), -1);
      for (int64_t r = 0; r < whole.q_rows; ++r)
        if (whole.valid_row(r)) whole_row_of_token[size_t(q_token_id(whole, r))] = r;
      for (int rank = 0; rank < cp; ++rank) {
        const Layout l = make_layout(
            parse_case(fmt::format("{} cp={} rank={} cp_scheme={}", base, cp, rank, scheme)));
        ASSERT_EQ(l.kv_rows, whole.kv_rows);
        const Inputs in = make_case_inputs(l);
        Outputs out = make_sentinel_outputs(l);
        reference_sdpa_bwd(l, in, out);
        for (size_t i = 0; i < dk.size(); ++i) dk[i] += is_sentinel(out.dk[i]) ? 0 : out.dk[i];
        for (size_t i = 0; i < dv.size(); ++i) dv[i] += is_sentinel(out.dv[i]) ? 0 : out.dv[i];
        for (int64_t r = 0; r < l.q_rows; ++r) {
          if (!l.valid_row(r)) continue;
          const int64_t w = whole_row_of_token[size_t(q_token_id(l, r))];
          for (size_t e = 0; e < WQ; ++e)
            ASSERT_NEAR(out.dq[size_t(r) * WQ + e], wout.dq[size_t(w) * WQ + e], 1e-6) << "rank " << rank << " row " << r;
        }
      }
      const auto kvv = valid_rows(whole, RowBuffer::KV);
      const size_t WK = size_t(whole.c.hkv * whole.c.dim);
      for (size_t r = 0; r < kvv.size(); ++r)
        for (size_t e = 0; kvv[r] && e < WK; ++e) {
          ASSERT_NEAR(dk[r * WK + e], wout.dk[r * WK + e], 1e-5 + 1e-6 * std::fabs(wout.dk[r * WK + e])) << "dk row " << r;
          ASSERT_NEAR(dv[r * WK + e], wout.dv[r * WK + e], 1e-5 + 1e-6 * std::fabs(wout.dv[r * WK + e])) << "dv row " << r;
        }
    }
}

// The layout refuses keys the backward would ignore, naming them.
TEST(SdpaBwdReference, ForwardOnlyKeysAreRefused) {
  for (const char* bad : {"num_splits=2", "atol=0.1", "lse_tol=0.1"}) {
    try {
      make_layout(parse_case(std::string("op=sdpa pass=bwd docs=8 ") + bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos);
    }
  }
  EXPECT_THROW(make_layout(parse_case("op=sdpa docs=8 grad_pad=zero")), CaseError);
}

}  // namespace
}  // namespace ao
