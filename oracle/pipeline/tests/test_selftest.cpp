// The kill matrix: passes on the built-in families, and can fail (a check weakened by the case line
// turns an observable bug into MISSED; a family set where a model is never observable is reported).
#include <gtest/gtest.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/selftest.h"

using namespace ao;

namespace {
size_t model_index(const SelftestResult& r, const std::string& name) {
  for (size_t i = 0; i < r.models.size(); ++i)
    if (r.models[i] == name) return i;
  ADD_FAILURE() << "no model " << name;
  return 0;
}
}  // namespace

// The matrix at seed offset 17; CTest `selftest_kill_matrix` runs `attn-oracle selftest` at offset 0 (each run
// takes minutes: one per offset, not one per test). Kill and diagnosis are checked on the same run.
TEST(Selftest, BuiltInMatrixDetectsAndDiagnosesEveryObservableBug) {
  const auto r = run_selftest(selftest_families(), 17);
  EXPECT_TRUE(r.ok()) << format_selftest(r, true);
  ASSERT_EQ(r.models.size(), bug_models().size());
  ASSERT_EQ(r.diagnosis.size(), r.models.size());
  for (auto k : r.ref) EXPECT_EQ(k, Verdict::Pass);
  for (size_t b = 0; b < r.models.size(); ++b) {
    int detected = 0;
    for (size_t f = 0; f < r.families.size(); ++f) {
      const auto& c = r.cells[b][f];
      EXPECT_NE(c.kind, CellKind::Missed) << r.models[b];
      const bool det = c.kind == CellKind::Detected;
      detected += det;
      const auto k = r.diagnosis[b][f].kind;
      if (det)
        EXPECT_TRUE(k == DiagnosisKind::Named || k == DiagnosisKind::Equivalent) << r.models[b] << " F" << f + 1;
      else
        EXPECT_EQ(k, DiagnosisKind::None);
    }
    EXPECT_GT(detected, 0) << r.models[b];
  }
  EXPECT_NE(format_selftest(r, false).find("diagnosis matrix"), std::string::npos);
}

TEST(Selftest, NotObservableIsNotDetected) {
  // Fully packed: the derived (prefix-of-lens) offsets equal the bound ones, so the bug is invisible.
  const auto r = run_selftest({{"packed", "op=sdpa docs=100,37,90"}, {"te", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"}});
  const size_t d = model_index(r, "cpu-bug:derived-offsets");
  EXPECT_EQ(r.cells[d][0].kind, CellKind::NotObservable);
  EXPECT_EQ(r.cells[d][1].kind, CellKind::Detected);
  const size_t f = model_index(r, "cpu-bug:fill-zero");
  EXPECT_EQ(r.cells[f][0].kind, CellKind::Skip);  // indexer-only model
}

TEST(Selftest, AWeakenedGateMakesTheMatrixFail) {
  // min_recall=0 disables the recall gate; with topk=1 every row has a key, so the top-left bug's
  // indices stay causal and fully filled: its (observable) wrong selection is MISSED.
  const auto r = run_selftest({{"weak", "op=indexer docs=1024 cp=4 rank=3 topk=1 min_recall=0"}});
  const size_t t = model_index(r, "cpu-bug:topleft-cp");
  EXPECT_EQ(r.cells[t][0].kind, CellKind::Missed);
  EXPECT_FALSE(r.ok());
  const std::string text = format_selftest(r, false);
  EXPECT_NE(text.find("MISSED"), std::string::npos);
  EXPECT_NE(text.find("selftest: FAIL"), std::string::npos);
}

TEST(Selftest, ModelObservableNowhereAndUnkilledMetricsAreReported) {
  const auto r = run_selftest({{"packed", "op=indexer docs=200 topk=16"}});
  EXPECT_FALSE(r.ok());
  auto has = [&](const std::string& s) {
    for (const auto& p : r.problems)
      if (p.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("cpu-bug:tail-read is observable on none of its families"));
  EXPECT_TRUE(has("gated metric indexer:clobbered_pad_slots is failed by no bug model"));
}

TEST(Selftest, OutputsDifferIgnoresUncheckedRowsAndMinusOneInPadRows) {
  const Layout l = make_layout(parse_case("op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4"));
  Outputs a = make_sentinel_outputs(l), b = a;
  EXPECT_FALSE(outputs_differ(l, a, b));
  b.topk[3 * 4] = -1;  // pad row 3: -1 is not a write
  EXPECT_FALSE(outputs_differ(l, a, b));
  b.topk[3 * 4] = 0;
  EXPECT_TRUE(outputs_differ(l, a, b));
  const Layout la = make_layout(parse_case("op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4 pad_writes=allow"));
  EXPECT_FALSE(outputs_differ(la, a, b));  // pad slots are not judged when pad writes are allowed
}
