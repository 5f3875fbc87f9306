// `attn-oracle explain` (exit codes: 0 explained / nothing to explain, 1 not explained, 2 bad input
// naming the option), explanations in `repro`/`gate` output and reports (with --no-explain to turn them
// off), and `attn-oracle catalog` (every bug model; docs/reference/catalog.md is its `--markdown`, checked by
// CTest `docs_generated`).
#include <gtest/gtest.h>

#include <set>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/report/report.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using namespace ao::test;
namespace fs = std::filesystem;

namespace {
const char* kTe = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13";

}  // namespace

TEST(ExplainCli, ExitCodes) {
  Cmd r = run_cli(fmt::format("explain {} --backend cpu-bug:derived-offsets", kTe));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("best explanation: derived-offsets — reproduces "), std::string::npos) << r.out;
  r = run_cli(fmt::format("explain {} --backend cpu-ref", kTe));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("nothing to explain: cpu-ref passes this case"), std::string::npos) << r.out;
  r = run_cli(fmt::format("explain op=sdpa docs=70,50 hq=4 hkv=2 seed=5 --backend plugin:{}:fail=nan", AO_EXAMPLE_PLUGIN));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no known defect reproduces this"), std::string::npos) << r.out;
  r = run_cli(fmt::format("explain {} --backend cpu-bug:fill-zero", kTe));  // an indexer-only model: skipped
  EXPECT_EQ(r.code, 125) << r.out;
}

TEST(ExplainCli, BadInputExitsTwoNamingTheOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {fmt::format("explain {}", kTe), "--backend"},
      {fmt::format("explain {} --backend cpu-bug:no-such-model", kTe), "'backend'"},
      {fmt::format("explain {} --backend cpu-ref --match fuzzy", kTe), "--match"},
      {fmt::format("explain {} --backend cpu-ref --top 0", kTe), "--top"},
      {"explain op=sdpa topk=3 --backend cpu-ref", "'topk'"},
      {"explain --backend cpu-ref", "case"},
  };
  for (const auto& [args, what] : bad) {
    SCOPED_TRACE(args);
    const Cmd r = run_cli(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  }
}

// repro prints the explanation of a failing case and writes it into report.json (schema 3), report.md and
// report.html; --no-explain leaves it out (null).
TEST(ExplainCli, ReproAndReportsCarryTheExplanation) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ao_explain_repro_{}", ::getpid());
  fs::remove_all(dir);
  Cmd r = run_cli(fmt::format("repro {} --backend cpu-bug:derived-offsets --backend cpu-ref --report-dir {}", kTe,
                              dir.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("explain: best explanation: derived-offsets"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(j.at("schema_version").get<int>(), kReportSchemaVersion);
  EXPECT_GE(kReportSchemaVersion, 3);
  const auto& c0 = j.at("cases").at(0);
  EXPECT_EQ(c0.at("explanation").at("outcome"), "explained");
  EXPECT_EQ(c0.at("explanation").at("best").at(0), "derived-offsets");
  EXPECT_EQ(c0.at("explanation").at("ranked").at(0).at("broken"), 0);
  EXPECT_TRUE(j.at("cases").at(1).at("explanation").is_null());  // cpu-ref passed: nothing explained
  // The headline names the backend (foreign text): a code span in report.md.
  EXPECT_NE(slurp(dir / "report.md").find("**explain**: `best explanation: derived-offsets"), std::string::npos);
  EXPECT_NE(slurp(dir / "report.html").find("<b>explain:</b> best explanation: derived-offsets"), std::string::npos);
  r = run_cli(fmt::format("repro {} --backend cpu-bug:derived-offsets --no-explain --report-dir {}", kTe, dir.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("explain:"), std::string::npos) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir / "report.json")).at("cases").at(0).at("explanation").is_null());
  fs::remove_all(dir);
}

