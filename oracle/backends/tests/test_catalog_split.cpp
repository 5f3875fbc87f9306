// The split-KV seam of the SDPA reference agrees with the exact path, and the catalog's split-KV /
// empty-row / LSE bug models carry their provenance (their trigger and outside cases run in
// test_bug_model_claims.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "../models/models.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"
#include "run_line.h"

using namespace ao;

namespace {

constexpr uint64_t kSeeds[] = {3, 101, 977};

// The split-KV seam with n splits merged on every row (guard: the merge's -inf guard).
struct Splits : ReferenceSeams {
  int n;
  bool guard;
  Splits(int n_, bool guard_ = true) : n(n_), guard(guard_) {}
  KeySplits key_splits(const Layout&) const override { return {.n = n, .guard = guard}; }
};

Outputs run_reference(const Trial& t, const ReferenceSeams& s) {
  Outputs o = make_sentinel_outputs(t.layout());
  reference_sdpa(t.layout(), t.inputs(), o, s);
  return o;
}


// Layouts for the split path: several documents (later splits empty for the short ones), a window
// (leading splits empty), bottom-right q < kv and q > kv (rows with no key: every split empty), GQA,
// NaN-poisoned pads, CP, mask=none, fp64 precision.
const char* const kSplitCases[] = {
    "op=sdpa docs=100,37,90 hq=4 hkv=4",
    "op=sdpa docs=200 window=16 dtype=fp32",
    "op=sdpa docs=150,60 window=40",
    "op=sdpa q_lens=20,7 kv_lens=50,30 mask=bottomright",
    "op=sdpa q_lens=30,12 kv_lens=10,40 mask=bottomright hq=4 hkv=2",
    "op=sdpa docs=70,50 hq=8 hkv=2",
    "op=sdpa docs=100,37 pad=11 tail=64 poison=nan",
    "op=sdpa docs=256 cp=4 rank=1",
    "op=sdpa docs=50,80 mask=none dtype=fp16",
    "op=sdpa docs=90,33 precision=fp64",
};

}  // namespace

TEST(SplitKv, MergedPartialStatesAgreeWithTheExactReference) {
  int differs = 0, runs = 0;
  for (const char* base : kSplitCases)
    for (uint64_t seed : kSeeds)
      for (int n : {int(2 + seed % 5), 64}) {
        const std::string line = fmt::format("{} seed={}", base, seed);
        SCOPED_TRACE(fmt::format("num_splits {}: {}", n, line));
        Trial t(parse_case(line));
        const Outputs exact = run_reference(t, exact_seams());
        const Outputs split = run_reference(t, Splits(n));
        const Verdict v = compare(t.layout(), t.inputs(), split, exact);
        EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
        differs += outputs_differ(t.layout(), split, exact);
        ++runs;
      }
  // The split path is a different computation (its rounding differs), not the exact path again.
  EXPECT_GT(differs, runs / 2);
}

TEST(SplitKv, OneSplitIsTheExactPath) {
  for (uint64_t seed : kSeeds) {
    Trial t(parse_case(fmt::format("op=sdpa docs=100,37 window=20 hq=4 hkv=2 seed={}", seed)));
    EXPECT_FALSE(outputs_differ(t.layout(), run_reference(t, Splits(1)), run_reference(t, exact_seams())));
  }
}

TEST(SplitKv, GuardKeepsEmptyStatesEmptyAndItsAbsenceGivesNaN) {
  // q > kv bottom-right: doc 0's first 20 rows see no key (every split empty); a window of 8 on a
  // 200-key document leaves splits 0 and 1 of 4 (50 keys each) empty for rows past 100.
  for (const char* base : {"op=sdpa q_lens=30,12 kv_lens=10,40 mask=bottomright", "op=sdpa docs=200 window=8"})
    for (uint64_t seed : kSeeds) {
      const std::string line = fmt::format("{} seed={}", base, seed);
      SCOPED_TRACE(line);
      Trial t(parse_case(line));
      const Layout& l = t.layout();
      const Outputs guarded = run_reference(t, Splits(4));
      const Outputs unguarded = run_reference(t, Splits(4, false));
      int64_t split_len = 0;
      for (const auto& d : l.docs) split_len = std::max(split_len, (d.kv_len + 3) / 4);
      int nan_rows = 0;
      for (int64_t r : l.check_rows) {
        if (!l.valid_row(r)) continue;
        const auto& s = l.seg_of(r);
        int64_t lo = 0, hi = 0;
        l.allowed_range(s.doc, l.pos_of(r), lo, hi);
        const bool two_empty = hi <= lo || lo >= 2 * split_len;  // splits 0 and 1 hold no allowed key
        const size_t srow = size_t(s.stats_row0 + (r - s.row0)), orow = size_t(s.o_row0 + (r - s.row0));
        EXPECT_FALSE(std::isnan(guarded.lse[srow * size_t(l.c.hq)])) << "row " << r;
        EXPECT_EQ(std::isnan(unguarded.lse[srow * size_t(l.c.hq)]), two_empty) << "row " << r;
        EXPECT_EQ(std::isnan(unguarded.o[orow * size_t(l.c.hq * l.c.dim_v)]), two_empty) << "row " << r;
        if (hi <= lo) {
          EXPECT_EQ(guarded.lse[srow * size_t(l.c.hq)], -INFINITY) << "row " << r;
        }
        nan_rows += two_empty;
      }
      EXPECT_GT(nan_rows, 0);
      EXPECT_EQ(compare(l, t.inputs(), guarded, guarded).kind, Verdict::Pass);
    }
}

TEST(CatalogSplit, EveryModelOfTheFamilyCarriesItsProvenance) {
  for (const auto& m : models::split_kv_models()) {
    EXPECT_FALSE(m.catalog.empty() || m.source.empty() || m.catches.empty()) << m.name;
  }
}

TEST(CatalogSplit, LsePlusInfIsTheEmptyRowsConventionSwitch) {
  // empty_rows=posinf: cpu-ref writes +inf for a row with no allowed key and the comparator expects it,
  // so lse-plus-inf is that convention (bitwise cpu-ref, a pass); the default (-inf) catches it.
  auto ref = make_backend("cpu-ref");
  for (uint64_t seed : kSeeds) {
    const std::string base = fmt::format("op=sdpa q_lens=30,12 kv_lens=10,40 mask=bottomright seed={}", seed);
    SCOPED_TRACE(base);
    Trial t(parse_case(base + " empty_rows=posinf"));
    const TrialRun want = t.run(*ref);
    ASSERT_TRUE(want.ok());
    int posinf = 0;
    for (float x : want.out.lse) posinf += std::isinf(x) && x > 0;
    EXPECT_GT(posinf, 0);
    auto be = make_backend("cpu-bug:lse-plus-inf");
    const TrialRun got = t.run(*be);
    EXPECT_FALSE(outputs_differ(t.layout(), got.out, want.out));
    EXPECT_EQ(t.judge(got, want).kind, Verdict::Pass);
    EXPECT_EQ(test::run_line(base, "cpu-bug:lse-plus-inf").verdict.kind, Verdict::Fail);
  }
}
