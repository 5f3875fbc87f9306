// Case-line parser / printer (case_line.cpp) and structural validation (layout.cpp):
//  * random lines over every key parse to the Case built beside them, parse(print(c)) == c and
//    print is canonical (print(parse(print(c))) == print(c));
//  * every validation rule rejects with ao::CaseError whose `key` names the offending key.
#include <array>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/pipeline/memory_budget.h"

using namespace ao;

namespace {

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t s) : rng(s) {}
  int64_t uni(int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(rng); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  double real(double lo, double hi) {  // log-uniform, full-precision doubles
    return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
  }
};

// A random list, written either plainly or with `v*n` runs; returns the text and fills `out`.
std::string rand_list(Gen& g, std::vector<int64_t>& out, int64_t lo, int64_t hi) {
  out.clear();
  std::string s;
  const int64_t groups = g.uni(1, 5);
  for (int64_t i = 0; i < groups; ++i) {
    const int64_t v = g.uni(lo, hi), n = g.coin(0.3) ? g.uni(1, 5) : 1;
    if (!s.empty()) s += ',';
    if (n > 1 || g.coin(0.1)) {
      s += fmt::format("{}*{}", v, n);
    } else {
      s += fmt::format("{}", v);
    }
    out.insert(out.end(), size_t(n), v);
  }
  return s;
}

