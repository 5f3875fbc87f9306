// A fuzz campaign: generated cases (generator.h) run against a backend vs a reference; each failure
// is shrunk through its choice sequence (choice_shrink.h) and deduplicated by its failure signature (failure_signature below): one
// smallest case per signature is written, atomically, as <hash of its line>.case into the output
// directory, the others are counted as merged into it. Deterministic for a (seed, shard, budget in
// cases). A time budget B is a bound: no case or shrink run starts after B, so the campaign ends
// within B plus one run (one case or one shrink candidate against backend and reference: the
// summary's longest_run_seconds) plus saving.
// SIGINT/SIGTERM (interrupt.h) stop it the same way; the case in flight is dropped, not counted.
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
#include <optional>
#include <string>
#include <vector>

#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/fuzz/shrink.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

struct Budget {
  double seconds = 0;   // > 0: stop after this wall time
  uint64_t cases = 0;   // > 0: stop after this many cases
};
// "60s", "5m", "1h" (time) or "N" (cases). Throws BadInput("budget", ...).
Budget parse_budget(const std::string& s);
// "i/n" with 0 <= i < n. Throws BadInput("shard", ...).
std::pair<int, int> parse_shard(const std::string& s);

struct CampaignOptions {
  std::string backend, vs = "cpu-ref";
  uint64_t seed = 1;
  Budget budget{60, 0};
  int shard = 0, shards = 1;   // this shard runs case numbers shard, shard+shards, ...
  std::string out_dir;         // empty: write nothing
  GenOptions gen;
  int shrink_runs = 300;
  int max_failures = 0;        // stop after this many failing cases (0: run the whole budget)
  LayoutLimits lim;
  bool progress = false;       // a \r progress line on stderr
  int confirm_runs = 3;        // re-runs of each failure (and of its shrunk case) before it is kept
};

struct FoundCase {
  uint64_t index = 0;          // case number in the campaign
  std::string original, shrunk, file, signature;
  std::optional<Choices> choices;  // the shrunk case's choice sequence (written as `# choices:`)
  CaseResult original_result, shrunk_result;
  int steps = 0, runs = 0;
  ShrinkStop shrink_stop = ShrinkStop::Minimum;  // why the shrinker stopped
  bool already_known = false;  // a valid file with this line or this signature existed before the campaign
  bool resaved = false;        // the file at this name existed but was empty or unparsable: rewritten
  uint64_t merged = 0;         // other failures of this campaign with the same signature
  int repro_runs = 1, repro_fails = 1;           // the original case: runs, and runs failing like the first
  int shrunk_repro_runs = 0, shrunk_repro_fails = 0;  // the same for the shrunk case (0 runs: not shrunk)
  bool nondeterministic() const { return repro_fails < repro_runs || shrunk_repro_fails < shrunk_repro_runs; }
  std::string save_error;      // non-empty: the case could not be written (why); `file` is empty
};

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
  uint64_t unsaved = 0;                   // unique cases that could not be saved
};

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err);
std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s);
// 1 if anything failed (or the generator produced an invalid case), 125 if nothing ran, else 0.
int campaign_exit_code(const CampaignSummary& s);

// File name of a shrunk case: 16 hex digits of a 64-bit FNV-1a hash of the canonical line.
std::string case_hash(const std::string& line);
// Two failures are "the same" when their signatures are equal: the backend under test (its portable
// spelling, normalize_backend_spec: a temp socket or the checkout folder does not make a new one); the shrunk
// case's verdict (FAIL with the sorted names, not values, of its failing metrics, or ERROR); and the
// shrunk case's structure: op, mask, sliding window or not, cp > 1 or not, number of documents
// (1, 2 or 3+), padding present or not (gaps, offsets, tail, capacity, CP chunk padding), dtype
// class (f32 or 16-bit). Written into each found file as `# signature: ...`.
std::string failure_signature(const std::string& backend, const Case& minimal, const Verdict& v);
// Size order among cases of one signature: valid tokens (q + kv), then documents, then line length.
bool smaller_case(const Case& a, const Case& b);
// Writes `text` to `path` through a temporary file in the same directory (fsync, rename, fsync of
// the directory): a crash leaves the old file or the new one, never a partial one.
void write_file_atomically(const std::string& path, const std::string& text);
// A found-case file that counts as known: a regular, non-empty file whose case lines all parse and
// validate (at least one). Empty or unparsable files do not count (the campaign rewrites them).
bool valid_found_file(const std::string& path, const LayoutLimits& lim = {});
// Text of a found-case file (CaseFileWriter): comment lines (original line, backend in its portable
// spelling, failing metrics, reproduction counts, the choice sequence as `# choices:`), then the line.
std::string found_case_text(const CampaignOptions& opt, const FoundCase& f);

}  // namespace ao
