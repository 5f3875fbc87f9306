// The discrimination check (discrimination.h, docs/tolerances.md, "WEAK"): the issue-53 examples whose zero answer
// passed the SDPA backward's old floor fail it now, with the comparator's words; a gate made vacuous on
// purpose (atol=1e9) makes its output weak and the verdict WEAK; an output whose exact value is zero is not
// weak; the moved answer scores about kMovedGates of the gate; the trial's check before any run is the one
// its verdict carries, and the indexer's forward (whose comparator reads the reference run) has none before.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/compare/discrimination.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

const GateCheck& check_of(const Verdict& v, const std::string& output) {
  for (const auto& g : v.gate_checks)
    if (g.output == output) return g;
  throw std::runtime_error("no gate check for " + output);
}

// The exact answer with one output's valid judged rows set to zero, judged through the trial.
Verdict judge_zero(Trial& t, const std::string& output) {
  const Layout& l = t.layout();
  const auto j = prepare_judgement(l, t.inputs(), Outputs{});
  const JudgedRegion region(l);
  TrialRun run;
  run.backend = "zero";
  run.out = j->exact();
  run.status = {RunStatus::Ok, "", 0};
  for (size_t o = 0; o < region.outputs().size(); ++o) {
    const OutputSpec& s = region.outputs()[o];
    if (s.name != output) continue;
    auto zero_row = [&](int64_t r) {
      for (int64_t e = 0; e < s.width; ++e) (run.out.*s.floats)[size_t(r * s.width + e)] = 0.f;
    };
    if (s.rows == RowBuffer::KV)
      for (int64_t r : region.kv_value_rows()) zero_row(r);
    else
      for (int64_t r : region.value_rows())
        if (region.judges(o, r) && l.valid_row(r)) zero_row(region.buffer_row(o, r));
  }
  return t.judge_exact(run);
}

}  // namespace

// Issue 53: with the old floor (lambda u_32 2 L times the norm bounds) each of these zero answers passed
// (dq: err/gate 0.06 fp32, 0.04 fp16 at dim 128, 0.45 bf16 GQA; dv of one one-key row 0.998, at dim 8 0.68).
TEST(Discrimination, TheIssueExamplesZeroAnswersFail) {
  const std::pair<const char*, const char*> examples[] = {
      {"op=sdpa pass=bwd docs=200,31 pad=2 hq=2 dim=64 values=extreme dtype=fp32", "dq"},
      {"op=sdpa pass=bwd docs=200,31 pad=2 hq=2 dim=128 values=extreme dtype=fp16", "dq"},
      {"op=sdpa pass=bwd docs=64,33 pad=3 hq=4 hkv=2 dim=16 values=extreme", "dq"},
      {"op=sdpa pass=bwd docs=1 hq=1 dim=16 dtype=fp16 values=extreme", "dv"},
      {"op=sdpa pass=bwd docs=1 hq=1 dim=8 dtype=fp16 values=extreme", "dv"},
  };
  for (const auto& [line, output] : examples) {
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    const std::vector<GateCheck>* checks = t.gate_checks();
    ASSERT_NE(checks, nullptr);
    const Verdict v = judge_zero(t, output);
    EXPECT_EQ(v.kind, Verdict::Fail) << v.reason;
    EXPECT_TRUE(v.find(std::string(output) + "_violations")->failed) << failing_summary(v);
    const GateCheck& g = check_of(v, output);
    EXPECT_TRUE(g.zero_fails);
    EXPECT_GT(g.zero_ratio, 1);
    EXPECT_FALSE(g.weak());
  }
}

// The forward's O floor was vacuous on rows whose softmax the score rounding cannot move: every allowed
// key scoring one exact value (values=extreme's even rows; err/gate 0.47 before) and rows whose softmax is
// one key (scale=1e6, the selftest's neg-logits family; 0.14 before).
TEST(Discrimination, ForwardZeroOFailsWhereTheScoreRoundingMovesNoWeight) {
  for (const char* line : {"op=sdpa docs=1 hq=1 dim=8 values=extreme", "op=sdpa docs=40,24 scale=1e6 dtype=fp32 seed=42",
                           "op=sdpa docs=40,24 scale=1e6 dtype=fp32 seed=59"}) {
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    const Verdict v = judge_zero(t, "o");
    EXPECT_EQ(v.kind, Verdict::Fail) << v.reason;
    const GateCheck& g = check_of(v, "o");
    EXPECT_TRUE(g.zero_fails);
    EXPECT_GT(g.zero_ratio, 1);
  }
}

// A tolerance override of 1e9 on O (atol) cannot reject any O: the case is WEAK naming o; LSE still
// discriminates, and a NaN O still fails.
TEST(Discrimination, AVacuousGateMakesItsOutputWeak) {
  Trial t(parse_case("op=sdpa docs=64,20 hq=2 dim=16 atol=1e9 rtol=0"));
  const std::vector<GateCheck>* checks = t.gate_checks();
  ASSERT_NE(checks, nullptr);
  ASSERT_EQ(checks->size(), 2u);
  EXPECT_EQ((*checks)[0].output, "o");
  EXPECT_TRUE((*checks)[0].weak());
  EXPECT_FALSE((*checks)[0].zero_fails);
  EXPECT_TRUE((*checks)[0].nan_fails);
  EXPECT_EQ((*checks)[1].output, "lse");
  EXPECT_FALSE((*checks)[1].weak());
  auto ref = make_backend("cpu-ref");
  TrialRun run = t.run(*ref);
  const Verdict v = t.judge_exact(run);
  EXPECT_EQ(v.kind, Verdict::Weak);
  EXPECT_EQ(v.reason.rfind("weak:o (a zero o passes every gate", 0), 0u) << v.reason;
  EXPECT_EQ(weak_outputs(v), std::vector<std::string>{"o"});
  // Without the override the same case discriminates and passes.
  Trial plain(parse_case("op=sdpa docs=64,20 hq=2 dim=16"));
  EXPECT_EQ(plain.judge_exact(plain.run(*ref)).kind, Verdict::Pass);
}

