// Markdown (CI logs, PR comments) and JUnit XML (GitLab/Jenkins/GitHub test views).
#include <csignal>

#include <fmt/format.h>

#include "attn_oracle/report/report.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return fmt::format("signal {}", sig);
  }
}

namespace {
std::string gate_check_lines(const Verdict& v) {
  std::string s;
  for (const auto& g : v.gate_checks) s += gate_check_text(g) + "\n";
  return s;
}

std::string metric_lines(const Verdict& v) {
  std::string s;
  for (const auto& m : v.metrics)
    s += fmt::format("{} = {:.6g} {}{}\n", m.name, m.value, m.rule, m.failed ? "  FAILED" : "");
  return s;
}
}  // namespace

std::string report_markdown(const std::vector<CaseResult>& results, const ReportStatus& status) {
  const VerdictTally n = tally(results);
  std::string s = fmt::format("## attn-oracle report\n\n**{} passed, {} failed, {} weak, {} errors, {} skipped** ({} cases, attn-oracle {})\n\n",
                              n[Verdict::Pass], n[Verdict::Fail], n.weak(), n[Verdict::Error], n[Verdict::Skipped],
                              results.size(), tool_version());
  if (status.signal)
    s += fmt::format("**INTERRUPTED by {}**: only the {} cases below finished; the rest did not run.\n\n",
                     signal_name(status.signal), results.size());
  // Everything from a result is foreign text (a backend's name and stderr, a case line from a file).
  const auto lit = [](const std::string& t) { return markdown_cell(t, MarkdownText::Literal); };
  MarkdownTable table({"verdict", "backend", "vs", "case", "failing metrics / reason"});
  for (const auto& r : results)
    table.row({verdict_name(r.verdict.kind), lit(r.backend), lit(r.vs), lit(r.case_line), lit(r.verdict.reason)});
  s += table.text();
  for (const auto& r : results) {
    if (r.verdict.kind != Verdict::Fail) continue;
    s += fmt::format("\n### FAIL {} on {}\n\n```\n{}```\n", lit(r.backend), lit(r.case_line),
                     metric_lines(r.verdict));
    if (r.explanation) s += fmt::format("\n**explain**: {}\n", lit(r.explanation->headline()));
  }
  for (const auto& r : results) {  // weak: no metric failed, but a gate cannot tell a zero answer from it
    if (r.verdict.kind != Verdict::Weak) continue;
    s += fmt::format("\n### WEAK {} on {}\n\nAn all-zero or NaN answer of an output passes this case's gates:\n\n```\n{}```\n",
                     lit(r.backend), lit(r.case_line), gate_check_lines(r.verdict));
  }
  return s;
}

std::string report_junit(const std::vector<CaseResult>& results, const ReportStatus& status) {
  const VerdictTally n = tally(results);
  double t = 0;
  for (const auto& r : results) t += r.backend_seconds + r.ref_seconds;
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"attn-oracle\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   results.size(), n[Verdict::Fail], n[Verdict::Error], n[Verdict::Skipped], t);
  s += fmt::format("  <testsuite name=\"attn-oracle\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   results.size(), n[Verdict::Fail], n[Verdict::Error], n[Verdict::Skipped], t);
  s += fmt::format("    <properties><property name=\"status\" value=\"{}\"/>{}</properties>\n",
                   status.signal ? "interrupted" : "complete",
                   (status.signal ? fmt::format("<property name=\"signal\" value=\"{}\"/>", signal_name(status.signal))
                                  : std::string()) +
                       fmt::format("<property name=\"weak\" value=\"{}\"/>", n.weak()));
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
    else if (r.verdict.kind == Verdict::Weak)  // JUnit has no such status: neither a failure nor a pass
      s += fmt::format("<properties><property name=\"verdict\" value=\"weak\"/></properties><system-out>WEAK: {}\n{}{}</system-out>",
                       xml_escape(r.verdict.reason), xml_escape(gate_check_lines(r.verdict)),
                       xml_escape(metric_lines(r.verdict)));
    else
      s += fmt::format("<system-out>{}</system-out>", xml_escape(metric_lines(r.verdict)));
    s += "</testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

}  // namespace ao
