// explain (explain.h): names the injected bug model on recorded seeds, says "nothing to explain" for
// a backend equal to the reference, "no known defect" for a foreign backend whose outputs match no model;
// the diagnosis check can fail (the built-in matrix's diagnoses: test_selftest.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/explain.h"
#include "attn_oracle/pipeline/selftest.h"

using namespace ao;

namespace {

Explanation explain_line(const std::string& line, const std::string& backend) {
  Trial t(parse_case(line));
  auto be = make_backend(backend);
  auto ref_be = make_backend("cpu-ref");
  const TrialRun got = t.run(*be);
  EXPECT_TRUE(got.ok()) << got.status.reason;
  const TrialRun ref = t.run(*ref_be);
  return explain_trial(t, got, ref);
}

bool names(const Explanation& e, const std::string& model) {
  for (size_t i = 0; i < e.n_best; ++i)
    if (e.ranked[i].model == model) return true;
  return false;
}

}  // namespace

// Each model on a case where it is observable, three recorded seeds each: explain names it (bitwise:
// it reproduces every wrong row and breaks none).
TEST(Explain, NamesTheInjectedModelOnRecordedSeeds) {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"derived-offsets", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"},
      {"derived-offsets", "op=indexer lens=30,20,40 padded_offsets=0,40,80,130 topk=8"},
      {"topleft-cp", "op=indexer docs=512,256 cp=4 rank=2 topk=32"},
      {"topleft-cp", "op=sdpa docs=256 cp=4 rank=1"},
      {"grid-floor", "op=sdpa docs=100,37 hq=4 hkv=2"},
      {"grid-floor", "op=indexer docs=100,37,200 topk=16"},
      {"off-by-one-causal", "op=indexer docs=300 topk=32"},
      {"tail-read", "op=sdpa docs=100,37 pad=11 tail=64 poison=nan"},
      {"gqa-modulo", "op=sdpa docs=70,50 hq=8 hkv=2"},
      {"pad-rows-written", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"},
  };
  for (const auto& [model, line] : rows)
    for (int seed : {3, 11, 29}) {
      const std::string l = line + " seed=" + std::to_string(seed);
      SCOPED_TRACE(model + " on " + l);
      const Explanation e = explain_line(l, "cpu-bug:" + model);
      ASSERT_EQ(e.outcome, Explanation::Explained) << format_explanation(e);
      EXPECT_TRUE(names(e, model)) << format_explanation(e);
      EXPECT_GT(e.wrong_rows + e.wrong_pad_slots, 0);
      EXPECT_EQ(e.ranked[0].reproduced, e.wrong_rows);
      EXPECT_EQ(e.ranked[0].broken, 0);
      EXPECT_NE(e.headline().find("best explanation: "), std::string::npos);
      EXPECT_NE(e.headline().find(model), std::string::npos);
    }
}

// The headline spells the counts: "reproduces n/n wrong rows bitwise (0 rows it breaks that B gets right)".
TEST(Explain, HeadlineCountsWrongRowsAndBrokenRows) {
  const Explanation e = explain_line("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 seed=1", "cpu-bug:derived-offsets");
  const std::string h = e.headline();
  EXPECT_NE(h.find(fmt::format("reproduces {0}/{0} wrong rows", e.wrong_rows)), std::string::npos) << h;
  EXPECT_NE(h.find("bitwise (0 rows it breaks that cpu-bug:derived-offsets gets right)"), std::string::npos) << h;
  const std::string text = format_explanation(e);
  EXPECT_NE(text.find("ranked"), std::string::npos) << text;
}

TEST(Explain, NothingToExplainWhenTheBackendEqualsTheReference) {
  const Explanation e = explain_line("op=indexer docs=512,256 cp=4 rank=2 topk=32", "cpu-ref");
  EXPECT_EQ(e.outcome, Explanation::NothingToExplain);
  EXPECT_EQ(e.wrong_rows, 0);
  EXPECT_EQ(e.n_best, 0u);
  EXPECT_NE(e.headline().find("nothing to explain: cpu-ref's outputs equal the reference's"), std::string::npos)
      << e.headline();
  // Matched within the kernel tolerance, no difference is not equality, and the headline says so.
  Explanation k = e;
  k.match_rule = explain_match_rule(ValueMatch::Kernel);
  EXPECT_NE(k.headline().find("within the kernel tolerance"), std::string::npos) << k.headline();
  EXPECT_EQ(k.headline().find("equal"), std::string::npos) << k.headline();
}

