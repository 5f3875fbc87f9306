// The layout generator: every case valid and canonical over thousands of seeds, deterministic, and
// each edge family it promises actually appears.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

// --dims deepseek: DeepSeek-V3.2's indexer (64 heads x 128) with top-k a multiple of 128, both passes,
// valid and round-tripping (what cuDNN frontend's SM90 indexer backward serves).
TEST(FuzzGenerator, DeepseekDimsAre64HeadsAndBlockTopk) {
  GenOptions o;
  o.dims = DimsProfile::Deepseek;
  o.op = Op::Indexer;
  std::map<int, int> topk;
  int bwd = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    const Case c = generate_case(6, i, o);
    ASSERT_NO_THROW(make_layout(c)) << print_case(c);
    ASSERT_EQ(parse_case(print_case(c)), c) << print_case(c);
    EXPECT_EQ(c.heads, 64);
    EXPECT_EQ(c.dim, 128);
    EXPECT_EQ(c.topk % 128, 0) << print_case(c);
    ++topk[c.topk];
    bwd += c.pass == Pass::Bwd;
  }
  EXPECT_GE(topk.size(), 5u);
  EXPECT_GT(topk[2048], 60);
  EXPECT_GT(bwd, 0);
  EXPECT_EQ(parse_dims("deepseek"), DimsProfile::Deepseek);
  EXPECT_STREQ(dims_name(DimsProfile::Deepseek), "deepseek");
}

// --dims wide: every sdpa case's head dim above 256 (264/384/512, 576 with d_v 512), GQA among the heads,
// valid and round-tripping; the simplest choices give d = 512; small's cases are unchanged by it.
TEST(FuzzGenerator, WideDimsAreAboveTheSmallTilesAndValid) {
  GenOptions o;
  o.dims = DimsProfile::Wide;
  o.op = Op::Sdpa;
  std::map<int, int> dims;
  int gqa = 0;
  for (uint64_t i = 0; i < 600; ++i) {
    const Case c = generate_case(7, i, o);
    ASSERT_NO_THROW(make_layout(c)) << print_case(c);
    ASSERT_EQ(parse_case(print_case(c)), c) << print_case(c);
    EXPECT_GT(c.dim, 256) << print_case(c);
    EXPECT_EQ(c.dim_v, c.dim == 576 ? 512 : c.dim) << print_case(c);
    ++dims[c.dim];
    gqa += c.hq > c.hkv && c.hkv > 1;
  }
  EXPECT_EQ(dims.size(), 4u);
  EXPECT_GT(dims[512], 100);
  EXPECT_GT(gqa, 50);
  EXPECT_EQ(replay_choices({}, o).dim, 512);
  EXPECT_EQ(parse_dims("wide"), DimsProfile::Wide);
  EXPECT_STREQ(dims_name(DimsProfile::Wide), "wide");
  GenOptions small;
  small.op = Op::Sdpa;
  int small_wide = 0;
  for (uint64_t i = 0; i < 600; ++i) small_wide += generate_case(7, i, small).dim > 256;
  EXPECT_EQ(small_wide, 0);
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
  } catch (const BadInput& e) {
    EXPECT_EQ(e.key, "dims");
  }
  EXPECT_THROW(parse_op_filter("attention"), BadInput);
  try {
    parse_pass_filter("backward");
    FAIL();
  } catch (const BadInput& e) {
    EXPECT_EQ(e.key, "pass");
  }
}

