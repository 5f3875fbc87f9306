// Markdown (CI logs, PR comments) and JUnit XML (GitLab/Jenkins/GitHub test views).
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "report.h"

namespace ao {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') o += ' '; else o += ch;
    }
  }
  return o;
}

namespace {
std::string md_escape(const std::string& s) {
  std::string o;
  for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return o;
}
std::string metric_lines(const Verdict& v) {
  std::string s;
  for (const auto& m : v.metrics)
    s += fmt::format("{} = {:.6g} {}{}\n", m.name, m.value, m.rule, m.failed ? "  FAILED" : "");
  return s;
}
}  // namespace

std::string report_markdown(const std::vector<CaseResult>& results) {
  int n[4] = {0, 0, 0, 0};
  for (const auto& r : results) ++n[r.verdict.kind];
  std::string s = fmt::format("## attn-oracle report\n\n**{} passed, {} failed, {} errors, {} skipped** ({} cases, attn-oracle {})\n\n",
                              n[Verdict::Pass], n[Verdict::Fail], n[Verdict::Error], n[Verdict::Skipped],
                              results.size(), tool_version());
  s += "| verdict | backend | vs | case | failing metrics / reason |\n|---|---|---|---|---|\n";
  for (const auto& r : results)
    s += fmt::format("| {} | `{}` | `{}` | `{}` | {} |\n", verdict_name(r.verdict.kind), md_escape(r.backend),
                     md_escape(r.vs), md_escape(r.case_line), md_escape(r.verdict.reason));
  for (const auto& r : results) {
    if (r.verdict.kind != Verdict::Fail) continue;
    s += fmt::format("\n### FAIL `{}` on `{}`\n\n```\n{}```\n", md_escape(r.backend), md_escape(r.case_line),
                     metric_lines(r.verdict));
  }
  return s;
}

std::string report_junit(const std::vector<CaseResult>& results) {
  int n[4] = {0, 0, 0, 0};
  double t = 0;
  for (const auto& r : results) {
    ++n[r.verdict.kind];
    t += r.backend_seconds + r.ref_seconds;
  }
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"attn-oracle\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   results.size(), n[Verdict::Fail], n[Verdict::Error], n[Verdict::Skipped], t);
  s += fmt::format("  <testsuite name=\"attn-oracle\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   results.size(), n[Verdict::Fail], n[Verdict::Error], n[Verdict::Skipped], t);
  for (const auto& r : results) {
    s += fmt::format("    <testcase classname=\"attn-oracle.{}\" name=\"{}\" time=\"{:.3f}\">", xml_escape(r.backend),
                     xml_escape(r.case_line), r.backend_seconds + r.ref_seconds);
    if (r.verdict.kind == Verdict::Fail)
      s += fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(r.verdict.reason),
                       xml_escape(metric_lines(r.verdict)));
    else if (r.verdict.kind == Verdict::Error)
      s += fmt::format("<error message=\"{}\"/>", xml_escape(r.verdict.reason));
    else if (r.verdict.kind == Verdict::Skipped)
      s += fmt::format("<skipped message=\"{}\"/>", xml_escape(r.verdict.reason));
    else
      s += fmt::format("<system-out>{}</system-out>", xml_escape(metric_lines(r.verdict)));
    s += "</testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

void write_report_files(const std::string& dir, const std::vector<CaseResult>& results) {
  std::filesystem::create_directories(dir);
  auto put = [&](const char* name, const std::string& text) {
    std::ofstream f(std::filesystem::path(dir) / name);
    if (!f) throw std::runtime_error(fmt::format("cannot write {}/{}", dir, name));
    f << text;
  };
  put("report.json", report_json(results));
  put("report.md", report_markdown(results));
  put("report.xml", report_junit(results));
  put("report.html", report_html(results));
}

}  // namespace ao
