// The verdict stage on crafted metrics: the builder (pass; fail on each gated metric of both
// comparators, taken from a real run; NaN on a gate; no metric = error), the worst-row order, the
// tally and its exit codes, the label, the failing-metric text, and the headline flag.
#include <gtest/gtest.h>

#include <cmath>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/reference/reference.h"
#include "attn_oracle/verdict/verdict.h"

using namespace ao;

namespace {

// The metrics the comparator measures on a clean run (backend = reference) of a small case of `op`.
std::vector<Metric> clean_metrics(const char* line) {
  const Layout l = make_layout(parse_case(line));
  const Inputs in = make_inputs(l);
  Outputs o = make_sentinel_outputs(l);
  if (l.c.op == Op::Indexer) reference_indexer(l, in, o);
  else reference_sdpa(l, in, o);
  const Verdict v = compare(l, in, o, o);
  EXPECT_EQ(v.kind, Verdict::Pass) << line << ": " << v.reason;
  return v.metrics;
}

const char* kCases[] = {"op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"};

}  // namespace

TEST(Verdict, PassWhenNoMetricFailed) {
  for (const char* line : kCases) {
    const Verdict v = build_verdict(clean_metrics(line));
    EXPECT_EQ(v.kind, Verdict::Pass) << line;
    EXPECT_EQ(v.reason, "");
    EXPECT_TRUE(failing_metrics(v).empty());
    EXPECT_EQ(failing_summary(v), "pass");
  }
}

// Every gated metric of both comparators alone fails the verdict, and the reason names it (and only it).
TEST(Verdict, EachGatedMetricAloneFails) {
  int gated = 0;
  for (const char* line : kCases) {
    const auto clean = clean_metrics(line);
    for (size_t i = 0; i < clean.size(); ++i) {
      if (!clean[i].gated()) continue;
      ++gated;
      auto m = clean;
      m[i].failed = true;
      m[i].value = 7;
      const Verdict v = build_verdict(m);
      EXPECT_EQ(v.kind, Verdict::Fail) << clean[i].name;
      EXPECT_EQ(v.reason, clean[i].name);
      EXPECT_EQ(failing_metrics(v), std::set<std::string>{clean[i].name});
      EXPECT_EQ(failing_summary(v), clean[i].name + "=7 (" + clean[i].rule + ")");
      EXPECT_EQ(v.metrics.size(), clean.size());  // every metric is kept, in order
    }
  }
  EXPECT_EQ(gated, 8 + 6);  // indexer: recall, causal, cross-doc, range, duplicates, fill, unwritten, pad slots
}

TEST(Verdict, ReasonListsFailingMetricsInMetricOrder) {
  const Verdict v = build_verdict({gated_metric("b", 1, "== 0", true), info_metric("i", 3),
                                   gated_metric("a", 0, "== 0", false), gated_metric("c", 2, "== 0", true)});
  EXPECT_EQ(v.kind, Verdict::Fail);
  EXPECT_EQ(v.reason, "b, c");
  EXPECT_EQ(failing_summary(v), "b=1 (== 0), c=2 (== 0)");
  EXPECT_EQ(failing_metrics(v), (std::set<std::string>{"b", "c"}));
}

// A gated metric that lost its number fails; an informational NaN (e.g. no rows) does not.
TEST(Verdict, NanOnAGateFails) {
  const Verdict v = build_verdict({gated_metric("g", NAN, ">= 1", false), info_metric("i", NAN)});
  EXPECT_EQ(v.kind, Verdict::Fail);
  EXPECT_EQ(v.reason, "g");
  EXPECT_EQ(build_verdict({info_metric("i", NAN)}).kind, Verdict::Pass);
  EXPECT_EQ(build_verdict({gated_metric("off", NAN, "", false)}).kind, Verdict::Pass);  // gate switched off
}

