// Comparator metrics on crafted outputs: tie-aware recall (exact ties, near ties at the documented
// tolerance, clearly worse keys), strict overlap vs tie-aware recall, -1 fill rules, SDPA tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/reference/reference.h"
#include "verdict_probe.h"

using namespace ao;
using ao::test::failed;
using ao::test::metric;
using ao::test::reference;

namespace {

// Hand-built indexer inputs with known scores: one head, w = 1, q = e0, so score(t, s) = ReLU(k[s][0]).
// Every key is allowed for every row (mask=none). Top-4 of the values below: 10 (s1), 9 (s3), 8 (s5)
// and a tie at 7 (s7, s9) that the reference breaks to the lower index s7. s11 (6) is clearly worse.
struct HandBuilt {
  Layout l;
  Inputs in;
  Outputs ref;
  explicit HandBuilt(const char* dtype) : l(make_layout(parse_case(fmt::format(
                                              "op=indexer docs=16 heads=1 dim=4 topk=4 mask=none dtype={}", dtype)))) {
    in = make_inputs(l);
    const float vals[16] = {1, 10, 2, 9, 3, 8, 4, 7, 5, 7, 0.5f, 6, 0.25f, 0.125f, 0.375f, 0.625f};
    for (int64_t r = 0; r < l.q_rows; ++r) {
      for (int d = 0; d < 4; ++d) in.q[size_t(r * 4 + d)] = d == 0 ? 1.f : 0.f;
      in.w[size_t(r)] = 1.f;
    }
    for (int64_t s = 0; s < 16; ++s)
      for (int d = 0; d < 4; ++d) in.k[size_t(s * 4 + d)] = d == 0 ? vals[s] : 0.f;
    ref = reference(l, in);
  }
  // Every row returns `key` in place of the reference's s7.
  Outputs replacing_s7_with(int32_t key) const {
    Outputs got = ref;
    for (int64_t r = 0; r < l.q_rows; ++r)
      for (int e = 0; e < 4; ++e)
        if (got.topk[size_t(r * 4 + e)] == 7) got.topk[size_t(r * 4 + e)] = key;
    return got;
  }
};

}  // namespace

TEST(TieAwareRecall, ReferencePicksLowerIndexOfATie) {
  HandBuilt h("fp32");
  std::vector<int32_t> row0(h.ref.topk.begin(), h.ref.topk.begin() + 4);
  std::sort(row0.begin(), row0.end());
  EXPECT_EQ(row0, (std::vector<int32_t>{1, 3, 5, 7}));
  EXPECT_EQ(compare(h.l, h.in, h.ref, h.ref).kind, Verdict::Pass);
}

TEST(TieAwareRecall, TiedKeyInsteadOfTheReferencesPassesStrictOverlapDoesNot) {
  HandBuilt h("bf16");
  const Verdict v = compare(h.l, h.in, h.replacing_s7_with(9), h.ref);
  EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
  EXPECT_EQ(metric(v, "tie_aware_recall_min"), 1.0);
  EXPECT_EQ(metric(v, "overlap_min"), 0.75);  // strict overlap sees a different key...
  EXPECT_EQ(metric(v, "overlap_mean"), 0.75);  // ...and is informational, not gated
  EXPECT_TRUE(v.find("overlap_min")->rule.empty());
}

TEST(TieAwareRecall, ClearlyWorseKeyFails) {
  for (const char* dt : {"bf16", "fp32"}) {
    HandBuilt h(dt);
    const Verdict v = compare(h.l, h.in, h.replacing_s7_with(11), h.ref);
    EXPECT_EQ(v.kind, Verdict::Fail) << dt;
    EXPECT_TRUE(failed(v, "tie_aware_recall_min")) << dt;
    EXPECT_EQ(metric(v, "tie_aware_recall_min"), 0.75) << dt;
  }
}