// --pass bwd: a backward kernel's campaign gets a backward case every time, of both ops, with every row
// judged and packs small enough for that; --pass fwd: none; the mix keeps both.
TEST(FuzzGenerator, PassFilterGivesOnlyThatPass) {
  for (DimsProfile d : {DimsProfile::Small, DimsProfile::Glm}) {
    GenOptions o;
    o.dims = d;
    o.pass = Pass::Bwd;
    std::map<Op, int> ops;
    for (uint64_t seed : {1ull, 5ull})
      for (uint64_t i = 0; i < 400; ++i) {
        const Case c = generate_case(seed, i, o);
        const std::string line = print_case(c);
        ASSERT_EQ(c.pass, Pass::Bwd) << line;
        ASSERT_EQ(c.rows, 0) << line;
        const Layout l = make_layout(c);
        int64_t rows = 0;
        for (const auto& s : l.segments) rows += s.rows;
        EXPECT_LE(rows, 2048 + 4096) << line;  // the pack cap, plus the padding a layout adds
        ASSERT_EQ(replay_choices(generate_recorded(seed, i, o).choices, o), c) << line;
        ++ops[c.op];
      }
    EXPECT_GT(ops[Op::Sdpa], 100);
    EXPECT_GT(ops[Op::Indexer], 100);
  }
  GenOptions fwd;
  fwd.pass = Pass::Fwd;
  int mixed_bwd = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    EXPECT_EQ(generate_case(3, i, fwd).pass, Pass::Fwd) << i;
    mixed_bwd += generate_case(3, i).pass == Pass::Bwd;
  }
  EXPECT_GT(mixed_bwd, 20);  // the default mix still draws the training path
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