TEST(Verdict, NoMetricIsAnErrorNotAPass) {
  const Verdict v = build_verdict({});
  EXPECT_EQ(v.kind, Verdict::Error);
  EXPECT_FALSE(v.reason.empty());
  EXPECT_EQ(failing_summary(v), "error: " + v.reason);
  const Verdict e = error_verdict("backend crashed");
  EXPECT_EQ(e.kind, Verdict::Error);
  EXPECT_EQ(failing_summary(e), "error: backend crashed");
  EXPECT_TRUE(failing_metrics(e).empty());
  EXPECT_EQ(skipped_verdict("no GPU").kind, Verdict::Skipped);
}

TEST(Verdict, WorstRowsSortedWorstFirstAndCapped) {
  std::vector<RowNote> notes;
  for (int i = 0; i < 20; ++i) notes.push_back({i, 0, -1, i, double((i * 7) % 20)});
  const Verdict lo = build_verdict({info_metric("x", 0)}, notes, WorseIs::Lowest);
  const Verdict hi = build_verdict({info_metric("x", 0)}, notes, WorseIs::Highest);
  ASSERT_EQ(lo.worst_rows.size(), kWorstRowsKept);
  ASSERT_EQ(hi.worst_rows.size(), kWorstRowsKept);
  for (size_t i = 0; i < kWorstRowsKept; ++i) {
    EXPECT_EQ(lo.worst_rows[i].value, double(i));
    EXPECT_EQ(hi.worst_rows[i].value, double(19 - i));
  }
}

TEST(Verdict, LabelAndName) {
  EXPECT_STREQ(verdict_name(Verdict::Pass), "pass");
  EXPECT_STREQ(verdict_name(Verdict::Fail), "fail");
  EXPECT_STREQ(verdict_name(Verdict::Skipped), "skipped");
  EXPECT_STREQ(verdict_name(Verdict::Error), "error");
  EXPECT_STREQ(verdict_name(Verdict::Weak), "weak");
  EXPECT_EQ(verdict_label(Verdict::Pass), "PASS");
  EXPECT_EQ(verdict_label(Verdict::Skipped), "SKIPPED");
  EXPECT_EQ(verdict_label(Verdict::Weak), "WEAK");
  EXPECT_FALSE(is_failure(Verdict::Weak));
  EXPECT_TRUE(is_failure(Verdict::Fail));
  EXPECT_TRUE(is_failure(Verdict::Error));
}

// The discrimination check turns a pass into WEAK when a zero (or NaN) answer of an output whose exact
// value is not zero would pass its gates, naming each weak output; an all-zero exact output, an output with
// nothing judged and a failing verdict stay as they are.
TEST(Verdict, WeakWhereAZeroOrNanAnswerPasses) {
  GateCheck ok{"o", 64, false, true, true, 312, 4.0, true, "tol_violations"};
  GateCheck zero_passes{"dq", 64, false, false, true, 0.06, -1, true, ""};
  GateCheck nan_passes{"dk", 64, false, true, false, 9, 4, true, "dk_violations"};
  GateCheck exact_zero{"dv", 64, true, false, true, -1, -1, true, ""};
  GateCheck nothing{"dw", 0, false, false, false, -1, -1, true, ""};
  EXPECT_FALSE(ok.weak());
  EXPECT_TRUE(zero_passes.weak());
  EXPECT_TRUE(nan_passes.weak());
  EXPECT_FALSE(exact_zero.weak());  // the zero answer is right there
  EXPECT_FALSE(nothing.weak());
  const Verdict pass = build_verdict({gated_metric("g", 0, "== 0", false)});
  const Verdict weak = with_gate_checks(pass, {ok, zero_passes, exact_zero, nan_passes, nothing});
  EXPECT_EQ(weak.kind, Verdict::Weak);
  EXPECT_EQ(weak.reason,
            "weak:dq (a zero dq passes every gate: worst err/gate 0.06), weak:dk (a NaN dk passes every gate)");
  EXPECT_EQ(weak_outputs(weak), (std::vector<std::string>{"dq", "dk"}));
  EXPECT_EQ(weak.gate_checks.size(), 5u);
  EXPECT_EQ(with_gate_checks(pass, {ok, exact_zero, nothing}).kind, Verdict::Pass);
  const Verdict fail = build_verdict({gated_metric("g", 1, "== 0", true)});
  const Verdict still = with_gate_checks(fail, {zero_passes});
  EXPECT_EQ(still.kind, Verdict::Fail);  // a failure takes precedence; its checks are kept for the reports
  EXPECT_EQ(still.reason, "g");
  EXPECT_EQ(still.gate_checks.size(), 1u);
  EXPECT_EQ(gate_check_text(ok), "o: zero answer fails (worst err/gate 312; tol_violations), NaN answer fails, "
                                 "moved by 4 gates: err/gate 4");
  EXPECT_EQ(gate_check_text(zero_passes), "dq: zero answer PASSES (worst err/gate 0.06), NaN answer fails: WEAK");
  EXPECT_EQ(gate_check_text(exact_zero), "dv: exact answer is zero (a zero answer is right), NaN answer fails");
  EXPECT_EQ(gate_check_text(nothing), "dw: nothing judged");
}

