// The pipeline object (trial.h) used directly: cpu-ref and a bug model through one Trial on random
// cases from a recorded seed; a backend or reference that writes its inputs is an ERROR and the trial
// restores them; a reference failing its sanity check is an ERROR; run_case is the same verdict.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <fmt/format.h>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

// Random small cases of both ops: 2-3 documents (cross-doc is observable), some under zigzag CP.
std::string random_case(std::mt19937_64& rng) {
  const int docs = 2 + int(rng() % 2);
  const bool cp = rng() % 3 == 0;
  std::string lens;
  for (int d = 0; d < docs; ++d) lens += fmt::format("{}{}", d ? "," : "", cp ? 64 * (1 + rng() % 4) : 20 + rng() % 180);
  const std::string cp_keys = cp ? fmt::format(" cp=4 rank={}", rng() % 4) : "";
  if (rng() % 2)
    return fmt::format("op=indexer docs={}{} heads=4 dim=32 topk={} seed={}", lens, cp_keys, 8 + rng() % 40,
                       rng() % 100000);
  return fmt::format("op=sdpa docs={}{} hq=4 hkv=2 dim=32 seed={}", lens, cp_keys, rng() % 100000);
}

// Writes its inputs (q, or k for SDPA) through const_cast, then copies cpu-ref's outputs.
class InputWriter : public Backend {
 public:
  std::string name() const override { return "test:writes-inputs"; }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    const RunStatus st = ref_->run(l, in, out);
    auto& m = const_cast<Inputs&>(in);
    if (l.c.op == Op::Indexer) m.q[m.q.size() / 3] += 1.f;
    else m.k[m.k.size() / 3] += 1.f;
    return st;
  }

 private:
  std::unique_ptr<Backend> ref_ = make_backend("cpu-ref");
};

// A "reference" that writes nothing: its outputs keep the sentinels.
class Silent : public Backend {
 public:
  std::string name() const override { return "test:silent"; }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override { return {}; }
};

class Declines : public Backend {
 public:
  std::string name() const override { return "test:declines"; }
  std::string declines(const Layout&) const override { return "not my case"; }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override { return {}; }
};

bool same_inputs(const Inputs& a, const Inputs& b) {
  auto eq = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  return eq(a.q, b.q) && eq(a.k, b.k) && eq(a.v, b.v) && eq(a.w, b.w);
}

}  // namespace

TEST(Trial, CpuRefPassesAndABugModelFailsOnRandomCases) {
  const uint64_t seed = 20261203;
  SCOPED_TRACE(fmt::format("seed={}", seed));
  std::mt19937_64 rng(seed);
  auto ref = make_backend("cpu-ref");
  auto bug = make_backend("cpu-bug:cross-doc");
  int failed = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string line = random_case(rng);
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    const TrialRun r = t.run(*ref);
    ASSERT_TRUE(r.ok()) << r.status.reason;
    EXPECT_EQ(r.backend, "cpu-ref");
    EXPECT_EQ(t.judge(t.run(*ref), r).kind, Verdict::Pass);
    const TrialRun b = t.run(*bug);
    ASSERT_TRUE(b.ok()) << b.status.reason;
    const Verdict v = t.judge(b, r);
    EXPECT_TRUE(v.kind == Verdict::Pass || v.kind == Verdict::Fail) << v.reason;
    failed += v.kind == Verdict::Fail;
    // judge_rows over every checked row is judge; run_case gives the trial's verdict.
    const Verdict all_rows = t.judge_rows(b, r, t.layout().check_rows);
    EXPECT_EQ(all_rows.kind, v.kind);
    EXPECT_EQ(all_rows.reason, v.reason);
    const CaseResult cr = run_case(parse_case(line), *bug, *ref);
    EXPECT_EQ(cr.verdict.kind, v.kind);
    EXPECT_EQ(cr.verdict.reason, v.reason);
    ASSERT_EQ(cr.verdict.metrics.size(), v.metrics.size());
    for (size_t m = 0; m < v.metrics.size(); ++m) {
      EXPECT_EQ(cr.verdict.metrics[m].name, v.metrics[m].name);
      EXPECT_EQ(cr.verdict.metrics[m].value, v.metrics[m].value) << v.metrics[m].name;
    }
    // Every stage of the check has its wall time; the judgement's is never left out of the time line.
    EXPECT_GT(cr.inputs_seconds, 0);
    EXPECT_GT(cr.judge_seconds, 0);
    EXPECT_GE(cr.run_setup_seconds, 0);
    EXPECT_NE(format_result(cr).find(fmt::format("judge {:.3f} s", cr.judge_seconds)), std::string::npos);
    // The inputs never changed over all those runs.
    EXPECT_TRUE(same_inputs(t.inputs(), make_inputs(t.layout())));
  }
  EXPECT_GE(failed, 6) << "cross-doc is observable on multi-document packs";
}

