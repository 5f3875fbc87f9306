// The indexer models of the defect catalog's section A. Each fails its named metric on
// its trigger under cpu-bug:<model> and passes under cpu-ref (3 recorded seeds), and is specific:
// outside its trigger its outputs equal cpu-ref's bitwise.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

struct Kill {
  const char* model;
  const char* case_line;  // without seed
  const char* metric;
};

const Kill kKills[] = {
    {"row-start-ignored", "op=indexer docs=100,37,200 topk=48", "cross_doc"},
    {"long-row-start", "op=indexer q_lens=16,16 kv_lens=2000,4600 topk=16", "cross_doc"},
    {"sentinel-lanes", "op=indexer docs=40,25 topk=64", "unwritten_rows"},
    {"sentinel-lanes", "op=indexer docs=40,25 topk=64", "out_of_causal"},
    {"unaligned-start", "op=indexer docs=100,37,200 topk=48", "cross_doc"},
    {"masked-key-fill", "op=indexer docs=40,25 topk=64", "out_of_causal"},
    {"masked-key-fill", "op=indexer docs=40,25 topk=64", "wrong_fill_rows"},
    // Every row has k allowed keys, but most score below -65504 (large scale, negative head weights).
    {"masked-key-fill", "op=indexer docs=40 mask=none topk=32 scale=100000", "out_of_range"},
    {"compressed-tail-uninit",
     "op=indexer q_lens=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 kv_lens=100,100,100,100,100,100,100,100,100,100,100,100,100,"
     "100,100,100 ratio=4 topk=30",
     "tie_aware_recall_min"},
    {"swizzle-small-dim", "op=indexer docs=300 topk=32", "tie_aware_recall_min"},
    // Bottom-right suffix queries (q_len < kv_len): the first query sits at position kv_len - q_len.
    {"chunk-keys-only", "op=indexer q_lens=16,16 kv_lens=300,200 topk=32", "tie_aware_recall_min"},
    {"chunk-keys-only", "op=indexer q_lens=16,16 kv_lens=300,200 topk=32", "wrong_fill_rows"},
    // Chunked prefill: a 64-query chunk at position 256 of longer documents.
    {"chunk-keys-only", "op=indexer q_lens=64,64 kv_lens=320,400 start_pos=256 topk=32", "tie_aware_recall_min"},
    {"tie-arrival-order", "op=indexer docs=300 levels=3 topk=32 ties=strict", "tie_order_rows"},
    {"masked-key-fill", "op=indexer docs=300 mask=none topk=32 values=extreme", "out_of_range"},
    {"masked-key-fill", "op=indexer docs=300 topk=32 values=extreme", "out_of_causal"},
    {"radix-bin-overflow", "op=indexer q_lens=8 kv_lens=12000 topk=512 values=clustered", "tie_aware_recall_min"},
    // Dense long rows: ~10% of 30000 keys share the k-th score's fp16 bin.
    {"radix-bin-overflow", "op=indexer q_lens=8 kv_lens=30000 topk=8192", "tie_aware_recall_min"},
    // One head: every key whose dot is <= 0 scores exactly 0 (a ReLU plateau at the k-th value).
    {"radix-bin-overflow", "op=indexer q_lens=8 kv_lens=20000 heads=1 topk=4096", "tie_aware_recall_min"},
};

// Cases outside each model's trigger.
struct Outside {
  const char* model;
  const char* case_line;
  const char* why;
};

const Outside kOutside[] = {
    {"row-start-ignored", "op=indexer docs=300 topk=32", "one document at buffer row 0"},
    {"row-start-ignored", "op=indexer docs=1024 cp=4 rank=1 topk=64", "one document at buffer row 0, CP"},
    {"long-row-start", "op=indexer q_lens=16,16 kv_lens=2000,4000 topk=16", "no row longer than 4096 keys"},
    {"long-row-start", "op=indexer q_lens=16 kv_lens=6000 topk=16", "long rows, document at buffer row 0"},
    {"sentinel-lanes", "op=indexer docs=100,37 mask=none topk=32", "every row has k allowed keys"},
    {"unaligned-start", "op=indexer docs=64,32,100 topk=32", "starts aligned to 16 rows"},
    {"masked-key-fill", "op=indexer docs=100,37 mask=none topk=32", "k keys per row, none below -65504"},
    {"compressed-tail-uninit", "op=indexer docs=512 ratio=4 topk=32", "ratio 4, q_len > 1"},
    {"compressed-tail-uninit", "op=indexer q_lens=1,1 kv_lens=100,100 topk=30", "q_len 1, ratio 1"},
    {"swizzle-small-dim", "op=indexer docs=300 dim=64 topk=32", "bf16 dim 64: 128-byte rows"},
    {"swizzle-small-dim", "op=indexer docs=300 dim=32 dtype=fp32 topk=32", "fp32 dim 32: 128-byte rows"},
    {"radix-bin-overflow", "op=indexer q_lens=8 kv_lens=3000 topk=512", "no bin holds more than 2048 keys"},
    {"chunk-keys-only", "op=indexer docs=300,100 topk=32", "queries start at position 0"},
    {"chunk-keys-only", "op=indexer q_lens=128,64 kv_lens=32,16 ratio=4 topk=16", "q_len = kv_len x ratio"},
    {"chunk-keys-only", "op=indexer docs=300,100 start_pos=0 topk=32", "chunk at position 0"},
    {"tie-arrival-order", "op=indexer docs=300 mask=none heads=16 topk=4 ties=strict",
     "no exact ties in the top 4 (with 4 heads a row whose weights are all negative has a 0-score plateau)"},
    {"masked-key-fill", "op=indexer docs=300 mask=none topk=32 values=plateau", "no score below -65504"},
    {"radix-bin-overflow", "op=indexer q_lens=8 kv_lens=1500 topk=512 values=clustered", "bins of at most 2048 keys"},
};

