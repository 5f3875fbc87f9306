// Report writers: JSON (versioned schema, one object per case), Markdown summary, JUnit XML.
#pragma once
#include <string>
#include <vector>
#include "attn_oracle/harness.h"

namespace ao {

inline constexpr int kReportSchemaVersion = 1;

std::string report_json(const std::vector<CaseResult>& results);
std::string report_markdown(const std::vector<CaseResult>& results);
std::string report_junit(const std::vector<CaseResult>& results);
// Writes report.json, report.md and report.xml into dir (created if missing).
void write_report_files(const std::string& dir, const std::vector<CaseResult>& results);

// Version string of this build (git describe at configure time).
const char* tool_version();

}  // namespace ao
