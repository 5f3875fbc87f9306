// The layout generator: every case valid and canonical over thousands of seeds, deterministic, and
// each edge family it promises actually appears.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/layout/layout.h"

using namespace ao;

TEST(FuzzGenerator, ThousandsOfCasesAreValidAndRoundTrip) {
  int n = 0;
  for (uint64_t seed : {1ull, 2ull, 977ull})
    for (uint64_t i = 0; i < 1500; ++i) {
      const Case c = generate_case(seed, i);
      const std::string line = print_case(c);
      ASSERT_NO_THROW(make_layout(c)) << line;
      ASSERT_EQ(parse_case(line), c) << line;
      ++n;
    }
  EXPECT_EQ(n, 4500);
}

TEST(FuzzGenerator, GlmDimsAreRealisticAndValid) {
  GenOptions o;
  o.dims = DimsProfile::Glm;
  o.op = Op::Indexer;
  int glm_topk = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    const Case c = generate_case(5, i, o);
    ASSERT_NO_THROW(make_layout(c)) << print_case(c);
    ASSERT_EQ(parse_case(print_case(c)), c);
    EXPECT_EQ(c.heads, 32);
    EXPECT_EQ(c.dim, 128);
    glm_topk += c.topk == 2048;
  }
  EXPECT_GT(glm_topk, 100);
}

TEST(FuzzGenerator, DeterministicPerSeedAndIndex) {
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(print_case(generate_case(3, i)), print_case(generate_case(3, i)));
  int differ = 0;
  for (uint64_t i = 0; i < 50; ++i) differ += print_case(generate_case(3, i)) != print_case(generate_case(4, i));
  EXPECT_GT(differ, 45);
}

TEST(FuzzGenerator, OpFilterAndBadOptionsNameTheirKey) {
  GenOptions o;
  o.op = Op::Sdpa;
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(generate_case(1, i, o).op, Op::Sdpa);
  try {
    parse_dims("huge");
    FAIL();
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "dims");
  }
  EXPECT_THROW(parse_op_filter("attention"), CaseError);
}

// Every family the generator's header promises, counted over 4000 cases (seed 11).
TEST(FuzzGenerator, CoversTheEdgeFamilies) {
  std::map<std::string, int> seen;
  std::set<int> cps;
  auto hit = [&](const std::string& k, bool cond) { seen[k] += cond ? 1 : 0; };
  for (uint64_t i = 0; i < 4000; ++i) {
    const Case c = generate_case(11, i);
    const Layout l = make_layout(c);
    const size_t B = c.q_lens.size();
    int64_t max_len = 0;
    for (auto L : c.q_lens) max_len = std::max(max_len, L);
    for (auto L : c.q_lens) {
      hit("len 1", L == 1);
      for (int64_t t : {64, 128, 256})
        for (int64_t d : {-1, 0, 1}) hit("len " + std::to_string(t + d), L == t + d);
    }
    hit("many docs", B >= 8);
    hit("huge then tiny", B >= 2 && c.q_lens[0] >= 1000 && c.q_lens[1] <= 65);
    hit("largest last", B >= 2 && c.q_lens.back() == max_len && c.q_lens.front() < max_len);
    hit("largest first", B >= 2 && c.q_lens.front() == max_len && c.q_lens.back() < max_len);
    if (c.cp > 1) cps.insert(c.cp);
    hit("rank first", c.cp > 1 && c.rank == 0);
    hit("rank last", c.cp > 1 && c.rank == c.cp - 1);
    hit("rank middle", c.cp > 2 && c.rank == c.cp / 2);
    hit("zigzag multi-doc", c.cp > 1 && c.cp_scheme == CpScheme::Zigzag && B >= 2);
    hit("contiguous", c.cp > 1 && c.cp_scheme == CpScheme::Contiguous);
    bool partly = false, wholly = false;
    for (const auto& s : l.segments) {
      partly |= s.valid > 0 && s.valid < s.rows;
      wholly |= s.rows > 0 && s.valid == 0;
    }
    hit("cp chunk partly padding", c.cp > 1 && partly);
    hit("cp chunk wholly padding", c.cp > 1 && wholly);
    hit("crop", c.crop);
    bool gap0 = false, gap1 = false, gap_large = false;
    for (auto p : c.q_pad) gap0 |= p == 0, gap1 |= p == 1, gap_large |= p >= 64;
    hit("gap 0", gap0);
    hit("gap 1", gap1);
    hit("gap large", gap_large);
    hit("q pad != kv pad", c.q_pad != c.kv_pad);
    hit("explicit offsets", !c.q_offsets.empty());
    hit("offsets with capacity", c.q_offsets.size() == B + 1);
    hit("tail", c.tail > 0);
    hit("packed o/stats offsets", !c.o_offsets.empty() || !c.stats_offsets.empty());
    bool shorter = false, longer = false;
    for (size_t b = 0; b < B; ++b) shorter |= c.q_lens[b] < c.kv_lens[b], longer |= c.q_lens[b] > c.kv_lens[b];
    hit("q shorter, topleft", shorter && c.mask == MaskKind::TopLeft);
    hit("q shorter, bottomright", shorter && c.mask == MaskKind::BottomRight);
    hit("q longer, topleft", longer && c.mask == MaskKind::TopLeft && c.ratio == 1);
    hit("q longer, bottomright", longer && c.mask == MaskKind::BottomRight && c.ratio == 1);
    hit("mask none", c.mask == MaskKind::None);
    hit("window", c.window > 0);
    if (c.op == Op::Indexer) {
      int64_t max_allowed = 0;
      for (const auto& s : l.segments)
        for (int64_t r = 0; r < s.valid; ++r) {
          int64_t lo, hi;
          l.allowed_range(s.doc, s.pos0 + r, lo, hi);
          max_allowed = std::max(max_allowed, hi - lo);
        }
      hit("topk above allowed", c.topk > max_allowed);
      hit("topk below allowed", c.topk < max_allowed);
      hit("ratio", c.ratio > 1);
      hit("levels", c.levels > 0);
    } else {
      hit("gqa", c.hq > c.hkv);
      hit("mqa", c.hkv == 1 && c.hq > 1);
      hit("dim_v != dim", c.dim_v != c.dim);
    }
    for (auto d : {DType::F32, DType::BF16, DType::F16}) hit(std::string("dtype ") + to_string(d), c.dtype == d);
    for (auto p : {Poison::NaN, Poison::Inf, Poison::Large, Poison::None})
      hit("poison " + std::to_string(int(p)), c.poison == p);
    hit("fp64", c.precision == Precision::F64);
    hit("rows sampled", c.rows > 0);
    hit("indexer", c.op == Op::Indexer);
    hit("sdpa", c.op == Op::Sdpa);
  }
  for (const auto& [k, n] : seen) EXPECT_GT(n, 0) << "family never generated: " << k;
  EXPECT_EQ(cps, (std::set<int>{2, 3, 4, 8, 16, 32}));
}