// The defect catalog's triggers a case reaches, by name (the layout facts each one needs).
std::map<std::string, bool> catalog_triggers(const Case& c) {
  std::map<std::string, bool> seen;
  auto hit = [&](const std::string& k, bool cond) { seen[k] = seen[k] || cond; };
  const Layout l = make_layout(c, {}, LayoutMode::Describe);
  const size_t B = c.q_lens.size();
  const bool idx = c.op == Op::Indexer, sdpa = c.op == Op::Sdpa;
  int64_t max_allowed = 0, max_seg_rows = 0, min_allowed = INT64_MAX;
  bool empty_row = false;
  for (const auto& s : l.segments) {
    max_seg_rows = std::max(max_seg_rows, s.valid);
    for (int64_t r = 0; r < s.valid; ++r) {
      int64_t lo, hi;
      l.allowed_range(s.doc, s.pos0 + r, lo, hi);
      max_allowed = std::max(max_allowed, hi - lo);
      min_allowed = std::min(min_allowed, hi - lo);
      empty_row |= hi <= lo;
    }
  }
  bool q_longer = false, kv_empty = false, decode = false, unaligned_cp = false;
  for (size_t b = 0; b < B; ++b) {
    q_longer |= c.q_lens[b] > c.kv_lens[b];
    kv_empty |= c.kv_lens[b] == 0;
    decode |= c.q_lens[b] == 1 && c.kv_lens[b] > 1;
    unaligned_cp |= c.cp > 1 && c.q_lens[b] % (c.cp_scheme == CpScheme::Zigzag ? 2 * c.cp : c.cp) != 0;
  }
  int interior_gaps = 0;  // gaps between K/V documents before the last one: [a a a pad b b pad pad c]
  for (size_t b = 0; b + 1 < B; ++b)
    interior_gaps += l.docs[b + 1].kv_off > l.docs[b].kv_off + l.docs[b].kv_len;
  const bool window = c.window != 0 || c.window_right != 0 || c.window_convention == WindowConvention::Fa;

  hit("values=extreme sdpa: every logit < -65504", sdpa && c.values == Values::Extreme);
  hit("values=extreme indexer: fewer scores >= -65504 than k",
      idx && c.values == Values::Extreme && c.topk > max_allowed / 32 + 1);
  hit("values=plateau: zero plateau at the k-th", idx && c.values == Values::Plateau && c.topk < max_allowed);
  hit("values=clustered, row > 2048 keys", idx && c.values == Values::Clustered && max_allowed > 2048);
  hit("indexer row > 4096 keys", idx && max_allowed > 4096);
  hit("sdpa row > 4096 keys", sdpa && max_allowed > 4096);
  hit("segment > 148 rows", max_seg_rows > 148);
  hit("indexer topk > allowed", idx && c.topk > max_allowed);
  hit("interior padding (2+ gaps before the last doc)", B >= 3 && interior_gaps >= 2);
  hit("cp length not divisible by 2cp (padded)", unaligned_cp);
  hit("q > kv, bottomright, window", sdpa && q_longer && c.mask == MaskKind::BottomRight && window);
  hit("q > kv, bottomright, window_right > max_seqlen_kv",
      sdpa && q_longer && c.mask == MaskKind::BottomRight && c.window_right > l.max_seqlen_kv);
  hit("window_right > 0 (two-sided)", c.window_right > 0);
  hit("window (-1, 0) sentinel", c.window == -1 && c.window_right == 0);
  hit("window_right = -1", c.window_right == -1);
  hit("window_convention=fa", c.window_convention == WindowConvention::Fa);
  hit("cp with window (sdpa)", sdpa && c.cp > 1 && window);
  hit("kv_len = 0 among others", B >= 2 && kv_empty);
  hit("decode q_len = 1, mask none (sdpa)", sdpa && decode && c.mask == MaskKind::None);
  hit("GQA decode + num_splits > 1", sdpa && decode && c.hq > c.hkv && c.num_splits > 1);
  hit("num_splits > 1, 2+ docs", sdpa && c.num_splits > 1 && B >= 2);
  hit("num_splits > 1, a row with no key", sdpa && c.num_splits > 1 && empty_row);
  hit("max_seqlen_kv > longest", c.max_seqlen_kv > 0 && c.max_seqlen_kv > *std::max_element(c.kv_lens.begin(), c.kv_lens.end()));
  hit("max_seqlen_q > longest", c.max_seqlen_q > 0 && c.max_seqlen_q > *std::max_element(c.q_lens.begin(), c.q_lens.end()));
  hit("start_pos > 0 (indexer)", idx && c.start_pos > 0);
  hit("ratio > 1 and q_len = 1", idx && c.ratio > 1 && decode);
  hit("empty_rows=posinf", c.empty_rows == EmptyRows::PosInf);
  hit("ties=strict with ties (levels/plateau)", c.ties == Ties::Strict && (c.levels > 0 || c.values == Values::Plateau));
  hit("indexer dim 32 bf16 (rows < 128 bytes)", idx && c.dim == 32 && c.dtype == DType::BF16);
  for (int d : {32, 64, 128, 256}) hit("dim " + std::to_string(d), c.dim == d);
  // The training path (models/backward.cpp, models/indexer_backward.cpp): each model's trigger one pass later.
  const bool bwd = c.pass == Pass::Bwd;
  int64_t valid_rows = 0;
  for (const auto& s : l.segments) valid_rows += s.valid;
  hit("sdpa pass=bwd, Q pad slots", sdpa && bwd && l.q_rows > valid_rows);
  hit("sdpa pass=bwd, cp > 1", sdpa && bwd && c.cp > 1);
  hit("sdpa pass=bwd, GQA", sdpa && bwd && c.hq > c.hkv);
  hit("sdpa pass=bwd, a row with no key", sdpa && bwd && empty_row);
  hit("indexer pass=bwd, -1 slots (a row with fewer keys than topk)", idx && bwd && c.topk > min_allowed);
  hit("indexer pass=bwd, 2+ docs", idx && bwd && B >= 2);
  return seen;
}