// Builds a random line key by key, together with the Case the parser must produce.
std::pair<std::string, Case> random_case(uint64_t seed) {
  Gen g(seed);
  const Op op = g.coin() ? Op::Indexer : Op::Sdpa;
  Case e = defaults_for(op);
  std::vector<std::string> kv;
  kv.push_back(op == Op::Indexer ? "op=indexer" : "op=sdpa");
  auto add = [&](const std::string& k, const std::string& v) { kv.push_back(k + "=" + v); };
  std::vector<int64_t> tmp;
  switch (g.uni(0, 3)) {
    case 0: add("docs", rand_list(g, tmp, 0, 5000)); e.q_lens = e.kv_lens = tmp; break;
    case 1: add("lens", rand_list(g, tmp, 0, 5000)); e.q_lens = e.kv_lens = tmp; break;
    case 2:
      add("q_lens", rand_list(g, tmp, 0, 5000)); e.q_lens = tmp;
      add("kv_lens", rand_list(g, tmp, 0, 5000)); e.kv_lens = tmp;
      break;
    default:
      if (g.coin()) { add("q_lens", rand_list(g, tmp, 0, 99)); e.q_lens = e.kv_lens = tmp; }
      else { add("kv_lens", rand_list(g, tmp, 0, 99)); e.q_lens = e.kv_lens = tmp; }
  }
  switch (g.uni(0, 3)) {
    case 0: add("pad", rand_list(g, tmp, 0, 9)); e.q_pad = e.kv_pad = tmp; break;
    case 1: add("q_pad", rand_list(g, tmp, 0, 9)); e.q_pad = tmp; break;
    case 2:
      add("q_pad", rand_list(g, tmp, 0, 9)); e.q_pad = tmp;
      add("kv_pad", rand_list(g, tmp, 0, 9)); e.kv_pad = tmp;
      break;
    default: break;
  }
  switch (g.uni(0, 3)) {
    case 0: add("padded_offsets", rand_list(g, tmp, 0, 1 << 20)); e.q_offsets = e.kv_offsets = tmp; break;
    case 1: add("kv_offsets", rand_list(g, tmp, 0, 1 << 20)); e.kv_offsets = tmp; break;
    case 2:
      add("q_offsets", rand_list(g, tmp, 0, 1 << 20)); e.q_offsets = tmp;
      add("kv_offsets", rand_list(g, tmp, 0, 1 << 20)); e.kv_offsets = tmp;
      break;
    default: break;
  }
  if (op == Op::Sdpa && g.coin(0.3)) { add("o_offsets", rand_list(g, tmp, 0, 1000)); e.o_offsets = tmp; }
  if (op == Op::Sdpa && g.coin(0.3)) { add("stats_offsets", rand_list(g, tmp, 0, 1000)); e.stats_offsets = tmp; }
  switch (g.uni(0, 3)) {
    case 0: { int64_t x = g.uni(0, 1 << 30); add("capacity", fmt::format("{}", x)); e.q_capacity = e.kv_capacity = x; break; }
    case 1: { int64_t x = g.uni(0, 1 << 30); add("q_capacity", fmt::format("{}", x)); e.q_capacity = x; break; }
    case 2: { int64_t x = g.uni(0, 1 << 30); add("kv_capacity", fmt::format("{}", x)); e.kv_capacity = x; break; }
    default: break;
  }
  if (g.coin(0.3)) { e.tail = g.uni(0, 999); add("tail", fmt::format("{}", e.tail)); }
  if (g.coin(0.5)) { e.cp = int(g.uni(1, 64)); add("cp", fmt::format("{}", e.cp)); }
  if (g.coin(0.5)) { e.rank = int(g.uni(0, 63)); add("rank", fmt::format("{}", e.rank)); }
  if (e.cp > 1 && g.coin(0.3)) { e.cp_scheme = g.coin() ? CpScheme::Contiguous : CpScheme::Zigzag; add("cp_scheme", e.cp_scheme == CpScheme::Zigzag ? "zigzag" : "contiguous"); }
  if (e.cp > 1 && g.coin(0.3)) { e.crop = g.coin(); add("crop", e.crop ? "1" : "0"); }
  if (g.coin(0.5)) {
    const int64_t m = g.uni(0, 3);
    e.mask = m == 0 ? MaskKind::None : m == 3 ? MaskKind::BottomRight : MaskKind::TopLeft;
    add("mask", m == 0 ? "none" : m == 1 ? "causal" : m == 2 ? "topleft" : "bottomright");
  }
  if (g.coin(0.4)) { e.dim = int(g.uni(1, 1024)); add("dim", fmt::format("{}", e.dim)); }
  if (op == Op::Indexer) {
    if (g.coin(0.5)) { e.heads = int(g.uni(1, 1024)); add("heads", fmt::format("{}", e.heads)); }
    if (g.coin(0.5)) { e.topk = int(g.uni(1, 1 << 16)); add("topk", fmt::format("{}", e.topk)); }
    if (g.coin(0.3)) { e.ratio = int(g.uni(1, 1024)); add("ratio", fmt::format("{}", e.ratio)); }
    if (g.coin(0.3)) { e.score_tol = g.coin(0.1) ? 0.0 : g.real(1e-9, 10); add("score_tol", fmt::format("{}", e.score_tol)); }
    if (g.coin(0.3)) { e.min_recall = g.coin(0.1) ? 1.0 : g.real(0.01, 1); add("min_recall", fmt::format("{}", e.min_recall)); }
    if (g.coin(0.3)) { e.start_pos = g.uni(-1, 1 << 20); add("start_pos", fmt::format("{}", e.start_pos)); }
    if (g.coin(0.3)) { e.ties = g.coin() ? Ties::Strict : Ties::Set; add("ties", to_string(e.ties)); }
    if (g.coin(0.3)) { e.values = Values(g.uni(0, 3)); add("values", to_string(e.values)); }
  } else {
    if (g.coin(0.3)) { e.window_right = g.uni(-1, 1 << 20); add("window_right", fmt::format("{}", e.window_right)); }
    if (g.coin(0.3)) { e.window_convention = g.coin() ? WindowConvention::Fa : WindowConvention::Cudnn; add("window_convention", to_string(e.window_convention)); }
    if (g.coin(0.3)) { e.num_splits = int(g.uni(1, 1024)); add("num_splits", fmt::format("{}", e.num_splits)); }
    if (g.coin(0.3)) { e.empty_rows = g.coin() ? EmptyRows::PosInf : EmptyRows::NegInf; add("empty_rows", to_string(e.empty_rows)); }
    if (g.coin(0.3)) { e.values = g.coin() ? Values::Extreme : Values::Normal; add("values", to_string(e.values)); }
    if (g.coin(0.5)) { e.hq = int(g.uni(1, 1024)); add("hq", fmt::format("{}", e.hq)); }
    if (g.coin(0.5)) { e.hkv = int(g.uni(1, 1024)); add("hkv", fmt::format("{}", e.hkv)); }
    if (g.coin(0.4)) { e.dim_v = int(g.uni(1, 1024)); add("dim_v", fmt::format("{}", e.dim_v)); }
    if (g.coin(0.3)) { e.window = g.uni(-1, 1 << 20); add("window", fmt::format("{}", e.window)); }
    if (g.coin(0.3)) { e.atol = g.real(1e-9, 1); add("atol", fmt::format("{}", e.atol)); }
    if (g.coin(0.3)) { e.rtol = g.real(1e-9, 1); add("rtol", fmt::format("{}", e.rtol)); }
    if (g.coin(0.3)) { e.lse_tol = g.real(1e-9, 1); add("lse_tol", fmt::format("{}", e.lse_tol)); }
  }
  if (g.coin(0.5)) {
    const int64_t d = g.uni(0, 2);
    e.dtype = d == 0 ? DType::F32 : d == 1 ? DType::BF16 : DType::F16;
    add("dtype", to_string(e.dtype));
  }
  if (g.coin(0.7)) { e.seed = g.rng(); add("seed", fmt::format("{}", e.seed)); }
  if (g.coin(0.4)) {
    const int64_t p = g.uni(0, 3);
    e.poison = Poison(p);
    add("poison", p == 0 ? "nan" : p == 1 ? "inf" : p == 2 ? "large" : "none");
  }
  if (g.coin(0.4)) { e.precision = g.coin() ? Precision::F64 : Precision::F32; add("precision", e.precision == Precision::F64 ? "fp64" : "fp32"); }
  if (g.coin(0.3)) { e.scale = g.real(1e-6, 1e6); add("scale", fmt::format("{}", e.scale)); }
  if (g.coin(0.3)) {
    if (g.coin(0.2)) { e.rows = 0; add("rows", "all"); }
    else { e.rows = g.uni(1, 1 << 20); add("rows", fmt::format("{}", e.rows)); }
  }
  if (g.coin(0.3)) { e.max_seqlen_q = g.uni(0, 1 << 20); add("max_seqlen_q", fmt::format("{}", e.max_seqlen_q)); }
  if (g.coin(0.3)) { e.max_seqlen_kv = g.uni(0, 1 << 20); add("max_seqlen_kv", fmt::format("{}", e.max_seqlen_kv)); }
  if (g.coin(0.3)) { e.levels = uint32_t(g.uni(2, 1 << 24)); add("levels", fmt::format("{}", e.levels)); }
  if (g.coin(0.3)) { e.pad_writes = g.coin() ? PadWrites::Allow : PadWrites::Forbid; add("pad_writes", e.pad_writes == PadWrites::Allow ? "allow" : "forbid"); }
  if (op == Op::Sdpa && g.coin(0.3)) { e.probe = g.coin() ? Probe::Edges : Probe::None; add("probe", to_string(e.probe)); }
  if (g.coin(0.3)) { e.pass = g.coin() ? Pass::Bwd : Pass::Fwd; add("pass", to_string(e.pass)); }
  if (g.coin(0.3)) { e.grad_pad = g.coin() ? GradPad::Zero : GradPad::Untouched; add("grad_pad", to_string(e.grad_pad)); }
  if (op == Op::Indexer && g.coin(0.3)) {
    e.loss_mean = std::array{LossMean::Rows, LossMean::Valid, LossMean::Keyed, LossMean::Sum}[size_t(g.uni(0, 3))];
    add("loss_mean", to_string(e.loss_mean));
  }
  if (e.hkv == 0) e.hkv = e.hq;
  if (e.dim_v == 0) e.dim_v = e.dim;
  // Keys in random order (op included: it may come anywhere).
  std::shuffle(kv.begin(), kv.end(), g.rng);
  std::string line;
  for (const auto& x : kv) line += (line.empty() ? "" : (g.coin(0.1) ? "   " : " ")) + x;
  return {line, e};
}

