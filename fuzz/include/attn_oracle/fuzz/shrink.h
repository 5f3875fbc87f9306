// Shrinker: a deterministic, greedy ddmin-style reduction of a failing case under a run budget.
// Candidates (in order): drop document subsets (halves, quarters, ... single documents), shorten
// documents (halving, respecting CP divisibility of padded lengths), lower cp (rank kept < cp),
// reduce heads/dim/top-k, remove padding/offsets/tail, simplify dtype/poison/mask/other keys to their
// defaults. A candidate is kept only if it is valid (make_layout accepts it, its line round-trips)
// AND the predicate says it still fails; then the candidate list restarts from the new case.
// It stops at a minimum, on its run budget, at its deadline (no run starts after it; one that started
// before it finishes) or on SIGINT/SIGTERM (interrupt.h); every stop keeps the smallest failing case.
#pragma once
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "attn_oracle/pipeline/run_case.h"

namespace ao {

struct ShrinkOptions {
  int max_runs = 300;      // predicate evaluations (backend runs) at most
  LayoutLimits lim;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

enum class ShrinkStop { Minimum, RunBudget, Deadline, Interrupted };

struct ShrinkResult {
  Case minimal;            // the smallest case the predicate accepted (the input when none was)
  int steps = 0;           // accepted reductions
  int runs = 0;            // predicate evaluations
  bool budget_exhausted = false;  // == (stop == ShrinkStop::RunBudget)
  ShrinkStop stop = ShrinkStop::Minimum;
};

// "" for a minimum, else ", run budget exhausted" / ", stopped at the deadline" / ", interrupted".
const char* shrink_stop_note(ShrinkStop s);

using StillFails = std::function<bool(const Case&)>;

// Candidate reductions of c, most aggressive first (deterministic; may contain invalid cases).
std::vector<Case> shrink_candidates(const Case& c, const LayoutLimits& lim = {});
// Valid: make_layout accepts it and parse_case(print_case(c)) == c.
bool shrinkable_valid(const Case& c, const LayoutLimits& lim);

ShrinkResult shrink_case(const Case& failing, const StillFails& still_fails, const ShrinkOptions& opt = {});

// The usual predicate: the same backend (vs the same reference) still fails (verdict fail sharing at
// least one failing metric with `original`, or error when the original was an error). A run during
// which a stop was requested (interrupt.h) does not count as failing. With `last_failing`, the
// result of the latest run that returned true is stored there (the minimal case's result).
StillFails fails_like(const CaseResult& original, Backend& backend, Backend& vs, const LayoutLimits& lim,
                      CaseResult* last_failing = nullptr);

}  // namespace ao