// The defect catalog's triggers: each reached at a stated minimum rate over 5000 recorded cases
// (seed 13, --dims small, both ops). The table is printed (the README's trigger-rate table comes from it).
TEST(FuzzGenerator, ReachesTheCatalogTriggers) {
  const int N = 5000;
  std::map<std::string, int> seen;
  for (uint64_t i = 0; i < uint64_t(N); ++i)
    for (const auto& [k, hit] : catalog_triggers(generate_case(13, i))) seen[k] += hit ? 1 : 0;
  // Minimum rates in permille: 2000 cases then hold several of each (>= 3 per mille: ~6).
  const std::map<std::string, int> min_permille = {
      {"values=extreme sdpa: every logit < -65504", 10},
      {"values=extreme indexer: fewer scores >= -65504 than k", 10},
      {"values=plateau: zero plateau at the k-th", 5},
      {"values=clustered, row > 2048 keys", 5},
      {"indexer row > 4096 keys", 10},
      {"sdpa row > 4096 keys", 5},
      {"segment > 148 rows", 100},
      {"indexer topk > allowed", 50},
      {"interior padding (2+ gaps before the last doc)", 20},
      {"cp length not divisible by 2cp (padded)", 50},
      {"q > kv, bottomright, window", 5},
      {"q > kv, bottomright, window_right > max_seqlen_kv", 3},
      {"window_right > 0 (two-sided)", 10},
      {"window (-1, 0) sentinel", 3},
      {"window_right = -1", 5},
      {"window_convention=fa", 5},
      {"cp with window (sdpa)", 3},
      {"kv_len = 0 among others", 10},
      {"decode q_len = 1, mask none (sdpa)", 3},
      {"GQA decode + num_splits > 1", 3},
      {"num_splits > 1, 2+ docs", 20},
      {"num_splits > 1, a row with no key", 5},
      {"max_seqlen_kv > longest", 50},
      {"max_seqlen_q > longest", 30},
      {"start_pos > 0 (indexer)", 20},
      {"ratio > 1 and q_len = 1", 3},
      {"empty_rows=posinf", 5},
      {"ties=strict with ties (levels/plateau)", 10},
      {"indexer dim 32 bf16 (rows < 128 bytes)", 20},
      {"dim 32", 50},
      {"dim 64", 50},
      {"dim 128", 5},
      {"dim 256", 5},
      {"sdpa pass=bwd, Q pad slots", 20},
      {"sdpa pass=bwd, cp > 1", 10},
      {"sdpa pass=bwd, GQA", 20},
      {"sdpa pass=bwd, a row with no key", 5},
      {"indexer pass=bwd, -1 slots (a row with fewer keys than topk)", 10},
      {"indexer pass=bwd, 2+ docs", 10},
  };
  for (const auto& [k, n] : seen) {
    std::printf("  %-56s %5d / %d  (%.1f%%)\n", k.c_str(), n, N, 100.0 * n / N);
    ASSERT_TRUE(min_permille.count(k)) << k;
    EXPECT_GE(n * 1000, min_permille.at(k) * N) << "trigger family too rare: " << k;
  }
}

namespace {

// The case keys a campaign's families turn on (0 = the key at its default).
std::map<std::string, bool> key_families(const Case& c) {
  bool decode = false, kv_empty = false;
  for (size_t b = 0; b < c.q_lens.size(); ++b) decode |= c.q_lens[b] == 1, kv_empty |= c.kv_lens[b] == 0 && c.q_lens.size() > 1;
  return {
      {"cp", c.cp > 1},
      {"window / window_right / window_convention", c.window != 0 || c.window_right != 0},
      {"num_splits", c.num_splits > 1},
      {"max_seqlen_q / max_seqlen_kv", c.max_seqlen_q > 0 || c.max_seqlen_kv > 0},
      {"empty_rows=posinf", c.empty_rows == EmptyRows::PosInf},
      {"kv_lens with an empty document", kv_empty},
      {"q_lens = 1 (decode)", decode},
      {"mask=none", c.mask == MaskKind::None},
      {"values", c.values != Values::Normal},
      {"ratio", c.ratio > 1},
      {"levels", c.levels > 0},
      {"ties=strict", c.ties == Ties::Strict},
      {"q_offsets / kv_offsets / pad", !c.q_offsets.empty() || !c.q_pad.empty() || !c.kv_pad.empty()},
      {"o_offsets / stats_offsets", !c.o_offsets.empty() || !c.stats_offsets.empty()},
      {"rows (long rows sampled)", c.rows > 0},
  };
}

// The first case index (of `limit`) at which each name of `facts` holds, per seed.
template <class Facts>
std::map<std::string, std::vector<int>> first_hits(Facts facts, int seeds, int limit, const GenOptions& o = {}) {
  std::map<std::string, std::vector<int>> first;
  for (int s = 1; s <= seeds; ++s) {
    std::map<std::string, int> at;
    for (int i = 0; i < limit; ++i)
      for (const auto& [k, hit] : facts(generate_case(uint64_t(s), uint64_t(i), o)))
        if (hit && !at.count(k)) at[k] = i;
    for (const auto& [k, hit] : facts(generate_case(uint64_t(s), 0, o))) first[k].push_back(at.count(k) ? at[k] : -1);
  }
  return first;
}

}  // namespace