TEST(CaseLine, RandomLinesParseAndRoundTrip) {
  for (uint64_t s = 0; s < 3000; ++s) {
    const auto [line, expect] = random_case(0xca5e0000 + s);
    SCOPED_TRACE(fmt::format("seed {}: {}", 0xca5e0000 + s, line));
    Case c;
    ASSERT_NO_THROW(c = parse_case(line));
    EXPECT_EQ(c, expect) << "parsed: " << print_case(c) << "\nexpected: " << print_case(expect);
    const std::string p = print_case(c);
    Case c2;
    ASSERT_NO_THROW(c2 = parse_case(p)) << p;
    EXPECT_EQ(c2, c) << p;
    EXPECT_EQ(print_case(c2), p);
  }
}

// The random lines above use every key of the table (case_keys.h), and their canonical lines print
// every key that is printed at all (all but aliases): a new key needs its case in random_case.
TEST(CaseLine, RandomLinesCoverEveryKey) {
  std::set<std::string> given, printed;
  auto names = [](const std::string& line, std::set<std::string>& into) {
    std::istringstream is(line);
    std::string tok;
    while (is >> tok) into.insert(tok.substr(0, tok.find('=')));
  };
  for (uint64_t s = 0; s < 3000; ++s) {
    const auto [line, expect] = random_case(0xca5e0000 + s);
    names(line, given);
    names(print_case(expect), printed);
  }
  for (const auto& k : case_key_table()) {
    EXPECT_TRUE(given.count(k.name)) << "random_case never gives key " << k.name;
    if (!k.alias_of) {
      EXPECT_TRUE(printed.count(k.name)) << "no canonical line prints key " << k.name;
    }
  }
}

