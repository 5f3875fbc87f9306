// corpus/catalog/: one shrunk case per bug model (found from scratch by `fuzz`, see
// scripts/tools/fuzz-detection.sh), each with a `# catches: cpu-bug:<model>` claim, checked against the
// one model list (bug_models()): every file's claim names a model of the list and the file is named for
// it; the claim holds (the model fails it, cpu-ref passes it); every gated metric it fails is one the
// model declares in BugModel::catches; the case is small (<= 3 documents). Every model has its file:
// the models without one are listed together.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/pipeline/run_case.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(AO_SOURCE_DIR) / "corpus" / "catalog";

const BugModel* find_model(const std::string& id) {
  for (const auto& m : bug_models())
    if (m.name == id) return &m;
  return nullptr;
}

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> v;
  for (const auto& p : fs::directory_iterator(kDir))
    if (p.path().extension() == ".case") v.push_back(p.path());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(CatalogCorpus, EveryClaimNamesAModelOfTheListAndHolds) {
  auto ref = make_backend("cpu-ref");
  const auto files = corpus_files();
  ASSERT_FALSE(files.empty()) << kDir;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    const auto entries = read_case_files({file.string()});
    ASSERT_EQ(entries.size(), 1u) << "one case per file";
    const CaseEntry& e = entries[0];
    ASSERT_EQ(e.claim.rfind("cpu-bug:", 0), 0u)
        << "the claim must be `# catches: cpu-bug:<model>`, not '" << e.claim << "'";
    const std::string id = e.claim.substr(8);
    const BugModel* m = find_model(id);
    ASSERT_NE(m, nullptr) << "the claim names cpu-bug:" << id << ", which is no model of bug_models()";
    EXPECT_EQ(file.stem().string(), id) << "the file is named for the model its claim names";
    EXPECT_LE(e.c.q_lens.size(), 3u) << "shrunk to at most 3 documents";
    auto bug = make_backend(e.claim);
    const CaseResult bad = run_case(e.c, *bug, *ref);
    ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << format_result(bad);
    int declared_failures = 0;
    for (const auto& x : bad.verdict.metrics) {
      if (!x.failed) continue;
      const bool declared = std::find(m->catches.begin(), m->catches.end(), x.name) != m->catches.end();
      EXPECT_TRUE(declared) << e.claim << " fails " << x.name << ", not in its declared catches";
      declared_failures += declared;
    }
    EXPECT_GT(declared_failures, 0);
    const CaseResult good = run_case(e.c, *ref, *ref);
    EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
  }
}

TEST(CatalogCorpus, EveryModelOfTheListHasItsFile) {
  std::set<std::string> stems;
  for (const auto& f : corpus_files()) stems.insert(f.stem().string());
  std::string missing;
  for (const auto& m : bug_models())
    if (!stems.count(m.name)) missing += (missing.empty() ? "" : ", ") + m.name;
  EXPECT_EQ(missing, "") << "models without corpus/catalog/<id>.case (make one with scripts/tools/fuzz-detection.sh "
                            "--models <id> --catalog-out corpus/catalog): "
                         << missing;
}
