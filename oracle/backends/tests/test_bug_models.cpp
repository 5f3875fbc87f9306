// The bug models as backends: every gated metric is failed by some model's trigger case (the claims
// themselves run in test_bug_model_claims.cpp; the kill matrix in test_selftest.cpp covers every model x
// layout family), the seed defects at reduced dims, and the ops a model declines.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "run_line.h"

using namespace ao;

TEST(BugModels, EveryGatedMetricHasATriggerCaseThatFailsIt) {
  // Some model's ordinary trigger case (test_bug_model_claims.cpp runs them) must fail every metric that carries
  // a gate rule, for both ops.
  for (const char* line : {"op=indexer docs=64 topk=8", "op=sdpa docs=64", "op=indexer pass=bwd docs=64 topk=8",
                           "op=sdpa pass=bwd docs=64"}) {
    const Case c = parse_case(line);
    const std::string op = c.op == Op::Indexer ? "op=indexer" : "op=sdpa";
    const auto r = test::run_line(line, "cpu-ref");
    for (const auto& m : r.verdict.metrics) {
      if (m.rule.empty()) continue;
      bool listed = false;
      for (const auto& model : bug_models())
        for (const auto& t : model.triggers)
          listed |= t.scale == CaseScale::Ordinary && t.line.rfind(op, 0) == 0 &&  // production scale: not run here
                    std::find(t.fails.begin(), t.fails.end(), m.name) != t.fails.end();
      EXPECT_TRUE(listed) << "gated metric " << m.name << " of '" << line << "' fails on no model's trigger case";
    }
  }
}

TEST(BugModels, SeedDefectsAtReducedDims) {
  // Seed PR #14: chunk-local top-left mask on zigzag CP chunks; the fix is q_causal_offsets.
  const std::string idx = "op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7";
  const auto bad = test::run_line(idx, "cpu-bug:topleft-cp");
  EXPECT_LT(bad.verdict.find("overlap_mean")->value, 0.3);
  const auto good = test::run_line(idx, "cpu-ref");
  EXPECT_EQ(good.verdict.find("overlap_mean")->value, 1.0);
  EXPECT_EQ(good.verdict.find("overlap_min")->value, 1.0);
  EXPECT_EQ(good.verdict.find("out_of_causal")->value, 0.0);
  // cudnn-frontend #737: TE's padded example under prefix(lens) addressing.
  const std::string te = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13";
  EXPECT_EQ(test::run_line(te, "cpu-bug:derived-offsets").verdict.kind, Verdict::Fail);
  EXPECT_EQ(test::run_line(te, "cpu-ref").verdict.kind, Verdict::Pass);
}

TEST(BugModels, ModelsDeclineOpsTheyDoNotDefine) {
  for (const auto& m : bug_models()) {
    const std::string name = "cpu-bug:" + m.name;
    for (const char* line : {"op=indexer docs=64 topk=8", "op=sdpa docs=64", "op=indexer pass=bwd docs=64 topk=8",
                             "op=sdpa pass=bwd docs=64"}) {
      const Case c = parse_case(line);
      const bool defined = (c.op == Op::Indexer ? m.indexer : m.sdpa) && (!m.pass || c.pass == *m.pass);
      const auto r = test::run_line(line, name);
      EXPECT_EQ(r.verdict.kind == Verdict::Skipped, !defined) << name << " on " << line;
    }
  }
}