TEST(CaseLine, CommentsAndSeedLines) {
  const Case a = parse_case("op=indexer docs=65536,65536 cp=32 rank=31 heads=32 dim=128 topk=2048 seed=7  # seed PR");
  EXPECT_EQ(a.q_lens, (std::vector<int64_t>{65536, 65536}));
  EXPECT_EQ(a.cp, 32);
  EXPECT_EQ(a.rank, 31);
  EXPECT_EQ(a.heads, 32);
  EXPECT_EQ(a.dim, 128);
  EXPECT_EQ(a.topk, 2048);
  EXPECT_EQ(a.seed, 7u);
  const Case b = parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13");
  EXPECT_EQ(b.q_offsets, (std::vector<int64_t>{0, 4, 8, 13}));
  EXPECT_EQ(b.kv_offsets, b.q_offsets);
  EXPECT_EQ(parse_case("op=sdpa docs=64*100").q_lens, std::vector<int64_t>(100, 64));
  EXPECT_EQ(print_case(parse_case("op=sdpa docs=64*100")), "op=sdpa docs=64*100");
  EXPECT_EQ(parse_case("op=sdpa mask=causal").mask, MaskKind::TopLeft);
}

struct Bad {
  std::string line;
  std::vector<std::string> keys;  // acceptable offending keys (usually one)
};

void expect_rejected(const Bad& b, const LayoutLimits& lim = {}) {
  SCOPED_TRACE(b.line);
  try {
    (void)make_layout(parse_case(b.line), with_stage_memory(lim));
    ADD_FAILURE() << "accepted";
  } catch (const CaseError& e) {
    bool named = false;
    for (const auto& k : b.keys) named |= e.key == k;
    EXPECT_TRUE(named) << "CaseError names key '" << e.key << "': " << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + e.key + "'"), std::string::npos) << e.what();
  }
}

TEST(CaseLineReject, UnknownRepeatedAndMalformed) {
  const std::vector<Bad> bad = {
      {"op=indexer foo=1", {"foo"}},
      {"op=indexer docs", {"docs"}},
      {"op=indexer =5", {"=5"}},
      {"op=bogus", {"op"}},
      {"op=indexer op=sdpa", {"op"}},
      {"op=indexer cp=2 cp=2", {"cp"}},
      {"op=sdpa docs=3 docs=3", {"docs"}},
      {"op=indexer topk=12x", {"topk"}},
      {"op=indexer topk=", {"topk"}},
      {"op=indexer topk=1e3", {"topk"}},
      {"op=indexer topk=+5", {"topk"}},
      {"op=indexer seed=-1", {"seed"}},
      {"op=indexer seed=1.5", {"seed"}},
      {"op=indexer seed=18446744073709551616", {"seed"}},
      {"op=indexer rows=1e3", {"rows"}},
      {"op=indexer docs=12x,3", {"docs"}},
      {"op=indexer docs=", {"docs"}},
      {"op=indexer docs=1,,2", {"docs"}},
      {"op=indexer docs=4*", {"docs"}},
      {"op=indexer docs=4*0", {"docs"}},
      {"op=indexer docs=-4", {"docs"}},
      {"op=sdpa atol=nan", {"atol"}},
      {"op=sdpa rtol=inf", {"rtol"}},
      {"op=sdpa lse_tol=", {"lse_tol"}},
      {"op=indexer scale=0x10", {"scale"}},
      {"op=indexer scale=1e999", {"scale"}},
      {"op=indexer scale=0", {"scale"}},
      {"op=indexer min_recall=1.5", {"min_recall"}},
      {"op=indexer mask=diagonal", {"mask"}},
      {"op=indexer dtype=fp8", {"dtype"}},
      {"op=indexer crop=yes", {"crop"}},
      {"op=indexer poison=zero", {"poison"}},
      {"op=indexer precision=fp16", {"precision"}},
      {"op=indexer levels=1", {"levels"}},
      {"op=indexer cp=0", {"cp"}},
      {"op=indexer heads=0", {"heads"}},
      {"op=indexer dim=0", {"dim"}},
      {"op=indexer ratio=0", {"ratio"}},
  };
  for (const auto& b : bad) expect_rejected(b);
}

TEST(CaseLineReject, RangeAndOpSpecificKeys) {
  const std::vector<Bad> bad = {
      {"op=indexer topk=0", {"topk"}},
      {"op=indexer topk=-3", {"topk"}},
      {"op=indexer hq=4", {"hq"}},
      {"op=indexer hkv=1", {"hkv"}},
      {"op=indexer dim_v=8", {"dim_v"}},
      {"op=indexer window=3", {"window"}},
      {"op=indexer atol=0.1", {"atol"}},
      {"op=indexer rtol=0.1", {"rtol"}},
      {"op=indexer lse_tol=0.1", {"lse_tol"}},
      {"op=sdpa topk=5", {"topk"}},
      {"topk=5 op=sdpa", {"topk"}},  // op may come last; the check still applies
      {"op=sdpa heads=2", {"heads"}},
      {"op=sdpa ratio=2", {"ratio"}},
      {"op=sdpa score_tol=0.1", {"score_tol"}},
      {"op=sdpa min_recall=0.5", {"min_recall"}},
      {"op=sdpa hq=6 hkv=4", {"hkv", "hq"}},
      {"op=sdpa hq=2 hkv=4", {"hkv", "hq"}},
      {"op=sdpa window=4 mask=none", {"window"}},
      {"op=indexer docs=64 cp=4 rank=4", {"rank"}},
      {"op=indexer docs=64 rank=1", {"rank"}},
      {"op=indexer docs=3 q_lens=3", {"docs", "q_lens"}},
      {"op=indexer docs=3 kv_lens=3", {"docs", "kv_lens"}},
      {"op=indexer lens=3 docs=3", {"docs", "lens"}},
      {"op=indexer q_lens=3,4 kv_lens=3", {"kv_lens"}},
      // both-buffer aliases together with a per-buffer key: one would silently override the other
      {"op=sdpa lens=3,2 padded_offsets=0,4 q_offsets=0,5", {"q_offsets", "padded_offsets"}},
      {"op=sdpa lens=3,2 kv_offsets=0,3 padded_offsets=0,4", {"kv_offsets", "padded_offsets"}},
      {"op=sdpa docs=3,2 pad=1 q_pad=2", {"q_pad", "pad"}},
      {"op=sdpa docs=3,2 kv_pad=2 pad=1", {"kv_pad", "pad"}},
      {"op=sdpa docs=3,2 capacity=9 kv_capacity=8", {"kv_capacity", "capacity"}},
  };
  for (const auto& b : bad) expect_rejected(b);
}

TEST(CaseLineReject, OffsetsPadsAndCapacity) {
  const std::vector<Bad> bad = {
      // non-monotone
      {"op=sdpa lens=3,2 padded_offsets=5,0", {"padded_offsets"}},
      {"op=sdpa lens=3,2 q_offsets=5,0", {"q_offsets"}},
      {"op=sdpa lens=3,2 kv_offsets=5,0", {"kv_offsets"}},
      {"op=sdpa lens=3,2,1 q_offsets=0,6,4 kv_offsets=0,3,5", {"q_offsets"}},
      {"op=sdpa lens=3,2 o_offsets=5,0", {"o_offsets"}},
      {"op=sdpa lens=3,2 stats_offsets=5,0", {"stats_offsets"}},
      // overlapping
      {"op=sdpa lens=3,2 padded_offsets=0,2", {"padded_offsets"}},
      {"op=sdpa lens=3,2 q_offsets=1,3 kv_offsets=0,3", {"q_offsets"}},
      {"op=sdpa lens=3,2 kv_offsets=0,1", {"kv_offsets"}},
      {"op=sdpa lens=3,2 o_offsets=0,2", {"o_offsets"}},
      // past the capacity
      {"op=sdpa lens=3,2 padded_offsets=0,4 capacity=5", {"capacity"}},
      {"op=sdpa lens=3,2 padded_offsets=0,4,5", {"padded_offsets"}},  // B+1 entries: the last is the capacity
      {"op=sdpa lens=3,2 q_offsets=0,4,5", {"q_offsets"}},
      {"op=sdpa lens=3,2 kv_offsets=0,3,4", {"kv_offsets"}},
      {"op=sdpa docs=3,2 q_capacity=4", {"q_capacity"}},
      {"op=sdpa docs=3,2 kv_capacity=4", {"kv_capacity"}},
      {"op=sdpa docs=3,2 o_offsets=0,5", {"o_offsets"}},
      {"op=sdpa docs=3,2 stats_offsets=0,4", {"stats_offsets"}},
      {"op=sdpa lens=3,2 padded_offsets=0,4,8 capacity=9", {"capacity"}},  // disagrees with the last entry
      {"op=sdpa docs=3 capacity=10 tail=2", {"tail"}},
      // wrong number of offsets / pads
      {"op=sdpa lens=3,2 padded_offsets=0", {"padded_offsets"}},
      {"op=sdpa lens=3,2 padded_offsets=0,3,5,9", {"padded_offsets"}},
      {"op=sdpa lens=3,2 q_offsets=0,3,5,9", {"q_offsets"}},
      {"op=sdpa lens=3,2 kv_offsets=0", {"kv_offsets"}},
      {"op=sdpa lens=3,2 o_offsets=0,3,5,9", {"o_offsets"}},
      {"op=sdpa lens=3,2 stats_offsets=0", {"stats_offsets"}},
      {"op=sdpa docs=3,2,1 pad=1,2", {"pad"}},
      {"op=sdpa docs=3,2,1 q_pad=1,2", {"q_pad"}},
      {"op=sdpa docs=3,2,1 kv_pad=1,2,3,4", {"kv_pad"}},
      {"op=sdpa lens=3,2 pad=1 padded_offsets=0,4", {"pad", "padded_offsets"}},
  };
  for (const auto& b : bad) expect_rejected(b);
}