TEST(Trial, WrittenInputsAreAnErrorAndAreRestored) {
  std::mt19937_64 rng(77);
  auto ref = make_backend("cpu-ref");
  InputWriter writer;
  for (int i = 0; i < 6; ++i) {
    const std::string line = random_case(rng);
    SCOPED_TRACE(line);
    Trial t(parse_case(line));
    const TrialRun w = t.run(writer);
    EXPECT_EQ(w.status.kind, RunStatus::Error);
    const char* tensor = t.layout().c.op == Op::Indexer ? "q" : "k";
    EXPECT_EQ(w.wrote_input.rfind(fmt::format("{} (first changed element", tensor), 0), 0u) << w.wrote_input;
    // Restored: a later run and every judgement see the pristine inputs.
    EXPECT_TRUE(same_inputs(t.inputs(), make_inputs(t.layout())));
    const TrialRun r = t.run(*ref);
    ASSERT_TRUE(r.ok());
    const Verdict as_backend = t.judge(w, r);
    EXPECT_EQ(as_backend.kind, Verdict::Error);
    EXPECT_EQ(as_backend.reason.rfind("backend test:writes-inputs wrote its input " + std::string(tensor), 0), 0u)
        << as_backend.reason;
    ASSERT_TRUE(Trial::unjudged(w).has_value());
    EXPECT_EQ(Trial::unjudged(w)->reason, as_backend.reason);
    const Verdict as_reference = t.judge(r, w);
    EXPECT_EQ(as_reference.kind, Verdict::Error);
    EXPECT_EQ(as_reference.reason.rfind("reference test:writes-inputs wrote its input", 0), 0u) << as_reference.reason;
    EXPECT_EQ(t.judge(t.run(*ref), r).kind, Verdict::Pass) << "the trial goes on with pristine inputs";
  }
}

TEST(Trial, SkipsAndInsaneReferencesAreNeverJudgedAsPass) {
  Trial t(parse_case("op=sdpa docs=40,17 hq=4 hkv=2 seed=5"));
  auto ref = make_backend("cpu-ref");
  Declines declines;
  Silent silent;
  const TrialRun r = t.run(*ref);
  const TrialRun d = t.run(declines);
  EXPECT_EQ(d.status.kind, RunStatus::Skipped);
  const Verdict skipped = t.judge(d, r);
  EXPECT_EQ(skipped.kind, Verdict::Skipped);
  EXPECT_EQ(skipped.reason, "test:declines skipped: not my case");
  EXPECT_EQ(t.judge(r, d).kind, Verdict::Skipped);  // a reference that did not run judges nothing
  EXPECT_EQ(t.judge(r, d).reason, "reference test:declines did not run: not my case");
  const Verdict insane = t.judge(r, t.run(silent));
  EXPECT_EQ(insane.kind, Verdict::Error);
  EXPECT_EQ(insane.reason.rfind("reference test:silent failed its own sanity check", 0), 0u) << insane.reason;
  EXPECT_FALSE(Trial::unjudged(r).has_value());
}

