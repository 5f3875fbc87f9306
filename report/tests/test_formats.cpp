// Each report is parsed back with a real parser (check_reports.py: json, xml.etree/expat for report.xml and
// report.html, a GFM table check for report.md) over foreign text that XML 1.0 forbids (U+FFFE, U+FFFF,
// other non-characters, C0/C1 controls), that is not UTF-8 (lone surrogates as raw bytes) or that is
// Markdown or XML markup (`\n# x`, `|`, `<!--`, `]]>`, backticks); the text must come out as written, each
// format's escaping undone by its parser.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/internal/utf8.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/report/escape.h"
#include "attn_oracle/report/report.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
namespace fs = std::filesystem;

namespace {

bool have_python3() { return std::system("python3 -c 'import xml.etree.ElementTree' >/dev/null 2>&1") == 0; }

std::string checker() { return std::string(AO_SOURCE_DIR) + "/report/tests/check_reports.py"; }

// Foreign texts, each as a backend's reason (and, rotated, as its name, reference and case line).
const std::vector<std::string> kHostile = {
    "U+FFFE \xEF\xBF\xBE and U+FFFF \xEF\xBF\xBF in stderr",
    "non-characters U+FDD0 \xEF\xB7\x90 U+1FFFE \xF0\x9F\xBF\xBE U+10FFFF \xF4\x8F\xBF\xBF",
    "C0 \x01\x02\x07\x08\x0b\x0c\x1b[31mred\x1b[0m DEL \x7f C1 \xC2\x85\xC2\x9b tab\there",
    "lone surrogates \xED\xA0\x80 and \xED\xBF\xBF, stray \xFF",
    "Traceback (most recent call last):\n# x\n## y\r\nline\rend",
    "a | b \\| c || d \\",
    "<!-- hides the rest --> <script>alert(1)</script> &amp; &#124; @user #12 $x$",
    "]]> <![CDATA[ x ]]> \"quoted\" 'single'",
    "`code` `` two `` ``` three ``` ends with `",
    " padded with spaces ",
    "*em* _u_ [link](http://example.com) ![img](x) ~~s~~ \\* \\",
};

CaseResult hostile_result(size_t i) {
  CaseResult r;
  const auto& t = kHostile;
  r.case_line = "op=sdpa docs=16 " + t[(i + 1) % t.size()];
  r.backend = "exec:" + t[(i + 2) % t.size()];
  r.vs = t[(i + 3) % t.size()];
  r.backend_version = t[(i + 4) % t.size()];
  r.verdict.reason = t[i];
  const Verdict::Kind kinds[] = {Verdict::Error, Verdict::Fail, Verdict::Skipped, Verdict::Pass};
  r.verdict.kind = kinds[i % 4];
  if (r.verdict.kind == Verdict::Fail || r.verdict.kind == Verdict::Pass)
    r.verdict.metrics = {{"o_max_rel_err", 0.5, "<= 0.01", r.verdict.kind == Verdict::Fail}};
  return r;
}

// What each report must show for result r: its texts as valid UTF-8 (invalid sequences become U+FFFD).
nlohmann::json expectation(const std::vector<CaseResult>& res) {
  nlohmann::json e = nlohmann::json::array();
  for (const auto& r : res)
    e.push_back({{"backend", sanitize_utf8(r.backend)},
                 {"vs", sanitize_utf8(r.vs)},
                 {"case", sanitize_utf8(r.case_line)},
                 {"reason", sanitize_utf8(r.verdict.reason)}});
  return e;
}

int check(const fs::path& dir, const std::string& args) {
  return std::system(fmt::format("python3 '{}' '{}' {}", checker(), dir.string(), args).c_str());
}

}  // namespace

TEST(ReportFormats, EveryReportParsesAndShowsHostileTextAsWritten) {
  if (!have_python3()) GTEST_SKIP() << "python3 with xml.etree not found (scripts/tools/install-deps.sh installs it)";
  std::vector<CaseResult> res;
  for (size_t i = 0; i < kHostile.size(); ++i) res.push_back(hostile_result(i));
  const fs::path dir = fresh_dir("hostile");
  ASSERT_NO_THROW(write_report_files((dir / "rep").string(), res));
  std::ofstream(dir / "expect.json") << expectation(res).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  EXPECT_EQ(check(dir / "rep", "--expect '" + (dir / "expect.json").string() + "'"), 0);
  fs::remove_all(dir);
}