TEST(CaseLineReject, ContextParallelDivisibility) {
  const std::vector<Bad> bad = {
      {"op=indexer docs=12 cp=4", {"docs"}},                    // zigzag needs 2*cp = 8
      {"op=indexer docs=96,100 cp=4", {"docs"}},
      {"op=indexer docs=12 cp=8 cp_scheme=contiguous", {"docs"}},  // contiguous needs cp
      {"op=indexer docs=100 pad=3 cp=4", {"pad"}},
      {"op=indexer docs=96 q_pad=3 cp=4", {"q_pad", "pad"}},
      {"op=indexer docs=96 tail=3 cp=4", {"tail"}},
      {"op=indexer lens=90,90 padded_offsets=0,90 cp=4", {"padded_offsets"}},
      {"op=indexer docs=16 cp=2 capacity=18", {"capacity", "q_capacity"}},
      {"op=indexer docs=16 cp=2 q_capacity=18", {"q_capacity"}},
      {"op=indexer lens=16 padded_offsets=2 cp=2", {"padded_offsets"}},  // first sequence off the 2*cp grid
      {"op=indexer lens=16 q_offsets=2 cp=2", {"q_offsets"}},
      {"op=indexer q_lens=16 kv_lens=8 cp=2", {"kv_lens"}},  // self-attention only at ratio 1
      {"op=sdpa docs=16 cp=2 o_offsets=0", {"o_offsets"}},
  };
  for (const auto& b : bad) expect_rejected(b);
  // The same lengths are accepted where the scheme's divisor divides them.
  EXPECT_NO_THROW(make_layout(parse_case("op=indexer docs=12 cp=4 cp_scheme=contiguous")));
  EXPECT_NO_THROW(make_layout(parse_case("op=indexer docs=16 cp=4")));
  EXPECT_NO_THROW(make_layout(parse_case("op=indexer docs=100 pad=4 cp=4")));
  EXPECT_NO_THROW(make_layout(parse_case("op=indexer docs=96 tail=8 cp=4")));
  EXPECT_NO_THROW(make_layout(parse_case("op=indexer docs=16 cp=2 capacity=20")));
}

