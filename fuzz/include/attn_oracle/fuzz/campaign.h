// A fuzz campaign: generated cases (generator.h; a drawn case whose gates cannot reject an all-zero or NaN
// answer is drawn again: generate_discriminating) run against a backend vs a reference; each failure
// is shrunk (shrink_failure.h) and deduplicated by its failure signature (failure_signature.h): one
// smallest case per signature is saved, atomically, as a found file (found_file.h) into the output
// directory, the others are counted as merged into it. Deterministic for a (seed, shard, budget in
// cases). A time budget B is a bound: no case or shrink run starts after B, so the campaign ends
// within B plus one run (one case or one shrink candidate against backend and reference: the
// summary's longest_run_seconds) plus saving.
// SIGINT/SIGTERM (interrupt.h) stop it the same way; the case in flight is dropped, not counted,
// except a confirmed failure being shrunk: it is kept and saved as shrunk so far (as at the deadline).
// A failure is re-run (confirm_runs times) before it is kept: one that does not fail like itself every
// time is nondeterministic; it is kept unshrunk (the shrinker would chase noise) and marked so in its
// file and the summary, with its reproduction rate. A shrunk case is re-run the same way and marked
// when it is nondeterministic.
// Re-runs are runs: none starts after the time budget (a case found near it is confirmed fewer times).
// Saving: shards sharing an output directory check and write under one lock (flock on it), and a
// file reported at the end is checked to exist then. A case that cannot be saved (disk full, directory
// made read-only) is printed on the error stream at once with its line; the campaign goes on and the
// summary lists it as NOT SAVED.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "attn_oracle/fuzz/campaign_options.h"
#include "attn_oracle/fuzz/failure_signature.h"
#include "attn_oracle/fuzz/found_file.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

struct CampaignSummary {
  uint64_t cases = 0, invalid = 0;
  VerdictTally verdicts;                  // of the cases that ran (invalid ones did not)
  std::vector<FoundCase> unique;          // one per failure signature (the smallest case of it)
  std::vector<uint64_t> failing_indices;  // case numbers of every failing case, in order
  int interrupted = 0;                    // the signal that stopped the campaign, 0 if none
  std::vector<std::string> invalid_lines; // generator bugs (should never happen)
  double seconds = 0, shrink_seconds = 0;
  double longest_run_seconds = 0;         // the longest single run (a case or a shrink candidate)
  int64_t first_failure_case = -1;        // cases generated up to and including the first failure
  double first_failure_seconds = -1;      // wall time until the first failure was seen (before shrinking)
  uint64_t nondeterministic = 0;          // unique cases marked nondeterministic
  // Drawn cases replaced because a gate of theirs could not reject an all-zero or NaN answer (judged
  // from the exact answer before the backend ran; generate_discriminating): the campaign prefers cases
  // whose every gate discriminates. Weak cases that ran anyway are verdicts.weak().
  uint64_t weak_redrawn = 0;
  uint64_t unsaved = 0;                   // unique cases that could not be saved
  // Where and why the backend (or --vs) stopped being available mid-campaign (an in-process GPU library
  // whose CUDA context was lost); empty if it did not. The campaign ends there.
  std::string backend_lost;
};

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err);
std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s);

// A found file made by a campaign elsewhere (on another host: the Python package's Ray campaigns return
// found_file_text() to their driver, no shared folder) saved into `dir` as a campaign saves its own, under
// the directory's lock: a valid file of its signature (or of its line) already there stands for it and is
// named instead (already_known). Throws BadInput("found file", ...) unless the text is a valid found
// file with a `# signature:` line.
struct SavedFound {
  std::string file;
  bool already_known = false;
};
SavedFound save_found_text(const std::string& dir, const std::string& text, const LayoutLimits& lim = {});
// 1 if anything failed (or the generator produced an invalid case), 125 if nothing ran, else 0.
int campaign_exit_code(const CampaignSummary& s);

}  // namespace ao
