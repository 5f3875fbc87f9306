// The memory cap bounds the process: Layout::mem_bytes, the estimate the cap is
// checked against, is an upper bound of the measured peak RSS of `repro --backend cpu-ref` (inputs,
// both output sets, row and document metadata, reference and comparator scratch, process baseline),
// and a case admitted under --max-mem stays under it. Layout validation (LayoutMode::Describe, used by
// `show`, `gate`'s corpus check, bisect-run and shrink) builds no per-row vectors, and row sampling
// costs O(rows log rows) however large the buffers are.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/layout/layout.h"
#include "attn_oracle/pipeline/memory_budget.h"
#include "attn_oracle/internal/rng.h"
#include "cli_run.h"

namespace {

using namespace ao;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Cases whose memory is dominated by each part of the estimate in turn: per-row metadata (many rows
// of width 1), top-k candidates, sdpa score rows, padding capacity, sampled rows of a long document,
// a tiny case (the process baseline), and both backward passes.
TEST(MemoryCap, EstimateBoundsMeasuredPeakRss) {
  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000u;
  const std::string s = fmt::format(" seed={}", seed);
  const std::vector<std::string> lines = {
      "op=indexer docs=64*50000 heads=1 dim=1 topk=1" + s,
      "op=indexer docs=2000 heads=4 dim=32 topk=4096 mask=none" + s,
      "op=sdpa docs=4096 hq=2 hkv=1 dim=32 mask=none precision=fp64" + s,
      "op=sdpa docs=1000 tail=3000000 hq=1 dim=8" + s,
      "op=indexer docs=1000*2000 heads=1 dim=4 topk=4 rows=2000" + s,
      "op=indexer docs=16 heads=1 dim=4 topk=4" + s,
      // The backward: its inputs (dO, O, LSE; slots, targets), gradient sets and the comparator's
      // (before they were counted, the estimate was half the measured peak).
      "op=sdpa pass=bwd docs=2048 hq=8 hkv=2 dim=128" + s,
      "op=indexer pass=bwd docs=4096 heads=8 dim=64 topk=256" + s,
  };
  for (const auto& line : lines) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line), with_stage_memory({}), LayoutMode::Describe);
    // The cap set to the estimate (in GiB, rounded up to a MiB): the case is admitted and must run within it.
    const double cap_gib = std::ceil(double(l.mem_bytes) / double(1 << 20)) / 1024.0;
    auto args = test::split_words(line);
    args.insert(args.begin(), {"--max-mem", fmt::format("{}", cap_gib), "repro"});
    args.insert(args.end(), {"--backend", "cpu-ref"});
    const auto t0 = std::chrono::steady_clock::now();
    const test::ChildRun r = test::run_cli_measured(args);
    ASSERT_EQ(r.rc, 0);
    const double ratio = double(r.max_rss_bytes) / double(l.mem_bytes);
    std::printf("  %s: peak RSS %.1f MiB, estimate %.1f MiB (RSS/estimate %.2f), %.2f s\n", line.c_str(),
                double(r.max_rss_bytes) / (1 << 20), double(l.mem_bytes) / (1 << 20), ratio, seconds_since(t0));
    EXPECT_LE(r.max_rss_bytes, l.mem_bytes);
  }
}

