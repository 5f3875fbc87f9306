// Report writers: JSON (schema-versioned, parsed back with nlohmann), JUnit XML (parsed with
// python3's xml.etree), Markdown summary, and `repro --report-dir` writing all three.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/report/report.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

class ThrowingBackend : public Backend {
 public:
  std::string name() const override { return "test:throws"; }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override { throw std::runtime_error("boom <&>"); }
};

// pass (cpu-ref), fail (topleft-cp), skipped (an indexer-only model on sdpa), error (a backend that throws).
std::vector<CaseResult> sample_results() {
  auto ref = make_backend("cpu-ref");
  std::vector<CaseResult> r;
  const Case idx = parse_case("op=indexer docs=1024 cp=4 rank=3 topk=16 seed=3");
  r.push_back(run_case(idx, *make_backend("cpu-ref"), *ref));
  r.push_back(run_case(idx, *make_backend("cpu-bug:topleft-cp"), *ref));
  r.push_back(run_case(parse_case("op=sdpa docs=64"), *make_backend("cpu-bug:fill-zero"), *ref));
  ThrowingBackend t;
  r.push_back(run_case(parse_case("op=sdpa docs=64"), t, *ref));
  return r;
}

// Parses the JUnit file with python3's xml.etree and checks its structure; returns the exit status.
int check_junit_with_python(const fs::path& xml, int tests, int failures, int errors, int skipped) {
  const fs::path py = xml.parent_path() / "check_junit.py";
  std::ofstream(py) << R"(import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
cases = root.findall("./testsuite/testcase")
want = [int(x) for x in sys.argv[2:6]]
got = [len(cases), sum(len(c.findall("failure")) for c in cases), sum(len(c.findall("error")) for c in cases),
       sum(len(c.findall("skipped")) for c in cases)]
assert got == want, (got, want)
suite = root.find("testsuite")
assert [int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")] == want
for c in cases:
    assert c.get("name").startswith("op="), c.get("name")
    assert c.get("classname").startswith("attn-oracle."), c.get("classname")
    float(c.get("time"))
for f in root.iter("failure"):
    assert f.get("message") and f.text and "FAILED" in f.text
)";
  const std::string cmd = fmt::format("python3 '{}' '{}' {} {} {} {}", py.string(), xml.string(), tests, failures,
                                      errors, skipped);
  return std::system(cmd.c_str());
}

bool have_python3() { return std::system("python3 -c 'import xml.etree.ElementTree' >/dev/null 2>&1") == 0; }

}  // namespace

TEST(Reports, JsonIsSchemaVersionedWithOneObjectPerCase) {
  const auto res = sample_results();
  ASSERT_EQ(res[0].verdict.kind, Verdict::Pass);
  ASSERT_EQ(res[1].verdict.kind, Verdict::Fail);
  ASSERT_EQ(res[2].verdict.kind, Verdict::Skipped);
  ASSERT_EQ(res[3].verdict.kind, Verdict::Error);
  const auto j = nlohmann::json::parse(report_json(res));
  EXPECT_EQ(j.at("schema_version").get<int>(), kReportSchemaVersion);
  EXPECT_EQ(j.at("tool").at("version").get<std::string>(), tool_version());
  ASSERT_EQ(j.at("cases").size(), res.size());
  const char* verdicts[] = {"pass", "fail", "skipped", "error"};
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& c = j["cases"][i];
    EXPECT_EQ(c.at("case").get<std::string>(), res[i].case_line);
    EXPECT_EQ(parse_case(c.at("case").get<std::string>()), parse_case(res[i].case_line));  // pasteable
    EXPECT_EQ(c.at("backend").get<std::string>(), res[i].backend);
    EXPECT_EQ(c.at("verdict").get<std::string>(), verdicts[i]);
    EXPECT_TRUE(c.at("versions").contains("attn-oracle"));
    EXPECT_TRUE(c.at("versions").contains("backend"));
    EXPECT_TRUE(c.at("metrics").is_object());
    EXPECT_EQ(c.at("metrics").size(), res[i].verdict.metrics.size());
  }
  const auto& m = j["cases"][1]["metrics"];
  EXPECT_TRUE(m.at("tie_aware_recall_min").at("failed").get<bool>());
  EXPECT_EQ(m.at("tie_aware_recall_min").at("rule").get<std::string>(), ">= 1");
  EXPECT_FALSE(j["cases"][2].at("reason").get<std::string>().empty());  // the skip reason
  EXPECT_EQ(j.at("summary").at("pass").get<int>(), 1);
  EXPECT_EQ(j.at("summary").at("fail").get<int>(), 1);
  EXPECT_EQ(j.at("summary").at("skipped").get<int>(), 1);
  EXPECT_EQ(j.at("summary").at("error").get<int>(), 1);
}

