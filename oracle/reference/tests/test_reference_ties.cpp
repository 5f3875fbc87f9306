// Exact tie decisions of the indexer reference (reference_indexer.cpp, exact_decisions): with levels=3
// or 5 (2/N not a dyadic number) exact ties come out of fp32 a few ULP apart; the reference must still
// return the top-k by (exact score desc, index asc). Compared with the naive reference, whose fp64
// scores are exact for these small dims (fp16/bf16 grid values: 11-bit significands, D <= 8, H <= 4).
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "attn_oracle/reference/reference.h"
#include "naive_reference.h"

using namespace ao;

namespace {

// Rows whose returned indices (in order) differ from the exact top-k; `what` names the first few.
int64_t wrong_rows(const std::string& line, std::string& what, int64_t only_row = -1) {
  const Case c = parse_case(line);
  const Layout l = make_layout(c);
  const Inputs in = make_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  reference_indexer(l, in, out);
  const naive::NaiveLayout nl = naive::derive(c);
  int64_t bad = 0;
  for (const auto& r : nl.rows) {
    if (!r.valid || (only_row >= 0 && r.row != only_row)) continue;
    const naive::TopK want = naive::indexer_row(c, nl, in, r);
    const int32_t* got = out.topk.data() + r.row * c.topk;
    if (std::equal(want.idx.begin(), want.idx.end(), got)) continue;
    if (++bad <= 3) {
      what += fmt::format(" row {}: got", r.row);
      for (int e = 0; e < c.topk; ++e) what += fmt::format(" {}", got[e]);
      what += ", exact";
      for (int32_t x : want.idx) what += fmt::format(" {}", x);
      what += ";";
    }
  }
  return bad;
}

TEST(ReferenceTies, IssueRow62OrderedByExactScoreThenIndex) {
  std::string what;
  EXPECT_EQ(wrong_rows("op=indexer docs=38,53 heads=2 dim=1 topk=2 mask=topleft dtype=fp16 levels=3 precision=fp32 "
                       "seed=822318",
                       what, 62),
            0)
      << what;
}

TEST(ReferenceTies, TopKEqualsExactTopKUnderTieStress) {
  std::mt19937_64 rng(20261203);
  int64_t rows_bad = 0, cases = 0;
  for (int i = 0; i < 160; ++i) {
    const int B = 1 + int(rng() % 3);
    std::string docs;
    for (int b = 0; b < B; ++b) docs += fmt::format("{}{}", b ? "," : "", 1 + rng() % 90);
    const std::string line = fmt::format(
        "op=indexer docs={} heads={} dim={} topk={} mask={} dtype={} levels={} precision={} seed={}", docs,
        1 + rng() % 4, std::array{1, 2, 3, 8}[rng() % 4], 1 + rng() % 12, rng() % 2 ? "topleft" : "bottomright",
        std::array{"fp16", "bf16"}[rng() % 2], rng() % 2 ? 3 : 5, rng() % 4 ? "fp32" : "fp64", rng() % 1000000);
    std::string what;
    const int64_t bad = wrong_rows(line, what);
    ++cases;
    rows_bad += bad;
    EXPECT_EQ(bad, 0) << line << ":" << what;
  }
  EXPECT_EQ(cases, 160);
}

}  // namespace