TEST(ExplainCli, GateExplainsFailingCases) {
  const fs::path f = fs::temp_directory_path() / fmt::format("ao_explain_gate_{}.case", ::getpid());
  std::ofstream(f) << kTe << "\nop=sdpa docs=64\n";
  Cmd r = run_cli(fmt::format("gate {} --backend cpu-bug:derived-offsets", f.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("explain: best explanation: derived-offsets"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("explain: nothing"), std::string::npos) << r.out;  // the passing case is not explained
  r = run_cli(fmt::format("gate {} --backend cpu-bug:derived-offsets --no-explain", f.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("explain:"), std::string::npos) << r.out;
  fs::remove(f);
}

// catalog: one row per bug model (from bug_models(), so models added later appear), with its catalog id,
// class, source, catching metrics and the backends re-creating it; then the unmodelled entries.
TEST(CatalogCli, EveryModelAndEveryUnmodelledEntryIsListed) {
  const Cmd md = run_cli("catalog --markdown");
  ASSERT_EQ(md.code, 0) << md.out;
  for (const auto& m : bug_models()) {
    const std::string row = fmt::format("| `{}` | {} | {} | ", m.name, m.catalog.empty() ? "-" : m.catalog,
                                        defect_class_name(m.defect_class));
    EXPECT_NE(md.out.find(row), std::string::npos) << row;
    EXPECT_NE(md.out.find("`cpu-bug:" + m.name + "`"), std::string::npos) << m.name;
    for (const auto& metric : m.catches) EXPECT_NE(md.out.find("`" + metric + "`"), std::string::npos) << metric;
  }
  for (const auto& u : unmodelled_catalog_entries()) {
    EXPECT_NE(md.out.find(fmt::format("| {} | ", u.catalog)), std::string::npos) << u.catalog;
    if (u.partly) continue;  // a modelled entry leaves the list, or says what part its model lacks
    for (const auto& m : bug_models()) EXPECT_NE(m.catalog, u.catalog) << u.catalog << " is modelled by " << m.name;
  }
  const Cmd text = run_cli("catalog");
  ASSERT_EQ(text.code, 0) << text.out;
  for (const auto& m : bug_models()) EXPECT_NE(text.out.find(m.name), std::string::npos) << m.name;
  EXPECT_NE(text.out.find("not modelled"), std::string::npos);
}

// `catalog --json` is the model list as data, one to one with bug_models() in its order (a dropped,
// added or reordered model, a changed case or claim fails here); every string round-trips byte for byte
// (the writer escapes quotes, backslashes and control characters), and every `bug` knob value a backend
// lists names a model.
TEST(CatalogCli, JsonIsTheModelListOneToOne) {
  TempDir d;
  const fs::path file = d.path / "catalog.json";
  const Cmd r = run_sh(fmt::format("{} catalog --json > {}", AO_CLI, file.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(slurp(file));  // throws on invalid JSON
  EXPECT_EQ(j.at("schema"), "attn-oracle.catalog");
  EXPECT_EQ(j.at("schema_version"), 1);
  ASSERT_EQ(j.at("seeds").size(), std::size(kModelCaseSeeds));
  for (size_t i = 0; i < std::size(kModelCaseSeeds); ++i) EXPECT_EQ(j["seeds"][i], kModelCaseSeeds[i]);
  const auto& models = j.at("models");
  const auto table = defect_table();
  ASSERT_EQ(models.size(), bug_models().size()) << "catalog --json must list every model once";
  ASSERT_EQ(table.size(), bug_models().size());
  std::set<std::string> ids;
  for (size_t i = 0; i < bug_models().size(); ++i) {
    const BugModel& m = bug_models()[i];
    const auto& x = models[i];
    SCOPED_TRACE(m.name);
    ids.insert(m.name);
    EXPECT_EQ(x.at("id"), m.name);
    EXPECT_EQ(x.at("what"), m.what);
    std::vector<std::string> ops;
    if (m.indexer) ops.push_back("indexer");
    if (m.sdpa) ops.push_back("sdpa");
    EXPECT_EQ(x.at("ops").get<std::vector<std::string>>(), ops);
    EXPECT_EQ(x.at("catalog"), m.catalog);
    EXPECT_EQ(x.at("source"), m.source);
    EXPECT_EQ(x.at("class"), defect_class_name(m.defect_class));
    EXPECT_EQ(x.at("catches").get<std::vector<std::string>>(), m.catches);
    ASSERT_EQ(x.at("triggers").size(), m.triggers.size());
    for (size_t t = 0; t < m.triggers.size(); ++t) {
      EXPECT_EQ(x["triggers"][t].at("case"), m.triggers[t].line);
      EXPECT_EQ(x["triggers"][t].at("fails").get<std::vector<std::string>>(), m.triggers[t].fails);
      EXPECT_EQ(x["triggers"][t].at("scale"), m.triggers[t].scale == CaseScale::Production ? "production" : "ordinary");
    }
    ASSERT_EQ(x.at("outside").size(), m.outside.size());
    for (size_t o = 0; o < m.outside.size(); ++o) {
      EXPECT_EQ(x["outside"][o].at("case"), m.outside[o].line);
      EXPECT_EQ(x["outside"][o].at("why"), m.outside[o].why);
      EXPECT_EQ(x["outside"][o].at("scale"), m.outside[o].scale == CaseScale::Production ? "production" : "ordinary");
    }
    EXPECT_EQ(table[i].first, m.name);
    // The test binary links the CPU backends only; a GPU build's CLI adds its knobs after them (each checked
    // against bug_knobs below).
    const auto specs = x.at("backends").get<std::vector<std::string>>();
    ASSERT_GE(specs.size(), table[i].second.size());
    EXPECT_EQ(std::vector<std::string>(specs.begin(), specs.begin() + table[i].second.size()), table[i].second);
    for (size_t k = table[i].second.size(); k < specs.size(); ++k)
      EXPECT_NE(specs[k].find(":bug="), std::string::npos) << specs[k] << ": only GPU bug knobs follow the CPU specs";
    EXPECT_NE(std::find(specs.begin(), specs.end(), "cpu-bug:" + m.name), specs.end());
  }
  for (const auto& b : j.at("bug_knobs"))
    for (const auto& v : b.at("values")) {
      EXPECT_TRUE(ids.count(v.get<std::string>())) << b.at("backend") << " bug=" << v;
      const std::string spec = b.at("backend").get<std::string>() + ":bug=" + v.get<std::string>();
      bool listed = false;  // the knob is among its model's backends
      for (const auto& x : models)
        if (x.at("id") == v) {
          const auto specs = x.at("backends").get<std::vector<std::string>>();
          listed = std::find(specs.begin(), specs.end(), spec) != specs.end();
        }
      EXPECT_TRUE(listed) << spec;
    }
  const auto& unmodelled = j.at("unmodelled");
  ASSERT_EQ(unmodelled.size(), unmodelled_catalog_entries().size());
  for (size_t i = 0; i < unmodelled.size(); ++i) {
    EXPECT_EQ(unmodelled[i].at("catalog"), unmodelled_catalog_entries()[i].catalog);
    EXPECT_EQ(unmodelled[i].at("needs"), unmodelled_catalog_entries()[i].needs);
  }
  EXPECT_NE(run_cli("catalog --json --markdown").code, 0) << "one format at a time";
}

// Models whose wrong addressing points outside a buffer (a batch stride from max_seqlen_kv, the combine's
// stride 0 under CP): with explain on (it runs every model on each failing case), gate ends with its
// summary and all its reports, repro and explain name the model.
TEST(ExplainCli, ModelsOffTheBufferKeepGateAndItsReports) {
  const std::string stride = "op=sdpa docs=5,3 max_seqlen_kv=100000 hq=1 dim=8";
  const std::string stride0 =
      "op=sdpa docs=3,63,260,106,5 padded_offsets=0,32,96,448,576,608 cp=16 rank=2 window=1 max_seqlen_kv=324 "
      "num_splits=8 hq=2 hkv=1 dtype=fp16 seed=792779 poison=large";
  const fs::path dir = fs::temp_directory_path() / fmt::format("ao_explain_bounds_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path f = dir / "c.case";
  std::ofstream(f) << stride << "\n" << stride0 << "\n";
  for (const char* model : {"batch-stride-max-seqlen", "split-combine-stride0"}) {
    SCOPED_TRACE(model);
    const fs::path rep = dir / model;
    Cmd r = run_cli(fmt::format("gate {} --backend cpu-bug:{} --report-dir {}", f.string(), model, rep.string()));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("explain: best explanation: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("gate: "), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
    EXPECT_EQ(j.at("status"), "complete");
    EXPECT_GE(j.at("summary").at("fail").get<int>(), 1);
    EXPECT_EQ(j.at("summary").at("error").get<int>(), 0);
    for (const char* name : {"report.md", "report.xml", "report.html"}) EXPECT_TRUE(fs::exists(rep / name)) << name;
  }
  Cmd r = run_cli(fmt::format("explain {} --backend cpu-bug:batch-stride-max-seqlen", stride));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("best explanation: [38] batch-stride-max-seqlen"), std::string::npos) << r.out;
  r = run_cli(fmt::format("explain {} --backend cpu-bug:split-combine-stride0", stride0));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("best explanation: [30] split-combine-stride0"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