// The verdict schema: report.json's case objects are case_json()'s (the text the Python package reads), every
// field is present in every case whatever its verdict (null where it does not apply), and metrics keep the
// comparator's order.
TEST(Reports, CaseObjectsAreCaseJsonWithEveryFieldInEveryCase) {
  auto res = sample_results();
  auto ref = make_backend("cpu-ref");
  res.push_back(run_case(parse_case("op=indexer docs=1024 cp=4 rank=3 topk=16 seed=3"),
                         *make_backend("cpu-bug:topleft-cp"), *ref, {}, false, /*explain=*/true));
  ASSERT_TRUE(res.back().explanation);
  const std::string dir = "reports/run 1";
  const auto j = nlohmann::json::parse(report_json(res, {}, dir));
  ASSERT_EQ(j.at("cases").size(), res.size());
  std::vector<std::string> keys, metric_keys, check_keys;
  const auto explained = nlohmann::ordered_json::parse(case_json(res.back(), dir));
  for (const auto& [k, v] : explained.items()) keys.push_back(k);
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& c = j["cases"][i];
    EXPECT_EQ(c, nlohmann::json::parse(case_json(res[i], dir))) << i;
    const auto ordered = nlohmann::ordered_json::parse(case_json(res[i], dir));
    std::vector<std::string> got;
    for (const auto& [k, v] : ordered.items()) got.push_back(k);
    EXPECT_EQ(got, keys) << "case " << i << " (" << c.at("verdict") << ") has other fields";
    std::vector<std::string> names, want;
    for (const auto& [k, v] : ordered.at("metrics").items()) {
      names.push_back(k);
      std::vector<std::string> mk;
      for (const auto& [f, x] : v.items()) mk.push_back(f);
      if (metric_keys.empty()) metric_keys = mk;
      EXPECT_EQ(mk, metric_keys) << k;
    }
    for (const auto& m : res[i].verdict.metrics) want.push_back(m.name);
    EXPECT_EQ(names, want) << "metrics out of the comparator's order in case " << i;
    for (const auto& g : ordered.at("gate_checks")) {
      std::vector<std::string> gk;
      for (const auto& [f, x] : g.items()) gk.push_back(f);
      if (check_keys.empty()) check_keys = gk;
      EXPECT_EQ(gk, check_keys);
    }
    EXPECT_EQ(c.at("report_dir"), dir);
    EXPECT_EQ(c.at("label"), verdict_label(res[i].verdict.kind));
    EXPECT_EQ(c.at("text"), format_result(res[i]));
    EXPECT_EQ(c.at("explanation").is_null(), !res[i].explanation) << i;
  }
  EXPECT_FALSE(metric_keys.empty());
  EXPECT_FALSE(check_keys.empty());
  for (const auto& [name, m] : j["cases"][1]["metrics"].items()) {  // no derived gate: null, not left out
    const Metric* x = res[1].verdict.find(name);
    ASSERT_NE(x, nullptr) << name;
    EXPECT_EQ(m.at("gate").is_null(), x->gate < 0) << name;
    EXPECT_EQ(m.at("gate_ratio").is_null(), x->gate_ratio < 0) << name;
    EXPECT_EQ(m.at("gated").get<bool>(), x->gated()) << name;
  }
  const auto& e = j["cases"].back().at("explanation");
  EXPECT_EQ(e.at("headline"), res.back().explanation->headline());
  EXPECT_EQ(e.at("text"), format_explanation(*res.back().explanation, 3));
  EXPECT_TRUE(nlohmann::json::parse(case_json(res[0])).at("report_dir").is_null());
}