// The case: 32M rows of width 1 were admitted under --max-mem 1 and used 3.3 GiB; now refused,
// naming the key, before anything is allocated (fast, small).
TEST(MemoryCap, RowMetadataCountsAgainstTheCap) {
  const auto t0 = std::chrono::steady_clock::now();
  const test::ChildRun r =
      test::run_cli_measured({"--max-mem", "1", "repro", "op=indexer", "docs=64*500000", "heads=1", "dim=1", "topk=1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_LT(r.max_rss_bytes, int64_t(256) << 20);
  EXPECT_LT(seconds_since(t0), 5.0);
  const Layout l = make_layout(parse_case("op=indexer docs=64*500000 heads=1 dim=1 topk=1"), {}, LayoutMode::Describe);
  EXPECT_GT(l.mem_bytes, int64_t(3) << 30);  // at least what it was measured to use
  EXPECT_LT(l.tensor_bytes, int64_t(1) << 30);  // the tensors alone were under the cap
}

// Validation (and so `show`, app/tests/test_show.cpp) builds nothing per row: a 300M-token document
// (was 16.9 s, 5.4 GiB) and rows=3999999 of 4M tokens (was 43 s) take well under a second.
TEST(MemoryCap, DescribeModeBuildsNoPerRowVectors) {
  for (const char* line : {"op=indexer docs=300000000 heads=1 dim=1 topk=1",
                           "op=indexer docs=4000000 heads=1 dim=1 topk=1 rows=3999999"}) {
    SCOPED_TRACE(line);
    const auto t0 = std::chrono::steady_clock::now();
    const Layout l = make_layout(parse_case(line), LayoutLimits{int64_t(1) << 50}, LayoutMode::Describe);
    EXPECT_TRUE(l.row_segment.empty());
    EXPECT_TRUE(l.check_rows.empty());
    EXPECT_GT(l.check_row_count, 0);
    EXPECT_LT(seconds_since(t0), 5.0);
    std::printf("  %s: validated in %.3f s\n", line, seconds_since(t0));
  }
}

// Sampling picks the same rows as the full enumeration did (boundary rows plus counter_hash draws
// over the concatenated segment rows), and the Describe count equals the Full list's size.
TEST(MemoryCap, SampledRowsAreTheSameInBothModes) {
  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000u;
  for (const char* line : {"op=indexer docs=301,19,4000 pad=3,5,0 cp=4 rank=1 rows=50",
                                 "op=sdpa docs=5000,1,999 rows=4000", "op=indexer docs=4000 rows=3999",
                                 "op=indexer docs=64 cp=2 rows=63", "op=sdpa docs=0,10,0 rows=3"}) {
    const std::string l2 = std::string(line) + fmt::format(" seed={}", seed);
    SCOPED_TRACE(l2);
    const Layout full = make_layout(parse_case(l2));
    const Layout desc = make_layout(parse_case(l2), {}, LayoutMode::Describe);
    EXPECT_EQ(int64_t(full.check_rows.size()), desc.check_row_count);
    EXPECT_EQ(full.check_row_count, desc.check_row_count);
    EXPECT_TRUE(std::is_sorted(full.check_rows.begin(), full.check_rows.end()));
    EXPECT_EQ(std::adjacent_find(full.check_rows.begin(), full.check_rows.end()), full.check_rows.end());
    for (int64_t r : full.check_rows) ASSERT_GE(full.row_segment[size_t(r)], 0) << r;
    // The enumeration it replaces: every segment row in a list, draws into a std::set.
    std::set<int64_t> pick;
    std::vector<int64_t> all;
    for (const auto& g : full.segments) {
      for (int64_t r = g.row0; r < g.row0 + g.rows; ++r) all.push_back(r);
      if (g.rows == 0) continue;
      pick.insert({g.row0, g.row0 + g.rows - 1});
      if (g.valid > 0) pick.insert(g.row0 + g.valid - 1);
      if (g.valid < g.rows) pick.insert(g.row0 + g.valid);
    }
    const int64_t rows = full.c.rows, segs = int64_t(full.segments.size());
    if (rows >= int64_t(all.size())) continue;  // every row
    for (uint64_t i = 0; int64_t(pick.size()) < rows + 4 * segs && i < uint64_t(4 * rows); ++i)
      pick.insert(all[counter_hash(full.c.seed, 99, i) % all.size()]);
    EXPECT_EQ(full.check_rows, std::vector<int64_t>(pick.begin(), pick.end()));
    EXPECT_EQ(full.mem_bytes, desc.mem_bytes);
  }
}

}  // namespace