// Models that decline the op (or the pass) are skipped, not scored.
TEST(Explain, ModelsThatDeclineTheOpAreSkipped) {
  const Explanation e = explain_line("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13", "cpu-bug:derived-offsets");
  size_t sdpa_models = 0;
  for (const auto& m : bug_models()) sdpa_models += m.sdpa && m.pass.value_or(Pass::Fwd) == Pass::Fwd;
  EXPECT_EQ(e.ranked.size(), sdpa_models);
  EXPECT_EQ(e.skipped.size(), bug_models().size() - sdpa_models);
  for (const auto& m : e.ranked) EXPECT_NE(m.model, "fill-zero");
}

// A foreign kernel (the example plugin) with one NaN planted in O: no model writes that, so explain
// says so honestly (exit 1 at the CLI); its honest outputs match cpu-ref within the kernel tolerance.
TEST(Explain, PluginWhoseOutputsMatchNoModelIsNotExplained) {
  const std::string spec = std::string("plugin:") + AO_EXAMPLE_PLUGIN + ":fail=nan";
  const Explanation e = explain_line("op=sdpa docs=70,50 hq=4 hkv=2 seed=5", spec);
  EXPECT_EQ(e.outcome, Explanation::NotExplained) << format_explanation(e);
  EXPECT_EQ(e.wrong_rows, 1) << format_explanation(e);
  EXPECT_NE(e.headline().find("no known defect reproduces this"), std::string::npos) << e.headline();
  EXPECT_NE(e.match_rule.find("kernel tolerance"), std::string::npos);
}

// The same plugin re-creating the seed's defect is named, within the kernel tolerance.
TEST(Explain, PluginRecreatingTopleftCpIsNamed) {
  const std::string spec = std::string("plugin:") + AO_EXAMPLE_PLUGIN + ":bug=topleft-cp";
  const Explanation e = explain_line("op=indexer docs=512,256 cp=4 rank=2 topk=32 seed=7", spec);
  ASSERT_EQ(e.outcome, Explanation::Explained) << format_explanation(e);
  EXPECT_TRUE(names(e, "topleft-cp")) << format_explanation(e);
}

