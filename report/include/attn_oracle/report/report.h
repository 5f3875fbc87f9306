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
inline constexpr int kReportSchemaVersion = 4;

// How the run that produced the results ended: complete, or stopped after the cases listed by a signal
// (SIGINT/SIGTERM/SIGHUP) or by its stdout closing (SIGPIPE) (report.json: "status": "complete" |
// "interrupted", "signal": "SIGINT").
struct ReportStatus {
  int signal = 0;  // 0: every case ran
};
std::string signal_name(int sig);

std::string report_json(const std::vector<CaseResult>& results, const ReportStatus& status = {});
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