TEST(TieAwareRecall, ToleranceIsTheDocumentedForwardErrorBound) {
  // bf16/fp16: (D + H) * 2^-24 * M, fp32 adds 2^-10 * M (TF32), M = scale * sum_h |w| ||q_h||_1 * max|k|.
  HandBuilt b("bf16"), f("fp32");
  const double M = 1.0 * 1.0 * 10.0;
  EXPECT_DOUBLE_EQ(indexer_score_tolerance(b.l, b.in, 0, max_abs_key(b.l, b.in)), 5 * std::ldexp(1.0, -24) * M);
  EXPECT_DOUBLE_EQ(indexer_score_tolerance(f.l, f.in, 0, max_abs_key(f.l, f.in)),
                   (5 * std::ldexp(1.0, -24) + std::ldexp(1.0, -10)) * M);
  // score_tol= overrides it.
  auto l = make_layout(parse_case("op=indexer docs=16 heads=1 dim=4 topk=4 mask=none score_tol=0.5"));
  EXPECT_EQ(indexer_score_tolerance(l, b.in, 0, 10.0), 0.5);
}

TEST(TieAwareRecall, NearTiesWithinTolerancePassJustOutsideFail) {
  for (const char* dt : {"bf16", "fp16", "fp32"}) {
    for (double factor : {0.5, 0.9, 1.1, 2.0}) {
      HandBuilt h(dt);
      const double tol = indexer_score_tolerance(h.l, h.in, 0, max_abs_key(h.l, h.in));
      // s11 becomes a near tie of the k-th score 7; the reference still returns s7 (7 > 7 - x).
      h.in.k[11 * 4] = float(7.0 - factor * tol);
      ASSERT_LT(double(h.in.k[11 * 4]), 7.0);
      const double rel = (7.0 - double(h.in.k[11 * 4])) / tol;  // after float rounding
      ASSERT_NEAR(rel, factor, 0.1) << dt;
      const Verdict v = compare(h.l, h.in, h.replacing_s7_with(11), h.ref);
      SCOPED_TRACE(fmt::format("{} key at kth - {} * tol (tol {:.3g})", dt, factor, tol));
      if (factor < 1) {
        EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
        EXPECT_EQ(metric(v, "tie_aware_recall_min"), 1.0);
      } else {
        EXPECT_TRUE(failed(v, "tie_aware_recall_min"));
      }
      EXPECT_EQ(metric(v, "overlap_min"), 0.75);
    }
  }
}

TEST(TieAwareRecall, ExactTiesFromQuantisedInputs) {
  // levels=2 quantises q, k, w to {-1, 0, 1}: many exactly tied scores (vLLM-style tie stress).
  for (uint64_t seed : {5u, 6u, 7u}) {
    const Layout l = make_layout(parse_case(fmt::format("op=indexer docs=200 levels=2 topk=16 seed={}", seed)));
    const Inputs in = make_inputs(l);
    const Outputs ref = reference(l, in);
    const size_t K = 16;
    Outputs tied = ref, worse = ref;
    int swapped_tie = 0, swapped_worse = 0;
    const double kmax = max_abs_key(l, in);
    for (int64_t r : l.check_rows) {
      int64_t lo, hi;
      l.allowed_range(0, l.pos_of(r), lo, hi);
      if (hi - lo <= int64_t(K)) continue;
      const int32_t* rr = ref.topk.data() + size_t(r) * K;
      size_t kth_e = 0;
      double kth = INFINITY;
      for (size_t e = 0; e < K; ++e) {
        const double s = exact_indexer_score(l, in, r, rr[e]);
        if (s < kth) { kth = s; kth_e = e; }
      }
      const double tol = indexer_score_tolerance(l, in, r, kmax);
      int32_t tie = -1, bad = -1;
      for (int64_t s = lo; s < hi; ++s) {
        if (std::find(rr, rr + K, int32_t(s)) != rr + K) continue;
        const double x = exact_indexer_score(l, in, r, s);
        if (x == kth && tie < 0) tie = int32_t(s);
        if (x < kth - 10 * tol - 0.5 && bad < 0) bad = int32_t(s);
      }
      if (tie >= 0) { tied.topk[size_t(r) * K + kth_e] = tie; ++swapped_tie; }
      if (bad >= 0 && swapped_worse == 0) { worse.topk[size_t(r) * K + kth_e] = bad; ++swapped_worse; }
    }
    ASSERT_GT(swapped_tie, 20) << "the quantised inputs should produce many exact ties";
    ASSERT_EQ(swapped_worse, 1);
    const Verdict vt = compare(l, in, tied, ref);
    EXPECT_EQ(vt.kind, Verdict::Pass) << vt.reason;
    EXPECT_LT(metric(vt, "overlap_mean"), 1.0);
    const Verdict vw = compare(l, in, worse, ref);  // one clearly worse key in one row suffices
    EXPECT_TRUE(failed(vw, "tie_aware_recall_min"));
    EXPECT_EQ(metric(vw, "tie_aware_recall_min"), 15.0 / 16.0);
  }
}