TEST(Reports, JsonEncodesNonFiniteMetricsAsStrings) {
  CaseResult r;
  r.case_line = "op=sdpa docs=8";
  r.backend = r.vs = "cpu-ref";
  r.verdict.kind = Verdict::Fail;
  r.verdict.metrics = {{"lse_max_err", INFINITY, "<= 0.02", true}, {"x", NAN, "", false}};
  const auto j = nlohmann::json::parse(report_json({r}));
  EXPECT_EQ(j["cases"][0]["metrics"]["lse_max_err"]["value"], "inf");
  EXPECT_EQ(j["cases"][0]["metrics"]["x"]["value"], "nan");
}

TEST(Reports, JunitIsWellFormedWithSkippedFailureAndError) {
  if (!have_python3()) GTEST_SKIP() << "python3 with xml.etree not found (scripts/tools/install-deps.sh installs it)";
  const auto res = sample_results();
  const fs::path dir = fresh_dir("junit");
  std::ofstream(dir / "report.xml") << report_junit(res);
  EXPECT_EQ(check_junit_with_python(dir / "report.xml", 4, 1, 1, 1), 0);
  // Markup in reasons and case lines is escaped.
  const std::string x = report_junit(res);
  EXPECT_EQ(x.find("boom <&>"), std::string::npos);
  EXPECT_NE(x.find("boom &lt;&amp;&gt;"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Reports, MarkdownHasSummaryLineAndTable) {
  const auto res = sample_results();
  const std::string md = report_markdown(res);
  EXPECT_NE(md.find("**1 passed, 1 failed, 0 weak, 1 errors, 1 skipped**"), std::string::npos) << md;
  EXPECT_NE(md.find("| verdict | backend | vs | case | failing metrics / reason |"), std::string::npos);
  for (const auto& r : res) EXPECT_NE(md.find("`" + r.case_line + "`"), std::string::npos);
  EXPECT_NE(md.find("### FAIL `cpu-bug:topleft-cp`"), std::string::npos);
  EXPECT_NE(md.find("tie_aware_recall_min"), std::string::npos);
}

TEST(Reports, ReproReportDirWritesAllThree) {
  const fs::path dir = fresh_dir("repro");
  const std::string cmd = fmt::format(
      "'{}' repro op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 --backend cpu-ref --backend cpu-bug:derived-offsets "
      "--report-dir '{}' >/dev/null",
      AO_CLI, (dir / "out").string());
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1);  // the bug model fails
  for (const char* f : {"report.json", "report.md", "report.xml"}) EXPECT_TRUE(fs::exists(dir / "out" / f)) << f;
  const auto j = nlohmann::json::parse(slurp(dir / "out" / "report.json"));
  ASSERT_EQ(j.at("cases").size(), 2u);
  EXPECT_EQ(j["cases"][0]["verdict"], "pass");
  EXPECT_EQ(j["cases"][1]["verdict"], "fail");
  EXPECT_EQ(j["cases"][1]["backend"], "cpu-bug:derived-offsets");
  EXPECT_NE(slurp(dir / "out" / "report.md").find("**1 passed, 1 failed"), std::string::npos);
  if (have_python3()) {
    EXPECT_EQ(check_junit_with_python(dir / "out" / "report.xml", 2, 1, 0, 0), 0);
  }
  fs::remove_all(dir);
}