// Kernel tolerance: O within 4*u_d*(|x| + 1/16), LSE within 2^-10*(1 + |LSE|), NaN = NaN, inf exact.
TEST(Explain, KernelToleranceIsTheDocumentedOne) {
  const Layout l = make_layout(parse_case("op=sdpa docs=4 hq=1 dim=2 dim_v=2 dtype=bf16"));
  const JudgedRegion bit(l, ValueMatch::Bitwise), ker(l, ValueMatch::Kernel);
  ASSERT_EQ(bit.size(), 4u);
  Outputs a = make_sentinel_outputs(l);
  for (auto& x : a.o) x = 0.5f;
  for (auto& x : a.lse) x = 2.0f;
  Outputs b = a;
  const double u = 1.0 / 256;
  b.o[0] = float(0.5 + 0.99 * 4 * u * (0.5 + 1.0 / 16));  // inside the O tolerance
  EXPECT_FALSE(bit.equal(0, a, b));
  EXPECT_TRUE(ker.equal(0, a, b));
  b.o[0] = float(0.5 + 1.1 * 4 * u * (0.5 + 1.0 / 16));  // outside
  EXPECT_FALSE(ker.equal(0, a, b));
  b = a;
  b.lse[0] = float(2.0 + 0.99 * 3.0 / 1024);
  EXPECT_TRUE(ker.equal(0, a, b));
  b.lse[0] = float(2.0 + 1.1 * 3.0 / 1024);
  EXPECT_FALSE(ker.equal(0, a, b));
  b = a;
  a.o[0] = std::numeric_limits<float>::quiet_NaN();
  b.o[0] = -std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(bit.equal(0, a, b));  // NaN equals NaN, whatever its sign or payload
  b.o[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(ker.equal(0, a, b));
  EXPECT_EQ(resolve_explain_match(ExplainMatch::Auto, "cpu-bug:grid-floor"), ExplainMatch::Bitwise);
  EXPECT_EQ(resolve_explain_match(ExplainMatch::Auto, "cuda-sdpa"), ExplainMatch::Kernel);
}

// Indexer rows compare as index sets with their -1 fills: order does not matter, the fill count does.
TEST(Explain, IndexerRowsCompareAsSetsWithFills) {
  const Layout l = make_layout(parse_case("op=indexer docs=8 topk=4"));
  const JudgedRegion r(l, ValueMatch::Bitwise);
  Outputs a = make_sentinel_outputs(l), b = a;
  const size_t row = size_t(l.check_rows[5]) * 4;
  for (int e = 0; e < 4; ++e) a.topk[row + size_t(e)] = e < 3 ? e : -1;
  b.topk = a.topk;
  std::swap(b.topk[row], b.topk[row + 2]);
  EXPECT_TRUE(r.equal(5, a, b));
  b.topk[row + 3] = 5;
  EXPECT_FALSE(r.equal(5, a, b));
}

// The selftest's diagnosis matrix (checked on the built-in families by Selftest.BuiltInMatrixDetectsAndDiagnoses...):
// the diagnosis check can fail: an explanation whose candidates lack the injected model names another,
// non-equivalent one, and diagnose() calls that WRONG.
TEST(Explain, DiagnosisCheckFailsWhenTheInjectedModelIsNotNamed) {
  Trial t(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 seed=2"));
  auto ref_be = make_backend("cpu-ref");
  auto inj_be = make_backend("cpu-bug:derived-offsets");
  auto other_be = make_backend("cpu-bug:pad-rows-written");
  const TrialRun ref = t.run(*ref_be), inj = t.run(*inj_be), other = t.run(*other_be);
  const JudgedRegion region(t.layout(), ValueMatch::Bitwise);
  // derived-offsets writes into pad slots with its data, pad-rows-written writes zeros there: a broken
  // candidate list (the injected model left out) names the other on its pad slots, or none at all.
  const Explanation e = explain_outputs(region, inj.out, ref.out, {{"pad-rows-written", "", &other.out, {}}});
  const std::map<std::string, const Outputs*> outs = {{"derived-offsets", &inj.out}, {"pad-rows-written", &other.out}};
  const DiagnosisCell d = diagnose(t.layout(), e, "derived-offsets", outs);
  EXPECT_EQ(d.kind, DiagnosisKind::Wrong) << format_explanation(e);
  // With the injected model among the candidates it is named.
  const Explanation ok = explain_outputs(region, inj.out, ref.out,
                                         {{"pad-rows-written", "", &other.out, {}}, {"derived-offsets", "", &inj.out, {}}});
  EXPECT_EQ(diagnose(t.layout(), ok, "derived-offsets", outs).kind, DiagnosisKind::Named) << format_explanation(ok);
}

// Models whose outputs equal the best one's on the case are all named, in bug_models() order.
TEST(Explain, OutputEquivalentModelsAreAllNamed) {
  Trial t(parse_case("op=indexer docs=512,256 cp=4 rank=2 topk=32 seed=4"));
  auto ref_be = make_backend("cpu-ref");
  auto bug_be = make_backend("cpu-bug:topleft-cp");
  const TrialRun ref = t.run(*ref_be), bug = t.run(*bug_be);
  const JudgedRegion region(t.layout(), ValueMatch::Bitwise);
  const Explanation e = explain_outputs(
      region, bug.out, ref.out,
      {{"first", "[98]", &bug.out, {}}, {"cpu-equal", "", &ref.out, {}}, {"second", "[99]", &bug.out, {}}});
  ASSERT_EQ(e.outcome, Explanation::Explained);
  EXPECT_EQ(e.best(), (std::vector<std::string>{"[98] first", "[99] second"}));
  EXPECT_NE(e.headline().find("best explanation: [98] first = [99] second (output-equivalent here) — reproduces"),
            std::string::npos)
      << e.headline();
  EXPECT_EQ(e.ranked.back().model, "cpu-equal");  // reproduces nothing, breaks nothing
}

// SDPA rows are scored per output too: lse-log2 reproduces the LSE of every wrong row of a backend
// whose rows are also wrong in O (here: gqa-modulo's O), but no whole row; gqa-modulo reproduces the O.
TEST(Explain, SdpaRowsAreScoredPerOutput) {
  Trial t(parse_case("op=sdpa docs=70,50 hq=8 hkv=2 seed=9"));
  auto ref_be = make_backend("cpu-ref");
  auto log2_be = make_backend("cpu-bug:lse-log2");
  auto gqa_be = make_backend("cpu-bug:gqa-modulo");
  const TrialRun ref = t.run(*ref_be), lg = t.run(*log2_be), gq = t.run(*gqa_be);
  Outputs mixed = gq.out;  // gqa-modulo's O with lse-log2's LSE
  mixed.lse = lg.out.lse;
  const JudgedRegion region(t.layout(), ValueMatch::Bitwise);
  const Explanation e =
      explain_outputs(region, mixed, ref.out, {{"lse-log2", "", &lg.out, {}}, {"gqa-modulo", "", &gq.out, {}}});
  ASSERT_GT(e.wrong_rows, 0);
  EXPECT_EQ(e.wrong_lse_rows, e.wrong_rows);
  EXPECT_GT(e.wrong_o_rows, 0);
  for (const auto& m : e.ranked) {
    EXPECT_EQ(m.reproduced, 0) << m.model;  // neither reproduces a whole row
    if (m.model == "lse-log2") {
      EXPECT_EQ(m.lse_reproduced, e.wrong_lse_rows);
    }
    if (m.model == "gqa-modulo") {
      EXPECT_EQ(m.o_reproduced, e.wrong_o_rows);
    }
  }
  EXPECT_EQ(e.outcome, Explanation::NotExplained);
  EXPECT_NE(format_explanation(e).find("(O "), std::string::npos) << format_explanation(e);
}

// A model that throws (a std::exception or anything else) is skipped with its reason and explains
// nothing; explain still ranks the others and names the one that reproduces the failure.
TEST(Explain, ThrowingModelIsSkippedNotFatal) {
  Trial t(parse_case("op=indexer docs=300 topk=32 seed=3"));
  auto bug_be = make_backend("cpu-bug:off-by-one-causal");
  auto ref_be = make_backend("cpu-ref");
  const TrialRun got = t.run(*bug_be), ref = t.run(*ref_be);
  ASSERT_TRUE(got.ok() && ref.ok());
  std::vector<BugModel> candidates;
  BugModel throws_std, throws_int;
  throws_std.name = "throws-std";
  throws_int.name = "throws-int";
  throws_std.indexer = throws_std.sdpa = throws_int.indexer = throws_int.sdpa = true;
  throws_std.transform = [](const Layout&, const Inputs&, Outputs&) { throw std::runtime_error("planted"); };
  throws_int.transform = [](const Layout&, const Inputs&, Outputs&) { throw 42; };
  candidates.push_back(throws_std);
  candidates.push_back(throws_int);
  for (const auto& m : bug_models())
    if (m.name == "off-by-one-causal") candidates.push_back(m);
  ASSERT_EQ(candidates.size(), 3u);
  const Explanation e = explain_trial(t, got, ref, ExplainMatch::Auto, candidates);
  ASSERT_EQ(e.outcome, Explanation::Explained) << format_explanation(e);
  EXPECT_TRUE(names(e, "off-by-one-causal")) << format_explanation(e);
  ASSERT_EQ(e.ranked.size(), 1u);
  ASSERT_EQ(e.skipped.size(), 2u);
  EXPECT_NE(e.skipped[0].find("throws-std: "), std::string::npos) << e.skipped[0];
  EXPECT_NE(e.skipped[0].find("planted"), std::string::npos) << e.skipped[0];
  EXPECT_NE(e.skipped[1].find("throws-int: "), std::string::npos) << e.skipped[1];
  EXPECT_NE(e.skipped[1].find("not a std::exception"), std::string::npos) << e.skipped[1];
}

// The output sentinel is a NaN with its own payload: a model that leaves an element unwritten does not
// reproduce a kernel that computed NaN there; a model that computed a NaN (any payload) does.
TEST(Explain, UnwrittenSentinelDoesNotMatchAComputedNan) {
  Trial t(parse_case("op=sdpa docs=70,50 hq=2 hkv=1 seed=9"));
  auto ref_be = make_backend("cpu-ref");
  const TrialRun ref = t.run(*ref_be);
  ASSERT_TRUE(ref.ok());
  const Layout& l = t.layout();
  const int64_t orow = l.segments[0].o_row0 + 3;  // a valid row of document 0
  const size_t at = size_t(orow) * size_t(l.c.hq) * size_t(l.c.dim_v);
  Outputs got = ref.out, unwritten = ref.out, computed = ref.out;
  got.o[at] = std::numeric_limits<float>::quiet_NaN();
  unwritten.o[at] = sentinel_float();
  uint32_t other_nan_bits = 0xffc00001u;  // another NaN payload, as other arithmetic leaves it
  std::memcpy(&computed.o[at], &other_nan_bits, 4);
  ASSERT_TRUE(std::isnan(computed.o[at]));
  for (auto m : {ExplainMatch::Bitwise, ExplainMatch::Kernel}) {
    const JudgedRegion region(l, value_match(m));
    const Explanation e = explain_outputs(region, got, ref.out,
                                          {{"unwritten", "", &unwritten, {}}, {"computed-nan", "", &computed, {}}});
    ASSERT_EQ(e.wrong_rows, 1);
    for (const auto& s : e.ranked) {
      if (s.model == "unwritten") {
        EXPECT_EQ(s.reproduced, 0) << format_explanation(e);
      }
      if (s.model == "computed-nan") {
        EXPECT_EQ(s.reproduced, 1) << format_explanation(e);
      }
    }
    EXPECT_TRUE(names(e, "computed-nan")) << format_explanation(e);
    EXPECT_FALSE(names(e, "unwritten")) << format_explanation(e);
  }
}