TEST(FillRules, ShortRowsNeedExactlyKMinusAllowedFills) {
  const Layout l = make_layout(parse_case("op=indexer docs=40 topk=64 seed=9"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  const size_t K = 64;
  ASSERT_EQ(compare(l, in, ref, ref).kind, Verdict::Pass);
  const int64_t r = 10;  // position 10: 11 allowed keys, 53 fills
  ASSERT_EQ(std::count(ref.topk.begin() + long(r * K), ref.topk.begin() + long((r + 1) * K), -1), 53);
  auto first_fill = [&](Outputs& o) { return std::find(o.topk.begin() + long(r * K), o.topk.end(), -1); };
  {  // a fill replaced by a key already returned: duplicate and a missing -1
    Outputs o = ref;
    *first_fill(o) = o.topk[size_t(r * K)];
    const Verdict v = compare(l, in, o, ref);
    EXPECT_TRUE(failed(v, "duplicates"));
    EXPECT_TRUE(failed(v, "wrong_fill_rows"));
  }
  {  // a fill replaced by a causally masked key
    Outputs o = ref;
    *first_fill(o) = 30;
    const Verdict v = compare(l, in, o, ref);
    EXPECT_TRUE(failed(v, "out_of_causal"));
    EXPECT_TRUE(failed(v, "wrong_fill_rows"));
    EXPECT_EQ(metric(v, "wrong_fill_rows"), 1);
  }
  {  // order is not part of the contract: fills first, keys last still passes
    Outputs o = ref;
    std::reverse(o.topk.begin() + long(r * K), o.topk.begin() + long((r + 1) * K));
    EXPECT_EQ(compare(l, in, o, ref).kind, Verdict::Pass);
  }
  {  // a sentinel entry is an unwritten row, not a fill error
    Outputs o = ref;
    *first_fill(o) = kSentinelIndex;
    const Verdict v = compare(l, in, o, ref);
    EXPECT_TRUE(failed(v, "unwritten_rows"));
    EXPECT_FALSE(failed(v, "wrong_fill_rows"));
  }
}

TEST(FillRules, FullRowsMustNotFill) {
  const Layout l = make_layout(parse_case("op=indexer docs=200 topk=16 seed=4"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  Outputs o = ref;
  o.topk[size_t(150 * 16 + 15)] = -1;  // 151 allowed keys, the k-th dropped for a -1
  const Verdict v = compare(l, in, o, ref);
  EXPECT_TRUE(failed(v, "wrong_fill_rows"));
  EXPECT_TRUE(failed(v, "tie_aware_recall_min"));
  EXPECT_EQ(metric(v, "wrong_fill_rows"), 1);
}

TEST(FillRules, CpPadRowsMustBeAllMinusOne) {
  // docs=70 pad=58: padded length 128, cp=4 -> chunks of 16; rank 0 holds chunk 0 and chunk 7 (all padding).
  const Layout l = make_layout(parse_case("op=indexer docs=70 pad=58 cp=4 rank=0 topk=16 seed=2"));
  ASSERT_EQ(l.segments[1].valid, 0);
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  const int64_t pad_row = l.segments[1].row0 + 3;
  for (int e = 0; e < 16; ++e) ASSERT_EQ(ref.topk[size_t(pad_row * 16 + e)], -1);
  ASSERT_EQ(compare(l, in, ref, ref).kind, Verdict::Pass);
  Outputs o = ref;
  o.topk[size_t(pad_row * 16)] = 5;
  const Verdict v = compare(l, in, o, ref);
  EXPECT_TRUE(failed(v, "wrong_fill_rows"));
  EXPECT_TRUE(failed(v, "out_of_causal"));
}

TEST(SdpaTolerance, PerDtypeDefaultsAndOverrides) {
  EXPECT_EQ(sdpa_tolerance(parse_case("op=sdpa")).atol, 2e-2);
  EXPECT_EQ(sdpa_tolerance(parse_case("op=sdpa dtype=fp16")).atol, 5e-3);
  EXPECT_EQ(sdpa_tolerance(parse_case("op=sdpa dtype=fp32")).rtol, 1e-4);
  const auto t = sdpa_tolerance(parse_case("op=sdpa atol=0.1 rtol=0.2 lse_tol=0.3"));
  EXPECT_EQ(t.atol, 0.1);
  EXPECT_EQ(t.rtol, 0.2);
  EXPECT_EQ(t.lse_tol, 0.3);
}

TEST(SdpaTolerance, FixedOverridesJustInsidePassJustOutsideFail) {  // derived gates: test_tolerance.cpp
  for (const char* dt : {"bf16", "fp16", "fp32"}) {
    const Layout l = make_layout(parse_case(fmt::format("op=sdpa docs=50,20 dtype={} seed=3 atol=1e-3 rtol=1e-3 lse_tol=1e-3", dt)));
    const Inputs in = make_inputs(l);
    const Outputs ref = reference(l, in);
    const auto tol = sdpa_tolerance(l.c);
    const size_t e = size_t(30 * l.c.hq * l.c.dim_v + 5);
    const double bound = tol.atol + tol.rtol * std::fabs(double(ref.o[e]));
    for (double f : {0.5, 2.0}) {
      Outputs o = ref;
      o.o[e] = float(double(ref.o[e]) + f * bound);
      const Verdict v = compare(l, in, o, ref);
      EXPECT_EQ(failed(v, "tol_violations"), f > 1) << dt << " " << f;
      EXPECT_NEAR(metric(v, "max_abs_err"), f * bound, 1e-6);
    }
    for (double f : {0.5, 2.0}) {
      Outputs o = ref;
      o.lse[7] = float(double(ref.lse[7]) + f * tol.lse_tol);
      EXPECT_EQ(failed(compare(l, in, o, ref), "lse_max_err"), f > 1) << dt << " " << f;
    }
  }
}

TEST(SdpaTolerance, RowsWithoutKeysNeedZeroOutputAndMinusInfLse) {
  // bottom-right with q_len > kv_len: the first 5 rows sit at negative positions and see no key.
  const Layout l = make_layout(parse_case("op=sdpa q_lens=10 kv_lens=5 mask=bottomright seed=1"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  ASSERT_TRUE(std::isinf(ref.lse[0]) && ref.lse[0] < 0);
  ASSERT_EQ(ref.o[0], 0.f);
  ASSERT_EQ(compare(l, in, ref, ref).kind, Verdict::Pass);
  Outputs o = ref;
  o.lse[0] = 0.f;
  EXPECT_TRUE(failed(compare(l, in, o, ref), "lse_max_err"));
  o = ref;
  o.o[1] = 1.f;
  EXPECT_TRUE(failed(compare(l, in, o, ref), "tol_violations"));
}
