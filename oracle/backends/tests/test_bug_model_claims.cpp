// Every bug model's claims, from its own declaration (oracle/backends/models/): on each trigger case it
// fails the gated metrics the case lists (every seed of kModelCaseSeeds) while cpu-ref passes; on each
// outside case its judged outputs equal cpu-ref's bitwise. Every model has both kinds of case at ordinary
// scale; a production-scale case (CaseScale::Production, run by the GPU knob plan) is checked here for its
// line and its metrics only.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"
#include "run_line.h"

using namespace ao;

namespace {

std::vector<std::string> model_names() {
  std::vector<std::string> v;
  for (const auto& m : bug_models()) v.push_back(m.name);
  return v;
}

const BugModel& model(const std::string& name) {
  for (const auto& m : bug_models())
    if (m.name == name) return m;
  throw std::runtime_error("no bug model " + name);
}


class BugModelClaims : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(BugModelClaims, HasTriggerAndOutsideCasesAndCatchesWhatItsTriggersFail) {
  const BugModel& m = model(GetParam());
  const auto ordinary = [](const auto& c) { return c.scale == CaseScale::Ordinary; };
  EXPECT_TRUE(std::any_of(m.triggers.begin(), m.triggers.end(), ordinary)) << m.name << " has no trigger case";
  EXPECT_TRUE(std::any_of(m.outside.begin(), m.outside.end(), ordinary)) << m.name << " has no outside case";
  EXPECT_TRUE(m.seams || m.transform) << m.name << " overrides no seam and transforms nothing";
  for (const auto& t : m.triggers) {
    EXPECT_FALSE(t.fails.empty()) << t.line;
    EXPECT_NO_THROW(make_layout(parse_case(t.line))) << t.line;
    for (const auto& metric : t.fails)
      EXPECT_NE(std::find(m.catches.begin(), m.catches.end(), metric), m.catches.end())
          << m.name << " fails " << metric << " on '" << t.line << "' but does not list it in catches";
  }
}

TEST_P(BugModelClaims, FailsItsMetricsOnEveryTriggerCaseWhereCpuRefPasses) {
  const BugModel& m = model(GetParam());
  for (const auto& t : m.triggers)
    for (uint64_t seed : kModelCaseSeeds) {
      if (t.scale != CaseScale::Ordinary) break;
      const std::string line = fmt::format("{} seed={}", t.line, seed);
      SCOPED_TRACE(fmt::format("cpu-bug:{}: {}", m.name, line));
      const auto bad = test::run_line(line, "cpu-bug:" + m.name);
      ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << bad.verdict.reason;
      const auto good = test::run_line(line, "cpu-ref");
      EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
      for (const auto& metric : t.fails) {
        const Metric* b = bad.verdict.find(metric);
        ASSERT_NE(b, nullptr) << metric;
        EXPECT_TRUE(b->failed) << metric << "\n" << format_result(bad);
        EXPECT_FALSE(b->rule.empty()) << metric << " is not gated";
        const Metric* g = good.verdict.find(metric);
        ASSERT_NE(g, nullptr) << metric;
        EXPECT_FALSE(g->failed) << metric;
      }
    }
}

TEST_P(BugModelClaims, EqualsCpuRefBitwiseOutsideItsTrigger) {
  const BugModel& m = model(GetParam());
  auto ref_be = make_backend("cpu-ref");
  auto bug_be = make_backend("cpu-bug:" + m.name);
  for (const auto& o : m.outside) {
    EXPECT_NO_THROW(make_layout(parse_case(o.line))) << o.line;
    for (uint64_t seed : kModelCaseSeeds) {
      if (o.scale != CaseScale::Ordinary) break;
      const std::string line = fmt::format("{} seed={}", o.line, seed);
      SCOPED_TRACE(fmt::format("cpu-bug:{} outside its trigger ({}): {}", m.name, o.why, line));
      Trial t(parse_case(line));
      const TrialRun ref = t.run(*ref_be), bug = t.run(*bug_be);
      ASSERT_TRUE(ref.ok() && bug.ok());
      EXPECT_FALSE(outputs_differ(t.layout(), bug.out, ref.out));
      if (t.layout().c.op == Op::Indexer) {
        EXPECT_EQ(bug.out.topk, ref.out.topk);  // order included
      }
      EXPECT_EQ(t.judge(bug, ref).kind, Verdict::Pass);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BugModelClaims, ::testing::ValuesIn(model_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });
