// One case through the pipeline (a Trial, trial.h): case -> Layout -> Inputs -> backend run ->
// reference run -> judgement -> result. A backend or reference that wrote its inputs is an ERROR (the
// reference never runs on written inputs); the reference's outputs must pass reference_sanity()
// before they judge anything (else ERROR naming the reference); foreign text is made valid UTF-8.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "attn_oracle/backends/backend.h"
#include "attn_oracle/compare/compare.h"
#include "attn_oracle/pipeline/explain.h"
#include "attn_oracle/pipeline/trial.h"

namespace ao {

struct CaseResult {
  std::string case_line, backend, vs, backend_version;
  Verdict verdict;
  double backend_seconds = 0, ref_seconds = 0;
  // The rest of the check's wall time: making the layout and inputs (run_case only), the input checks
  // and sentinel outputs around each run, and the judgement (the comparator with its exact answer).
  double inputs_seconds = 0, run_setup_seconds = 0, judge_seconds = 0;
  // Of judge_seconds (or before it, where the campaign checked the case before its run): the
  // discrimination check (discrimination.h), its judge() passes against the prepared gates.
  double gate_check_seconds = 0;
  // False where the reference was not run: the built-in cpu-ref against a comparator that does not read it
  // (SDPA: the judgement recomputes the exact answer), unless a failing case's explanation or report
  // pictures needed its outputs.
  bool reference_ran = false;
  std::shared_ptr<const CaseArtifacts> artifacts;  // null unless run_case(..., keep_artifacts) failed
  std::shared_ptr<const Explanation> explanation;  // null unless run_case(..., explain) failed (explain.h)
  // The trial's layout without its per-row vectors (row_segment, check_rows), kept for a FAIL or ERROR
  // verdict: what describes the failing case's structure (fuzz's failure signatures) without a second
  // make_layout. Null for a pass or skip.
  std::shared_ptr<const Layout> layout;
};

// Throws CaseError for an invalid case (the caller maps it to exit code 2).
// keep_artifacts: on a Fail verdict, keep layout + outputs in CaseResult::artifacts (for report.html).
// explain: on a Fail verdict, run every bug model on the case and keep the explanation (explain.h).
CaseResult run_case(const Case& c, Backend& backend, Backend& vs, const LayoutLimits& lim = {},
                    bool keep_artifacts = false, bool explain = false);
// The same on a trial made earlier (the Python package's Case hands its inputs out before the run; the
// trial's input check then covers what the caller did with them). Runs again on the trial's inputs.
CaseResult run_trial(Trial& t, Backend& backend, Backend& vs, bool keep_artifacts = false, bool explain = false);

// git-bisect-compatible: 0 all passed, 1 any failed/errored, 125 nothing ran (all skipped).
int exit_code(const std::vector<CaseResult>& results);

// Why a judged case ran no reference (reference_ran false); empty where it ran or nothing was judged.
std::string reference_not_run_note(const CaseResult& r);

// Text for a terminal: verdict line, metric table, worst rows, the explanation when there is one.
std::string format_result(const CaseResult& r);

}  // namespace ao