// The checker itself: it rejects what the writers used to produce (a raw `|`, a raw line break, U+FFFE).
TEST(ReportFormats, CheckerRejectsBrokenReports) {
  if (!have_python3()) GTEST_SKIP() << "python3 not found";
  std::vector<CaseResult> res{hostile_result(3)};
  res[0].verdict.reason = "plain";
  const fs::path dir = fresh_dir("checker");
  write_report_files((dir / "rep").string(), res);
  ASSERT_EQ(check(dir / "rep", "--cases 1"), 0);
  const fs::path md = dir / "rep" / "report.md", xml = dir / "rep" / "report.xml";
  const std::string good_md = [&] {
    std::ifstream f(md);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  for (const char* bad : {"a | b", "a\n# b", "<!-- c"}) {
    std::string t = good_md;
    t.replace(t.find("`plain`"), 7, bad);  // what the writer pasted before: the raw text
    std::ofstream(md) << t;
    EXPECT_NE(check(dir / "rep", "--cases 1 2>/dev/null"), 0) << bad;
  }
  std::ofstream(md) << good_md;
  std::ofstream(xml, std::ios::app) << "<!-- \xEF\xBF\xBE -->";
  EXPECT_NE(check(dir / "rep", "--cases 1 2>/dev/null"), 0);
  fs::remove_all(dir);
}

TEST(ReportFormats, MarkdownCellKeepsOneRowAndShowsLiteralTextInACodeSpan) {
  EXPECT_EQ(markdown_cell("a | b", MarkdownText::Authored), "a \\| b");
  EXPECT_EQ(markdown_cell("x\n# y", MarkdownText::Authored), "x # y");
  EXPECT_EQ(markdown_cell("`k` <= 3", MarkdownText::Authored), "`k` <= 3");  // the doc's own markup stays
  EXPECT_EQ(markdown_cell("", MarkdownText::Literal), "");
  EXPECT_EQ(markdown_cell("a|b", MarkdownText::Literal), "`a\\|b`");
  EXPECT_EQ(markdown_cell("x ``y` z", MarkdownText::Literal), "```x ``y` z```");
  EXPECT_EQ(markdown_cell("`x", MarkdownText::Literal), "`` `x ``");
  EXPECT_EQ(markdown_cell(" x ", MarkdownText::Literal), "`  x  `");
  EXPECT_EQ(markdown_cell("<!--\r\n", MarkdownText::Literal), "`<!--  `");
}

TEST(ReportFormats, MarkdownTableHasOneShapeAndKeepsItsColumns) {
  MarkdownTable t({"a", "b"});
  EXPECT_EQ(t.text(), "| a | b |\n| --- | --- |\n");
  t.row({"`x`", ""}).row({markdown_cell("1|2", MarkdownText::Authored), "y"});
  EXPECT_EQ(t.text(), "| a | b |\n| --- | --- |\n| `x` |  |\n| 1\\|2 | y |\n");
  EXPECT_THROW(t.row({"one"}), std::logic_error);
  EXPECT_THROW(t.row({"1", "2", "3"}), std::logic_error);
}

TEST(ReportFormats, XmlEscapeDropsWhatXmlForbids) {
  EXPECT_EQ(xml_escape("a\xEF\xBF\xBE" "b\xEF\xBF\xBF"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\x01\x7f\xC2\x85\r"), "    ");
  EXPECT_EQ(xml_escape("<&>\"'\n\t"), "&lt;&amp;&gt;&quot;&apos;\n\t");
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xF0\x9F\x98\x80 \xEF\xBF\xBD"), "\xF0\x9F\x98\x80 \xEF\xBF\xBD");  // valid text stays
}

// End to end: an exec: backend whose stderr holds U+FFFE, a line that would start a heading and an HTML
// comment; every report the gate writes parses (before: report.xml and report.html were not well-formed,
// report.md's row broke at the line break).
TEST(ReportFormats, GateWithHostileStderrWritesWellFormedReports) {
  if (!have_python3()) GTEST_SKIP() << "python3 not found";
  const fs::path dir = fresh_dir("cli");
  std::ofstream(dir / "bad.sh") << "printf 'bad \\357\\277\\276 \\357\\277\\277\\n# heading\\n<!-- hidden | x' >&2\n"
                                   "exit 3\n";
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\nop=indexer docs=32\n";
  const auto r = test::run_cli(fmt::format("gate {} --backend 'exec:/bin/sh {}' --report-dir {}",
                                           (dir / "a.case").string(), (dir / "bad.sh").string(),
                                           (dir / "rep").string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(check(dir / "rep", "--cases 2 --status complete"), 0);
  fs::remove_all(dir);
}
