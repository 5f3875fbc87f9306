// `git bisect run` step: the cases run in a supervised child (subprocess.h) so that a crash, an abort
// or a hang in the backend (e.g. a plugin library at some commit) becomes a deliberate exit code
// instead of a signal death (which would abort the bisect), and nothing it started outlives the step.
// Codes: 0 good, 1 bad, 125 skip, 128 abort (bad input, or the step itself was interrupted).
#pragma once
#include <string>
#include <vector>

#include "attn_oracle/pipeline/run_case.h"

namespace ao {

struct BisectOptions {
  std::string backend, vs = "cpu-ref";
  double timeout_seconds = 600;  // a hang counts as bad
  bool crash_is_skip = false;    // map a crash to 125 (skip) instead of 1 (bad)
  LayoutLimits lim;
};

struct BisectOutcome {
  int code = 125;
  std::string line;  // "good: ...", "bad: ...", "skip: ...", "abort: ..."
};

inline constexpr int kBisectGood = 0, kBisectBad = 1, kBisectSkip = 125, kBisectAbort = 128;

BisectOutcome bisect_step(const std::vector<Case>& cases, const BisectOptions& opt);

}  // namespace ao