CaseResult run(const std::string& line, const std::string& backend) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

const BugModel* find_model(const std::string& name) {
  for (const auto& m : bug_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

TEST(CatalogIdx, EachModelFailsItsMetricOnItsTriggerAndCpuRefPasses) {
  for (const auto& k : kKills)
    for (uint64_t seed : {3u, 101u, 977u}) {
      const std::string line = fmt::format("{} seed={}", k.case_line, seed);
      SCOPED_TRACE(fmt::format("{} under cpu-bug:{}: {}", k.metric, k.model, line));
      const auto bad = run(line, fmt::format("cpu-bug:{}", k.model));
      ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << bad.verdict.reason;
      const Metric* m = bad.verdict.find(k.metric);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->failed) << format_result(bad);
      const auto good = run(line, "cpu-ref");
      EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
    }
}

TEST(CatalogIdx, EachModelIsSpecificToItsTrigger) {
  for (const auto& o : kOutside)
    for (uint64_t seed : {3u, 101u}) {
      const std::string line = fmt::format("{} seed={}", o.case_line, seed);
      SCOPED_TRACE(fmt::format("cpu-bug:{} outside its trigger ({}): {}", o.model, o.why, line));
      Trial t(parse_case(line));
      auto ref_be = make_backend("cpu-ref");
      auto bug_be = make_backend(fmt::format("cpu-bug:{}", o.model));
      const TrialRun ref = t.run(*ref_be), bug = t.run(*bug_be);
      ASSERT_TRUE(ref.ok() && bug.ok());
      EXPECT_FALSE(outputs_differ(t.layout(), bug.out, ref.out));
      EXPECT_EQ(bug.out.topk, ref.out.topk);  // order included
      EXPECT_EQ(t.judge(bug, ref).kind, Verdict::Pass);
    }
}

TEST(CatalogIdx, EveryModelCarriesItsProvenance) {
  for (const auto& k : kKills) {
    const BugModel* m = find_model(k.model);
    ASSERT_NE(m, nullptr) << k.model;
    EXPECT_TRUE(m->indexer);
    EXPECT_FALSE(m->source.empty()) << k.model;
    EXPECT_NE(std::find(m->catches.begin(), m->catches.end(), k.metric), m->catches.end())
        << k.model << " fails " << k.metric << " but does not list it in catches";
    if (m->klass != DefectClass::TopkBuffers) {
      EXPECT_EQ(m->catalog.rfind("[", 0), 0u) << k.model;
    }
    bool specific = false;
    for (const auto& o : kOutside) specific |= std::string(o.model) == k.model;
    EXPECT_TRUE(specific) << k.model << " has no specificity case";
  }
}

TEST(CatalogIdx, OutputsDifferJudgesACheckedIndexerRowAsASet) {
  // The comparator judges a row's set, so an order-only difference (a model that mis-scores a row with
  // fewer than k keys: swizzle-small-dim, compressed-tail-uninit) is not observable; a changed index is.
  const Layout l = make_layout(parse_case("op=indexer docs=40 topk=8 seed=3"));
  Outputs a = make_sentinel_outputs(l);
  for (size_t e = 0; e < a.topk.size(); ++e) a.topk[e] = int32_t(e % 8);
  Outputs b = a;
  const int64_t r = l.check_rows.back();
  std::swap(b.topk[size_t(r) * 8], b.topk[size_t(r) * 8 + 5]);
  EXPECT_FALSE(outputs_differ(l, a, b));
  b.topk[size_t(r) * 8] = 30;
  EXPECT_TRUE(outputs_differ(l, a, b));
}

TEST(CatalogIdx, TieArrivalOrderIsAValidSetUnderTiesSet) {
  // The same tied rows: descending tied keys are a valid set (ties=set passes), only strict fails them.
  for (uint64_t seed : {3u, 101u, 977u}) {
    const std::string line = fmt::format("op=indexer docs=300 levels=3 topk=32 seed={}", seed);
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    auto ref_be = make_backend("cpu-ref");
    auto bug_be = make_backend("cpu-bug:tie-arrival-order");
    const TrialRun ref = t.run(*ref_be), bug = t.run(*bug_be);
    EXPECT_NE(bug.out.topk, ref.out.topk);  // the model reordered tied keys
    EXPECT_FALSE(outputs_differ(t.layout(), bug.out, ref.out));
    const Verdict v = t.judge(bug, ref);
    EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
    EXPECT_EQ(v.find("tie_order_rows"), nullptr);  // a strict-mode metric only
  }
}