TEST(VerdictTally, CountsAndExitCodes) {
  auto results = [](std::initializer_list<Verdict::Kind> ks) {
    std::vector<CaseResult> r;
    for (auto k : ks) r.push_back(CaseResult{}), r.back().verdict.kind = k;
    return r;
  };
  const auto mixed =
      results({Verdict::Pass, Verdict::Fail, Verdict::Pass, Verdict::Skipped, Verdict::Error, Verdict::Weak});
  const VerdictTally t = tally(mixed);
  EXPECT_EQ(t[Verdict::Pass], 2);
  EXPECT_EQ(t[Verdict::Fail], 1);
  EXPECT_EQ(t[Verdict::Skipped], 1);
  EXPECT_EQ(t[Verdict::Error], 1);
  EXPECT_EQ(t.weak(), 1);
  EXPECT_EQ(t.total(), 6);
  EXPECT_EQ(t.ran(), 5);
  EXPECT_EQ(t.bad(), 2);  // a weak case is counted apart: neither passed nor failed
  EXPECT_EQ(t.exit_code(), 1);
  EXPECT_EQ(exit_code(mixed), 1);  // the CLI's exit code is the tally's
  for (const auto& [ks, code] : std::vector<std::pair<std::vector<CaseResult>, int>>{
           {results({}), 125},
           {results({Verdict::Skipped, Verdict::Skipped}), 125},
           {results({Verdict::Pass, Verdict::Skipped}), 0},
           {results({Verdict::Error, Verdict::Skipped}), 1},
           {results({Verdict::Pass, Verdict::Fail}), 1}}) {
    EXPECT_EQ(tally(ks).exit_code(), code);
    EXPECT_EQ(exit_code(ks), code);
  }
  // A weak case fails only a strict run (gate --strict).
  EXPECT_EQ(tally(results({Verdict::Pass, Verdict::Weak})).exit_code(), 0);
  EXPECT_EQ(tally(results({Verdict::Pass, Verdict::Weak})).exit_code(true), 1);
  EXPECT_EQ(tally(results({Verdict::Weak})).exit_code(), 0);
  EXPECT_EQ(tally(results({Verdict::Pass})).exit_code(true), 0);
}

// The headline flag replaces the lists cp-run and the GPU campaign had: the same metrics.
TEST(Verdict, HeadlineMetricsAreTheOldSummaryLists) {
  std::set<std::string> headline;
  for (const char* line : kCases)
    for (const auto& m : clean_metrics(line))
      if (m.headline) headline.insert(m.name);
  EXPECT_EQ(headline, (std::set<std::string>{"overlap_min", "overlap_mean", "tie_aware_recall_min", "out_of_causal",
                                             "max_abs_err", "nonfinite_valid"}));
}

// One name per concept: both comparators name their pad-slot metric clobbered_pad_slots.
TEST(Verdict, BothOpsNameThePadSlotMetricTheSame) {
  for (const char* line : kCases) {
    int n = 0;
    for (const auto& m : clean_metrics(line)) n += m.name == "clobbered_pad_slots";
    EXPECT_EQ(n, 1) << line;
  }
}