// Rows that see no key or one key have dQ = 0, their keys dK = 0: a zero answer is right there, and the
// check says so instead of calling the output weak.
TEST(Discrimination, AnOutputWhoseExactValueIsZeroIsNotWeak) {
  // Every row sees one key (window=1) or none: dQ and dK are zero (dP = D: the exact fp64 backward's
  // leftover of that cancellation is held as 0), dV is dO.
  Trial t(parse_case("op=sdpa pass=bwd q_lens=6 kv_lens=3 mask=bottomright window=1 hq=1 dim=8"));
  auto ref = make_backend("cpu-ref");
  const Verdict v = t.judge_exact(t.run(*ref));
  EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
  for (const auto& g : v.gate_checks) EXPECT_FALSE(g.weak()) << gate_check_text(g);
  EXPECT_TRUE(check_of(v, "dq").exact_zero);
  EXPECT_TRUE(check_of(v, "dk").exact_zero);
  EXPECT_FALSE(check_of(v, "dv").exact_zero);
  EXPECT_TRUE(check_of(v, "dv").zero_fails);
}

// An exact answer below 2^-100 is zero to a kernel that flushes subnormal terms (the indexer's gates allow
// that underflow): rows whose targets sit near the clip at e^-100 have gradients of 1e-40 to 2e-38.
TEST(Discrimination, AnOutputBelowTheNormalRangeIsZero) {
  Trial t(parse_case("op=indexer q_lens=1,1 kv_lens=189,1 heads=64 dim=128 topk=2048 ratio=2 values=plateau pass=bwd"));
  auto ref = make_backend("cpu-ref");
  const TrialRun r = t.run(*ref);
  const Verdict v = t.judge(r, r);
  EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
  for (const char* o : {"dq", "dw", "dk"}) {
    SCOPED_TRACE(o);
    EXPECT_TRUE(check_of(v, o).exact_zero);
    EXPECT_FALSE(check_of(v, o).zero_fails);  // the gates pass it: it is right
  }
}

// The moved answer (the exact answer moved toward zero by kMovedGates gates at the zero answer's worst
// cell) fails at about kMovedGates of its gate, on each op and pass.
TEST(Discrimination, TheMovedAnswerScoresItsGates) {
  for (const char* line : {"op=sdpa docs=64,20 hq=2 dim=16", "op=sdpa pass=bwd docs=40,9 hq=2 hkv=1 dim=16",
                           "op=indexer pass=bwd docs=64 heads=2 dim=16 topk=8"}) {
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    // The indexer's comparator reads the reference run: its check comes with the run's verdict.
    Verdict v;
    const std::vector<GateCheck>* checks = t.gate_checks();
    if (!checks) {
      auto ref = make_backend("cpu-ref");
      const TrialRun r = t.run(*ref);
      v = t.judge(r, r);
      checks = &v.gate_checks;
    }
    ASSERT_FALSE(checks->empty());
    int moved = 0;
    for (const auto& g : *checks) {
      SCOPED_TRACE(gate_check_text(g));
      EXPECT_FALSE(g.weak());
      if (g.moved_ratio < 0) continue;
      ++moved;
      EXPECT_TRUE(g.moved_fails);
      EXPECT_NEAR(g.moved_ratio, kMovedGates, 0.1 * kMovedGates);
    }
    EXPECT_GT(moved, 0);
  }
}

// The check made before any run (the campaign's) is the one the run's verdict carries; the indexer's
// forward judges against the reference run and has no check before it, only after.
TEST(Discrimination, TheTrialsCheckBeforeTheRunIsTheVerdicts) {
  auto ref = make_backend("cpu-ref");
  Trial t(parse_case("op=sdpa pass=bwd docs=40,9 hq=2 hkv=1 dim=16"));
  const std::vector<GateCheck>* before = t.gate_checks();
  ASSERT_NE(before, nullptr);
  const std::vector<GateCheck> copy = *before;
  const Verdict v = t.judge_exact(t.run(*ref));
  ASSERT_EQ(v.gate_checks.size(), copy.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(v.gate_checks[i].output, copy[i].output);
    EXPECT_EQ(v.gate_checks[i].zero_ratio, copy[i].zero_ratio);
  }
  Trial idx(parse_case("op=indexer docs=64 topk=8"));
  EXPECT_EQ(idx.gate_checks(), nullptr);
  const TrialRun r1 = idx.run(*ref), r2 = idx.run(*ref);
  const Verdict vi = idx.judge(r1, r2);
  EXPECT_EQ(vi.kind, Verdict::Pass) << vi.reason;
  ASSERT_EQ(vi.gate_checks.size(), 1u);
  EXPECT_EQ(vi.gate_checks[0].output, "topk");
  EXPECT_TRUE(vi.gate_checks[0].zero_fails);
  EXPECT_TRUE(vi.gate_checks[0].nan_fails);
}
