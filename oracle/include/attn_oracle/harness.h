// The one-way pipeline: case -> Layout -> Inputs -> backend run -> reference run -> compare -> result.
#pragma once
#include <string>
#include <vector>
#include "attn_oracle/backend.h"
#include "attn_oracle/compare.h"

namespace ao {

struct CaseResult {
  std::string case_line, backend, vs, backend_version;
  Verdict verdict;
  double backend_seconds = 0, ref_seconds = 0;
};

// Throws CaseError for an invalid case (the caller maps it to exit code 2).
CaseResult run_case(const Case& c, Backend& backend, Backend& vs, const LayoutLimits& lim = {});

// git-bisect-compatible: 0 all passed, 1 any failed/errored, 125 nothing ran (all skipped).
int exit_code(const std::vector<CaseResult>& results);

// Text for a terminal: verdict line, metric table, worst rows.
std::string format_result(const CaseResult& r);

}  // namespace ao
