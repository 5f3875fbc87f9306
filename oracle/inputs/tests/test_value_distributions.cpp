// values= reaches the triggers it claims (value_distributions.h), on fresh seeds: measured on the exact
// reference's scores, not on the generator's intent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/case/case.h"
#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/layout/layout.h"
#include "attn_oracle/reference/reference.h"

using namespace ao;

namespace {

// Exact indexer scores of one row over its allowed keys (double, from the rounded inputs).
std::vector<double> indexer_scores(const Layout& l, const Inputs& in, int64_t r) {
  const Case& c = l.c;
  int64_t lo, hi;
  l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
  const int64_t base = l.docs[size_t(l.seg_of(r).doc)].kv_off;
  std::vector<double> s;
  for (int64_t k = lo; k < hi; ++k) {
    double sum = 0;
    for (int h = 0; h < c.heads; ++h) {
      double dot = 0;
      for (int e = 0; e < c.dim; ++e)
        dot += double(in.q[size_t((r * c.heads + h) * c.dim + e)]) * in.k[size_t((base + k) * c.dim + e)];
      sum += double(in.w[size_t(r * c.heads + h)]) * std::max(dot, 0.0);
    }
    s.push_back(l.scale * sum);
  }
  return s;
}

}  // namespace

TEST(ValueDistributions, ExtremeSdpaRowsHaveEveryLogitBelowFp16Max) {
  for (uint64_t seed : {5u, 77u, 901u}) {
    for (const char* dt : {"bf16", "fp16"}) {
      const Layout l = make_layout(parse_case(fmt::format("op=sdpa docs=40,23 hq=4 hkv=2 values=extreme dtype={} seed={}", dt, seed)));
      const Inputs in = make_inputs(l);
      Outputs out = make_sentinel_outputs(l);
      reference_sdpa(l, in, out);
      int extreme = 0, normal = 0;
      for_each_valid_row(l, RowBuffer::Stats, [&](int64_t, int64_t srow) {
        const float lse = out.lse[size_t(srow * l.c.hq)];
        (lse < -65504.f * 2 ? extreme : normal)++;
        if (lse < -65504.f * 2) {
          EXPECT_LT(lse, -5e5f);  // -2048^2/8 + log(keys)
        }
      });
      EXPECT_GT(extreme, 20);
      EXPECT_GT(normal, 20);
    }
  }
}

TEST(ValueDistributions, ExtremeIndexerRowsHaveFewerThanKScoresAboveTheFp16InfBin) {
  for (uint64_t seed : {6u, 78u}) {
    const Layout l = make_layout(parse_case(fmt::format("op=indexer docs=700 topk=64 values=extreme seed={}", seed)));
    const Inputs in = make_inputs(l);
    int short_rows = 0;
    for (int64_t r = 100; r < 700; r += 2) {  // even tokens (one document: token = row)
      const auto s = indexer_scores(l, in, r);
      const auto above = std::count_if(s.begin(), s.end(), [](double x) { return x >= -65504; });
      EXPECT_LT(above, int64_t(s.size()));
      short_rows += above < 64;
    }
    EXPECT_GT(short_rows, 200);
  }
}

TEST(ValueDistributions, PlateauPutsTheKthScoreOnAZeroPlateau) {
  for (uint64_t seed : {7u, 79u}) {
    for (int dim : {32, 128, 256}) {
      const Layout l = make_layout(parse_case(fmt::format("op=indexer docs=900 dim={} topk=64 values=plateau seed={}", dim, seed)));
      const Inputs in = make_inputs(l);
      for (int64_t r : {600, 899}) {
        auto s = indexer_scores(l, in, r);
        std::sort(s.begin(), s.end(), std::greater<>());
        EXPECT_EQ(s[63], 0.0) << "row " << r;
        EXPECT_GT(std::count(s.begin(), s.end(), 0.0), int64_t(s.size()) / 2);
        EXPECT_GT(s[0], 0.0);
      }
    }
  }
}

TEST(ValueDistributions, ClusteredScoresShareTheKthScoresLeadingBits) {
  const Layout l = make_layout(parse_case("op=indexer docs=5000 topk=64 values=clustered rows=4 seed=8"));
  const Inputs in = make_inputs(l);
  auto s = indexer_scores(l, in, 4999);
  std::sort(s.begin(), s.end(), std::greater<>());
  // A radix select's first pass bins fp32 scores by their top 12 bits (sign, exponent, 3 mantissa bits):
  // the k-th score's bin holds thousands of candidates.
  auto bin = [](double x) { return f32_bits(float(x)) >> 20; };
  const auto same = std::count_if(s.begin(), s.end(), [&](double x) { return bin(x) == bin(s[63]); });
  EXPECT_GT(same, 2048) << "k-th " << s[63];
}

TEST(ValueDistributions, NormalInputsAreUnchangedAndPadsKeepPoison) {
  Case c = parse_case("op=indexer docs=50,20 pad=3 topk=8 seed=9");
  const Inputs a = make_inputs(make_layout(c));
  c.values = Values::Extreme;
  const Layout l = make_layout(c);
  const Inputs b = make_inputs(l);
  ASSERT_EQ(a.k.size(), b.k.size());
  int differ = 0;
  for (size_t i = 0; i < a.k.size(); ++i) {
    if (std::isnan(a.k[i])) {
      EXPECT_TRUE(std::isnan(b.k[i])) << "pad slot " << i;  // poison stays
    }
    differ += !(a.k[i] == b.k[i]) && !std::isnan(a.k[i]);
  }
  EXPECT_GT(differ, 0);
}
