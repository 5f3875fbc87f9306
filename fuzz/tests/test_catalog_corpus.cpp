// corpus/catalog/: one shrunk case per bug model (found from scratch by `fuzz`, see
// scripts/tools/fuzz-detection.sh), each with a `# catches: cpu-bug:<model>` claim. Every model has its
// file; the claim holds (the model fails it, cpu-ref passes it); every gated metric it fails is one
// the model declares in BugModel::catches; the case is small (<= 3 documents).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/pipeline/run_case.h"

using namespace ao;

TEST(CatalogCorpus, EveryBugModelHasAShrunkCaseWhoseClaimHolds) {
  const std::string dir = std::string(AO_SOURCE_DIR) + "/corpus/catalog";
  auto ref = make_backend("cpu-ref");
  std::set<std::string> files;
  for (const auto& m : bug_models()) {
    const std::string file = fmt::format("{}/{}.case", dir, m.name);
    SCOPED_TRACE(file);
    files.insert(file);
    ASSERT_TRUE(std::filesystem::exists(file)) << "no corpus/catalog case for cpu-bug:" << m.name;
    const auto entries = read_case_files({file});
    ASSERT_EQ(entries.size(), 1u);
    const CaseEntry& e = entries[0];
    EXPECT_EQ(e.claim, "cpu-bug:" + m.name);
    EXPECT_LE(e.c.q_lens.size(), 3u) << "shrunk to at most 3 documents";
    auto bug = make_backend("cpu-bug:" + m.name);
    const CaseResult bad = run_case(e.c, *bug, *ref);
    ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << format_result(bad);
    int claimed = 0;
    for (const auto& x : bad.verdict.metrics) {
      if (!x.failed) continue;
      const bool declared = std::find(m.catches.begin(), m.catches.end(), x.name) != m.catches.end();
      EXPECT_TRUE(declared) << "cpu-bug:" << m.name << " fails " << x.name << ", not in its declared catches";
      claimed += declared;
    }
    EXPECT_GT(claimed, 0);
    const CaseResult good = run_case(e.c, *ref, *ref);
    EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
  }
  // No stale files: each file names a model that exists.
  for (const auto& p : std::filesystem::directory_iterator(dir)) {
    if (p.path().extension() == ".case") {
      EXPECT_TRUE(files.count(p.path().string())) << "stale " << p.path();
    }
  }
}