// Artifacts for report pictures: kept only for a failing case, and only when asked.
TEST(Trial, ArtifactsOnlyOnFail) {
  std::mt19937_64 rng(4242);
  auto ref = make_backend("cpu-ref");
  auto bug = make_backend("cpu-bug:cross-doc");
  int kept = 0;
  for (int i = 0; i < 6; ++i) {
    const Case c = parse_case(random_case(rng));
    EXPECT_EQ(run_case(c, *ref, *ref, {}, true).artifacts, nullptr);
    const CaseResult f = run_case(c, *bug, *ref, {}, true);
    if (f.verdict.kind != Verdict::Fail) {
      EXPECT_EQ(f.artifacts, nullptr);
      continue;
    }
    EXPECT_EQ(run_case(c, *bug, *ref, {}, false).artifacts, nullptr);
    ASSERT_NE(f.artifacts, nullptr);
    ++kept;
    const Layout& l = f.artifacts->layout;
    EXPECT_EQ(print_case(l.c), print_case(c));
    if (c.op == Op::Indexer) {
      EXPECT_EQ(f.artifacts->got.topk.size(), l.check_rows.size() * size_t(c.topk));
    } else {
      EXPECT_EQ(f.artifacts->got.o.size(), f.artifacts->ref.o.size());
      EXPECT_FALSE(f.artifacts->ref.lse.empty());
    }
  }
  EXPECT_GT(kept, 0);
}

namespace {
// cpu-ref under another name: a --vs that is not the built-in reference object.
class RefCopy : public Backend {
 public:
  std::string name() const override { return "test:ref-copy"; }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override { return ref_->run(l, in, out); }

 private:
  std::unique_ptr<Backend> ref_ = make_backend("cpu-ref");
};
}  // namespace

// The built-in reference runs only where its outputs are read: every indexer case; an SDPA case only
// under another --vs, or when it fails and its explanation or pictures compare outputs with the
// reference's. The SDPA verdict is the same either way.
TEST(Trial, TheExactReferenceRunsOnlyWhereItsOutputsAreRead) {
  std::mt19937_64 rng(20261205);
  auto ref = make_backend("cpu-ref");
  auto bug = make_backend("cpu-bug:cross-doc");
  RefCopy copy;
  EXPECT_TRUE(ref->is_exact_reference());
  EXPECT_FALSE(bug->is_exact_reference());
  EXPECT_FALSE(copy.is_exact_reference());
  int sdpa_failed = 0, indexer = 0;
  for (int i = 0; i < 16; ++i) {
    const Case c = parse_case(random_case(rng));
    SCOPED_TRACE(print_case(c));
    const bool sdpa = c.op == Op::Sdpa;
    indexer += !sdpa;
    const CaseResult pass = run_case(c, *ref, *ref);
    EXPECT_EQ(pass.verdict.kind, Verdict::Pass) << pass.verdict.reason;
    EXPECT_EQ(pass.reference_ran, !sdpa);
    EXPECT_EQ(pass.ref_seconds > 0, !sdpa);
    EXPECT_EQ(format_result(pass).find("reference not run") != std::string::npos, sdpa);
    const CaseResult f = run_case(c, *bug, *ref);
    EXPECT_EQ(f.reference_ran, !sdpa);
    const CaseResult other = run_case(c, *bug, copy);
    EXPECT_TRUE(other.reference_ran);
    EXPECT_EQ(other.verdict.kind, f.verdict.kind);
    ASSERT_EQ(other.verdict.metrics.size(), f.verdict.metrics.size());
    for (size_t m = 0; m < f.verdict.metrics.size(); ++m)
      EXPECT_EQ(other.verdict.metrics[m].value, f.verdict.metrics[m].value) << f.verdict.metrics[m].name;
    if (!sdpa || f.verdict.kind != Verdict::Fail) continue;
    ++sdpa_failed;
    const CaseResult explained = run_case(c, *bug, *ref, {}, false, true);
    EXPECT_TRUE(explained.reference_ran);
    ASSERT_NE(explained.explanation, nullptr);
    EXPECT_NE(format_explanation(*explained.explanation, 3).find("cross-doc"), std::string::npos);
  }
  EXPECT_GT(sdpa_failed, 0);
  EXPECT_GT(indexer, 0);
}
