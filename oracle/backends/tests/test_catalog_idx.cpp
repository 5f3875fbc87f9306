// The indexer models of the defect catalog's section A (their trigger and outside cases run in
// test_bug_model_claims.cpp): provenance, and the comparator and tie conventions they rely on.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../models/models.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

TEST(CatalogIdx, EveryModelCarriesItsProvenance) {
  for (const auto& m : models::indexer_catalog_models()) {
    SCOPED_TRACE(m.name);
    EXPECT_TRUE(m.indexer);
    EXPECT_FALSE(m.source.empty());
    if (m.defect_class != DefectClass::TopkBuffers) {
      EXPECT_EQ(m.catalog.rfind("[", 0), 0u);
    }
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
