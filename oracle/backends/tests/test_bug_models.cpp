// Every gated metric fails under the bug model that targets it and passes under cpu-ref, on several
// recorded seeds. (The kill matrix in test_selftest.cpp covers every model x layout family.)
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"

using namespace ao;

namespace {

struct Kill {
  const char* metric;
  const char* model;
  const char* case_line;  // without seed
};

const Kill kKills[] = {
    // indexer
    {"tie_aware_recall_min", "topleft-cp", "op=indexer docs=1024 cp=4 rank=3 topk=16"},
    {"out_of_causal", "off-by-one-causal", "op=indexer docs=300 topk=32"},
    {"cross_doc", "cross-doc", "op=indexer docs=100,200 topk=48"},
    {"out_of_range", "fill-end", "op=indexer docs=40,25 topk=64"},
    {"out_of_range", "derived-offsets", "op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4"},
    {"duplicates", "dup-merge", "op=indexer docs=300 topk=32"},
    {"wrong_fill_rows", "fill-zero", "op=indexer docs=40,25 topk=64"},
    {"unwritten_rows", "grid-floor", "op=indexer docs=100 topk=32"},
    {"clobbered_pad_slots", "pad-rows-written", "op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4"},
    {"clobbered_pad_slots", "store-overrun", "op=indexer docs=100,37 pad=5,0 tail=20 topk=48"},
    // sdpa
    {"tol_violations", "gqa-modulo", "op=sdpa docs=70,50 hq=8 hkv=2"},
    {"tol_violations", "derived-offsets", "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2"},
    {"tol_violations", "topleft-cp", "op=sdpa docs=256 cp=4 rank=1"},
    {"lse_max_err", "lse-log2", "op=sdpa docs=70"},
    {"rel_l2_err", "off-by-one-causal", "op=sdpa docs=8192 cp=32 rank=31 rows=64"},  // long rows: ~1/4000 per key
    {"lse_max_err", "off-by-one-causal", "op=sdpa q_lens=40,40 kv_lens=4100,4300 mask=bottomright rows=24 dtype=fp16"},
    {"nonfinite_valid", "tail-read", "op=sdpa docs=100,37 pad=11 tail=64 poison=nan"},
    {"unwritten_rows", "grid-floor", "op=sdpa docs=100"},
    {"unwritten_rows", "gqa-stats-first-head", "op=sdpa q_lens=1,1 kv_lens=40,17 mask=bottomright hq=8 hkv=2"},
    {"clobbered_pad_slots", "pad-rows-written", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"},
    {"clobbered_pad_slots", "stats-packed", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"},
};

CaseResult run(const std::string& line, const std::string& backend) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

}  // namespace

TEST(BugModels, EachGatedMetricFailsUnderItsBugModelAndPassesUnderCpuRef) {
  for (const auto& k : kKills)
    for (uint64_t seed : {3u, 101u, 977u}) {
      const std::string line = fmt::format("{} seed={}", k.case_line, seed);
      SCOPED_TRACE(fmt::format("{} under cpu-bug:{}: {}", k.metric, k.model, line));
      const auto bad = run(line, fmt::format("cpu-bug:{}", k.model));
      ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << bad.verdict.reason;
      const Metric* m = bad.verdict.find(k.metric);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->failed) << format_result(bad);
      EXPECT_FALSE(m->rule.empty());
      const auto good = run(line, "cpu-ref");
      EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
      const Metric* g = good.verdict.find(k.metric);
      ASSERT_NE(g, nullptr);
      EXPECT_FALSE(g->failed);
    }
}

TEST(BugModels, EveryGatedMetricHasAKillEntry) {
  // The list above must name every metric that carries a gate rule, for both ops.
  for (const char* line : {"op=indexer docs=64 topk=8", "op=sdpa docs=64"}) {
    const auto r = run(line, "cpu-ref");
    for (const auto& m : r.verdict.metrics) {
      if (m.rule.empty()) continue;
      bool listed = false;
      for (const auto& k : kKills)
        listed |= m.name == k.metric && std::string(k.case_line).find(parse_case(line).op == Op::Indexer
                                                                          ? "op=indexer" : "op=sdpa") == 0;
      EXPECT_TRUE(listed) << "gated metric " << m.name << " of '" << line << "' has no bug model in kKills";
    }
  }
}

TEST(BugModels, SeedDefectsAtReducedDims) {
  // Seed PR #14: chunk-local top-left mask on zigzag CP chunks; the fix is q_causal_offsets.
  const std::string idx = "op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7";
  const auto bad = run(idx, "cpu-bug:topleft-cp");
  EXPECT_LT(bad.verdict.find("overlap_mean")->value, 0.3);
  const auto good = run(idx, "cpu-ref");
  EXPECT_EQ(good.verdict.find("overlap_mean")->value, 1.0);
  EXPECT_EQ(good.verdict.find("overlap_min")->value, 1.0);
  EXPECT_EQ(good.verdict.find("out_of_causal")->value, 0.0);
  // cudnn-frontend #737: TE's padded example under prefix(lens) addressing.
  const std::string te = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13";
  EXPECT_EQ(run(te, "cpu-bug:derived-offsets").verdict.kind, Verdict::Fail);
  EXPECT_EQ(run(te, "cpu-ref").verdict.kind, Verdict::Pass);
}

TEST(BugModels, ModelsDeclineOpsTheyDoNotDefine) {
  for (const auto& m : bug_models()) {
    const std::string name = "cpu-bug:" + m.name;
    for (const char* line : {"op=indexer docs=64 topk=8", "op=sdpa docs=64"}) {
      const bool defined = parse_case(line).op == Op::Indexer ? m.indexer : m.sdpa;
      const auto r = run(line, name);
      EXPECT_EQ(r.verdict.kind == Verdict::Skipped, !defined) << name << " on " << line;
    }
  }
}