// Keys that would be accepted and silently ignored are errors naming the key, in the parser (explicit
// keys) and in make_layout (cases built in code).
TEST(CaseLineReject, KeysThatWouldBeIgnored) {
  const std::vector<Bad> bad = {
      {"op=indexer o_offsets=0", {"o_offsets"}},
      {"op=indexer docs=16,16 stats_offsets=0,16", {"stats_offsets"}},
      {"op=indexer docs=64 crop=1", {"crop"}},
      {"op=indexer docs=64 crop=0", {"crop"}},
      {"op=sdpa docs=64 crop=1", {"crop"}},
      {"op=indexer docs=64 cp=1 crop=1", {"crop"}},
      {"op=indexer docs=64 cp_scheme=contiguous", {"cp_scheme"}},
      {"op=sdpa docs=64 cp_scheme=zigzag", {"cp_scheme"}},
      {"op=indexer docs=64 ratio=2 mask=none", {"ratio"}},
      {"op=indexer q_lens=64 kv_lens=16 ratio=4 mask=none", {"ratio"}},
      {"op=indexer docs=64 cp=2 crop=1 mask=none", {"crop"}},
      {"op=sdpa docs=64 cp=2 rank=1 crop=1 mask=none", {"crop"}},
      // The chunk's key_len is its causal end; a right bound allows keys past it.
      {"op=sdpa docs=16 cp=2 rank=0 crop=1 window_right=-1 hq=1 dim=8", {"crop"}},
      {"op=sdpa docs=16 cp=2 rank=1 crop=1 window_right=3 hq=1 dim=8", {"crop"}},
  };
  for (const auto& b : bad) expect_rejected(b);
  // The same combinations built in code (no explicit keys): make_layout names them.
  auto built = [](auto edit) {
    Case c = defaults_for(Op::Indexer);
    edit(c);
    return c;
  };
  const std::vector<std::pair<Case, std::string>> cases = {
      {built([](Case& c) { c.crop = true; }), "crop"},
      {built([](Case& c) { c.cp_scheme = CpScheme::Contiguous; }), "cp_scheme"},
      {built([](Case& c) { c.ratio = 2; c.mask = MaskKind::None; }), "ratio"},
      {built([](Case& c) { c.cp = 2; c.crop = true; c.mask = MaskKind::None; }), "crop"},
      {[] {
         Case c = defaults_for(Op::Sdpa);
         c.q_lens = c.kv_lens = {16};
         c.hkv = c.hq, c.dim_v = c.dim;  // as parse_case resolves them
         c.cp = 2, c.crop = true, c.window_right = -1;
         return c;
       }(),
       "crop"},
      {built([](Case& c) { c.o_offsets = {0}; }), "o_offsets"},
  };
  for (const auto& [c, key] : cases) {
    SCOPED_TRACE(print_case(c));
    try {
      (void)make_layout(c);
      ADD_FAILURE() << "accepted";
    } catch (const CaseError& e) {
      EXPECT_EQ(e.key, key) << e.what();
    }
  }
  // Where the keys act, they stay accepted.
  for (const char* line : {"op=indexer docs=64 cp=2 crop=1", "op=indexer docs=64 cp=2 crop=0 cp_scheme=contiguous",
                           "op=indexer docs=64 ratio=2", "op=indexer docs=64 ratio=1 mask=none",
                           "op=sdpa docs=16,16 pad=2 o_offsets=0,16 stats_offsets=0,16",
                           "op=indexer docs=64 cp=2 crop=1 mask=topleft", "op=sdpa docs=16 cp=2 crop=1 hq=1 dim=8",
                           "op=sdpa docs=16 cp=2 crop=1 window=3 hq=1 dim=8"})
    EXPECT_NO_THROW(make_layout(parse_case(line))) << line;
  // The crop/window_right message names the right bound it conflicts with.
  try {
    (void)make_layout(parse_case("op=sdpa docs=16 cp=2 rank=0 crop=1 window_right=-1 hq=1 dim=8"));
    ADD_FAILURE() << "accepted";
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("window_right=-1"), std::string::npos) << e.what();
  }
}

// A UTF-8 byte-order mark at the start of a line is dropped (not shown as part of the key 'op').
TEST(CaseLine, LeadingByteOrderMarkIsStripped) {
  EXPECT_EQ(parse_case("\xEF\xBB\xBFop=sdpa docs=8 hq=2"), parse_case("op=sdpa docs=8 hq=2"));
  EXPECT_EQ(parse_case("\xEF\xBB\xBF  docs=8"), parse_case("docs=8"));
  // Anywhere else it is part of a token, and the message names it.
  expect_rejected({"docs=8 \xEF\xBB\xBFop=sdpa", {"\xEF\xBB\xBFop"}});
}

// Error messages echo values (and keys) cut to a bounded length, with the full size.
TEST(CaseLineReject, HugeValuesAreEchoedClipped) {
  for (size_t n : {size_t(81), size_t(1) << 20}) {
    for (const std::string& line : {"op=indexer topk=" + std::string(n, '9'), "op=indexer docs=" + std::string(n, 'x'),
                                    std::string(n, 'k') + "=1", "op=indexer seed=" + std::string(n, '7')}) {
      try {
        (void)parse_case(line);
        ADD_FAILURE() << "accepted";
      } catch (const CaseError& e) {
        const std::string what = e.what();
        EXPECT_LT(what.size(), 400u) << what.substr(0, 400);
        EXPECT_NE(what.find(fmt::format("... ({} bytes)", n)), std::string::npos) << what.substr(0, 400);
        EXPECT_EQ(e.key.size() + e.value.size() + 1, line.size() - (line[0] == 'o' ? 11 : 0));  // kept whole
      }
    }
  }
  // A cut never splits a UTF-8 character.
  const std::string clipped = clip_for_message(std::string(79, 'a') + "\xC3\xA9" + std::string(100, 'b'));
  EXPECT_EQ(clipped.rfind(std::string(79, 'a') + "... (", 0), 0u) << clipped;
  EXPECT_EQ(clip_for_message("short"), "short");
}

// The memory cap: computed from what a run allocates (inputs, backend + reference outputs, per-row
// and per-document metadata, scratch, the process baseline; see test_memory_cap.cpp for measured RSS);
// the message carries the computed size, and the cap is exact (size passes, size - 1 fails).
TEST(CaseLineReject, MemoryCapNamesTheComputedSize) {
  for (const char* line : {"op=indexer docs=300,212 heads=3 dim=20 topk=17 pad=5",
                           "op=sdpa q_lens=100,50 kv_lens=70,90 hq=6 hkv=2 dim=24 dim_v=8 tail=9"}) {
    SCOPED_TRACE(line);
    const Case c = parse_case(line);
    const Layout l = make_layout(c, with_stage_memory({}));
    const Inputs in = make_inputs(l);
    const Outputs o = make_sentinel_outputs(l);
    const int64_t bytes = 4 * int64_t(in.q.size() + in.k.size() + in.v.size() + in.w.size()) +
                          2 * 4 * int64_t(o.topk.size() + o.scores.size() + o.o.size() + o.lse.size());
    EXPECT_EQ(l.tensor_bytes, bytes);
    EXPECT_GT(l.mem_bytes, bytes);  // and more besides the tensors
    EXPECT_NO_THROW(make_layout(c, with_stage_memory(LayoutLimits{l.mem_bytes})));
    try {
      (void)make_layout(c, with_stage_memory(LayoutLimits{l.mem_bytes - 1}));
      ADD_FAILURE() << "accepted over the cap";
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("{} bytes", l.mem_bytes)), std::string::npos) << e.what();
    }
  }
  // An allocation bomb is refused before anything is allocated.
  expect_rejected({"op=indexer docs=1099511627776 heads=64 dim=128 topk=2048", {"docs"}});
  expect_rejected({"op=sdpa docs=1048576*1048576", {"docs"}});
}

// A refusal names the key whose term dominates the estimate, not always docs.
TEST(CaseLineReject, MemoryCapNamesTheKeyThatMadeItLarge) {
  const LayoutLimits lim{int64_t(1) << 30, 4};
  const std::vector<Bad> bad = {
      {"op=indexer docs=64*500000 heads=1 dim=1 topk=1", {"docs"}},
      {"op=indexer docs=1000 topk=65536", {"topk"}},
      {"op=indexer docs=100 tail=200000000 heads=1 dim=1 topk=1", {"tail"}},
      {"op=indexer docs=100 capacity=200000000 heads=1 dim=1 topk=1", {"capacity"}},
      {"op=indexer docs=100,100 pad=100000000 heads=1 dim=1 topk=1", {"pad"}},
      {"op=indexer docs=100,100 padded_offsets=0,200000000 heads=1 dim=1 topk=1", {"padded_offsets"}},
      {"op=indexer q_lens=100000000 kv_lens=100 heads=1 dim=1 topk=1", {"q_lens"}},
      {"op=indexer docs=100000 heads=1024 dim=8 topk=1", {"heads"}},
      {"op=indexer docs=10000 heads=64 dim=1024 topk=1", {"dim"}},
      {"op=sdpa docs=10000 hq=1024 hkv=1 dim=64", {"hq"}},
      {"op=sdpa docs=4000 hq=32 hkv=1 dim=8 dim_v=1024", {"dim_v"}},
      {"op=sdpa q_lens=100 kv_lens=100000000 hq=1 dim=1", {"kv_lens"}},
  };
  for (const auto& b : bad) expect_rejected(b, lim);
}

}  // namespace