// The families take turns (generator.cpp, Emphasis): every key family is drawn within the first 30
// cases of each of 40 seeds, on both ops together and on each op alone (the worst first case of each
// is printed; a plain mix needs hundreds of cases for some).
TEST(FuzzGenerator, EveryKeyFamilyEarlyInEverySeed) {
  for (auto op : {std::optional<Op>{}, std::optional<Op>{Op::Indexer}, std::optional<Op>{Op::Sdpa}}) {
    GenOptions o;
    o.op = op;
    for (const auto& [k, firsts] : first_hits(key_families, 40, 30, o)) {
      const bool sdpa_only = k == "num_splits" || k == "empty_rows=posinf" || k == "o_offsets / stats_offsets" ||
                             k.rfind("window", 0) == 0;
      const bool indexer_only = k == "ratio" || k == "levels" || k == "ties=strict";
      if ((op == Op::Indexer && sdpa_only) || (op == Op::Sdpa && indexer_only)) continue;
      for (size_t s = 0; s < firsts.size(); ++s)
        EXPECT_GE(firsts[s], 0) << k << " not drawn in the first 30 cases of seed " << s + 1
                                << (op ? std::string(" op=") + to_string(*op) : std::string());
      std::printf("  %-8s %-44s worst first case %d\n", op ? to_string(*op) : "any", k.c_str(),
                  *std::max_element(firsts.begin(), firsts.end(), [](int x, int y) { return (x < 0 ? 1 << 20 : x) < (y < 0 ? 1 << 20 : y); }));
    }
  }
}

// Every catalog trigger early in every campaign: within 20 cases on the median seed of 20 and within
// 100 on every seed (a plain mix reaches some of them in fewer than 1 case in 200). At a real kernel's
// seconds per case, 100 cases is the budget of a short campaign. SDPA rows past 4096 keys are drawn for
// kernels' long-row paths, but no catalog model needs them (off-by-one-causal, their one user, is found
// in the first cases anyway): within 30 on the median seed and 300 on every seed.
// The training path's triggers (pass=bwd with its layout) are drawn in a fifth of the cases, after every
// structural decision so that the forward cases keep their layouts: within 40 on the median seed and
// 300 on every seed.
TEST(FuzzGenerator, EveryCatalogTriggerEarlyInEverySeed) {
  const std::set<std::string> coverage_only = {"sdpa row > 4096 keys"};
  for (const auto& [k, firsts] : first_hits(catalog_triggers, 20, 300)) {
    std::vector<int> f = firsts;
    for (int& x : f) x = x < 0 ? 100000 : x;
    std::sort(f.begin(), f.end());
    std::printf("  %-56s median %3d, worst %4d\n", k.c_str(), f[f.size() / 2], f.back());
    const bool training = k.find("pass=bwd") != std::string::npos;
    const int worst = coverage_only.count(k) || training ? 300 : 100,
              median = training ? 40 : coverage_only.count(k) ? 30 : 20;
    EXPECT_LT(f.back(), worst) << k << ": not within " << worst << " cases of some seed";
    EXPECT_LE(f[f.size() / 2], median) << k << ": median first case";
  }
}

// The emphasis only steers the PRNG: a recorded sequence with its emphasis decision set to the plain
// mix (0) replays to the same case, so shrinking never has to keep it.
TEST(FuzzGenerator, EmphasisNeverChangesAReplayedCase) {
  for (uint64_t i = 0; i < 600; ++i) {
    GeneratedCase g = generate_recorded(17, i);
    ASSERT_FALSE(g.choices.empty());
    Choices plain = g.choices;
    plain[0] = 0;
    EXPECT_EQ(print_case(replay_choices(plain)), print_case(g.c)) << "case " << i;
  }
}
