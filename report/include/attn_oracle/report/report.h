// Report writers: JSON (versioned schema, one object per case), Markdown summary, JUnit XML, HTML pictures.
#pragma once
#include <string>
#include <vector>
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/report/escape.h"

namespace ao {

// 2: the indexer's clobbered_pad_rows metric is named clobbered_pad_slots, as the SDPA one (one name per
// concept); nothing else changed from 1.
// 3: a failing case that was explained has an "explanation" object (explain.h); nothing else changed.
// 4: each case has "gate_checks" (the discrimination check of each judged output: an all-zero and a NaN
// answer against the case's gates), a case's verdict may be "weak" (no metric failed, but a gate cannot
// reject a zero or NaN answer), and the summary counts "weak"; nothing else changed.
// 5: one verdict schema: a case object is what case_json() writes, the same object the Python package's
// Verdict reads (docs/report-schema.md lists every field). Added: "label", "failing_summary", "text" (the
// terminal text), "report_dir", a metric's "gated", a gate check's "text", the explanation's "text". Every
// field is always present, null where it does not apply (before: a metric's "gate"/"gate_ratio", a gate
// check's "zero_ratio"/"moved_ratio"/"moved_fails"/"zero_failed" and "explanation" were left out); metrics
// keep the comparator's order. No field was renamed.
inline constexpr int kReportSchemaVersion = 5;

// How the run that produced the results ended: complete, or stopped after the cases listed by a signal
// (SIGINT/SIGTERM/SIGHUP) or by its stdout closing (SIGPIPE) (report.json: "status": "complete" |
// "interrupted", "signal": "SIGINT").
struct ReportStatus {
  int signal = 0;  // 0: every case ran
};
std::string signal_name(int sig);

// The one spelling of a case's verdict as JSON (the verdict schema): one object with the case line, backend,
// verdict, metrics (by name, in the comparator's order), worst rows, gate checks, explanation, seconds and
// the report directory (empty: null). report.json's "cases" are these objects, and the Python package's
// judge/run/gate return this text (attn_oracle.Verdict reads it). indent < 0: one line.
std::string case_json(const CaseResult& r, const std::string& report_dir = {}, int indent = -1);
// report_dir: where the report is written (each case object's "report_dir"; empty: null).
std::string report_json(const std::vector<CaseResult>& results, const ReportStatus& status = {},
                        const std::string& report_dir = {});
std::string report_markdown(const std::vector<CaseResult>& results, const ReportStatus& status = {});
std::string report_junit(const std::vector<CaseResult>& results, const ReportStatus& status = {});
// Self-contained HTML page with pictures of each failing case that kept its artifacts (html.cpp).
std::string report_html(const std::vector<CaseResult>& results);
// Writes report.json, report.md, report.xml and report.html into dir (created if missing) through a
// ReportDir (dir.h): locked, written into a temporary dir, then renamed into place.
void write_report_files(const std::string& dir, const std::vector<CaseResult>& results,
                        const ReportStatus& status = {});

// Version string of this build (git describe at configure time).
const char* tool_version();

}  // namespace ao
