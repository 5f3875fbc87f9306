// A case's `# catches:` claim against the verdict of a run (claim.h), every branch: no claim, a claim on
// another backend, a skipped run, a failed or errored run (held), a passed run (not held: a Fail naming
// the claim), and the rest of the verdict kept in each.
#include <gtest/gtest.h>

#include "attn_oracle/verdict/claim.h"

using namespace ao;

namespace {

Verdict verdict_of(Verdict::Kind k, const std::string& reason) {
  Verdict v;
  v.kind = k;
  v.reason = reason;
  v.metrics.push_back(gated_metric("strict_overlap", 0.5, ">= 1", k == Verdict::Fail));
  return v;
}

const CatchesClaim kClaim{"cpu-bug:topleft-cp", "cpu-bug:topleft-cp", "corpus/catalog/x.case", 3};

TEST(CatchesClaim, NoClaimLeavesEveryVerdict) {
  for (auto k : {Verdict::Pass, Verdict::Fail, Verdict::Skipped, Verdict::Error}) {
    const ClaimedVerdict c = apply_claim(verdict_of(k, "why"), nullptr, "cpu-bug:topleft-cp");
    EXPECT_EQ(c.check, ClaimCheck::NotChecked);
    EXPECT_EQ(c.verdict.kind, k);
    EXPECT_EQ(c.verdict.reason, "why");
  }
}

TEST(CatchesClaim, AClaimOnAnotherBackendIsNotChecked) {
  for (auto k : {Verdict::Pass, Verdict::Fail, Verdict::Skipped, Verdict::Error}) {
    const ClaimedVerdict c = apply_claim(verdict_of(k, ""), &kClaim, "cpu-ref");
    EXPECT_EQ(c.check, ClaimCheck::NotChecked);
    EXPECT_EQ(c.verdict.kind, k);
    EXPECT_EQ(c.verdict.reason, "");
  }
}

TEST(CatchesClaim, ASkippedRunChecksNothing) {
  const ClaimedVerdict c = apply_claim(verdict_of(Verdict::Skipped, "no GPU"), &kClaim, "cpu-bug:topleft-cp");
  EXPECT_EQ(c.check, ClaimCheck::NotChecked);
  EXPECT_EQ(c.verdict.kind, Verdict::Skipped);
  EXPECT_EQ(c.verdict.reason, "no GPU");
}

TEST(CatchesClaim, AFailedOrErroredRunHoldsTheClaim) {
  for (auto k : {Verdict::Fail, Verdict::Error}) {
    const ClaimedVerdict c = apply_claim(verdict_of(k, "strict_overlap"), &kClaim, "cpu-bug:topleft-cp");
    EXPECT_EQ(c.check, ClaimCheck::Held);
    EXPECT_EQ(c.verdict.kind, k);
    EXPECT_EQ(c.verdict.reason, "strict_overlap");
    EXPECT_EQ(c.verdict.metrics.size(), 1u);
  }
}

TEST(CatchesClaim, AWeakRunDoesNotHoldTheClaim) {  // no metric failed: the backend was not caught
  const ClaimedVerdict c = apply_claim(verdict_of(Verdict::Weak, "weak:dq (a zero dq passes every gate)"), &kClaim,
                                       "cpu-bug:topleft-cp");
  EXPECT_EQ(c.check, ClaimCheck::NotHeld);
  EXPECT_EQ(c.verdict.kind, Verdict::Fail);
  EXPECT_EQ(c.verdict.reason, "claim not held: corpus/catalog/x.case:3 '# catches: cpu-bug:topleft-cp', but the case "
                              "failed no metric (weak:dq (a zero dq passes every gate))");
}

TEST(CatchesClaim, APassedRunFailsNamingTheClaim) {
  const ClaimedVerdict c = apply_claim(verdict_of(Verdict::Pass, ""), &kClaim, "cpu-bug:topleft-cp");
  EXPECT_EQ(c.check, ClaimCheck::NotHeld);
  EXPECT_EQ(c.verdict.kind, Verdict::Fail);
  EXPECT_EQ(c.verdict.reason,
            "claim not held: corpus/catalog/x.case:3 '# catches: cpu-bug:topleft-cp', but the case passed");
  ASSERT_EQ(c.verdict.metrics.size(), 1u);  // the run's measurements stay for the reports
  EXPECT_FALSE(c.verdict.metrics[0].failed);
}

TEST(CatchesClaim, ComparesIdentitiesNotSpellings) {
  const CatchesClaim spelled{"plugin:./lib.so:bug=x", "plugin:/abs/lib.so:bug=x", "a.case", 1};
  EXPECT_EQ(apply_claim(verdict_of(Verdict::Pass, ""), &spelled, "plugin:/abs/lib.so:bug=x").check,
            ClaimCheck::NotHeld);
  EXPECT_EQ(apply_claim(verdict_of(Verdict::Pass, ""), &spelled, "plugin:./lib.so:bug=x").check,
            ClaimCheck::NotChecked);
}

}  // namespace
