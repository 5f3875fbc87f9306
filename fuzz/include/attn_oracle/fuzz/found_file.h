// Found files: what `fuzz --out DIR` keeps of each unique failure, one `<hash of its line>.case` per
// failure signature. Written through CaseFileWriter (case_file.h), so foreign text (backend specs,
// failure reasons) is escaped onto one comment line each:
//   # found by attn-oracle fuzz (shrunk regression)
//   # backend: <portable spec>   vs: <portable spec>       (normalize_backend_spec, SpecForm::Portable)
//   # campaign: --seed S --shard i/n --dims D, case #K
//   # original: <generated line>
//   # original failing: ...      # original reproduced: reproduced F of R runs[ (NONDETERMINISTIC)]
//   # shrunk: in N steps (...)   # shrunk reproduced: ...   (or `# not shrunk: ...` for a flaky failure)
//   # nondeterministic: ...      (only when a run of the original or the shrunk case passed)
//   # signature: <failure_signature>
//   # choices: dims=.. op=.. n n ...   (when the case still replays from its choice sequence)
//   <the shrunk case line>
// A found file is read back by the gate like any case file (read_case_files); read_found_file adds its
// header comments. Saved atomically (internal/atomic_file.h).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "attn_oracle/fuzz/campaign_options.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/shrink.h"
#include "attn_oracle/pipeline/run_case.h"

namespace ao {

struct FoundCase {
  uint64_t index = 0;          // case number in the campaign
  Case original, shrunk;
  std::string file, signature;
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

// File name of a shrunk case: 16 hex digits of a 64-bit FNV-1a hash of the canonical line.
std::string case_hash(const std::string& line);
// "<dir>/<case_hash(print_case(c))>.case".
std::string found_file_path(const std::string& dir, const Case& c);
// "reproduced F of R runs", with " (NONDETERMINISTIC)" when F < R.
std::string repro_note(int fails, int runs);

// The text of a found file (the format above).
std::string found_file_text(const CampaignOptions& opt, const FoundCase& f);

// A found file read back.
struct FoundFile {
  Case c;                                  // its (first) case line
  std::optional<RecordedChoices> choices;  // the `# choices:` line before it
  // `# <tag>: <text>` comment lines among its first 64 lines, the first of each tag, text as the line
  // holds it (escaped: unescape_comment_text gives the written text back). Not `catches`/`choices`.
  std::map<std::string, std::string> comments;
  std::string signature() const;           // comments["signature"], or empty
  bool nondeterministic() const { return comments.count("nondeterministic") > 0; }
};
// nullopt unless valid_found_file(path, lim).
std::optional<FoundFile> read_found_file(const std::string& path, const LayoutLimits& lim = {});
// A found-case file that counts as known: a regular, non-empty file whose case lines all parse and
// validate (at least one). Empty or unparsable files do not count (the campaign rewrites them).
bool valid_found_file(const std::string& path, const LayoutLimits& lim = {});
// Signatures (as their `# signature:` lines hold them, escaped) of the valid found files in `dir`
// (not recursive) -> the first such file in sorted order.
std::map<std::string, std::string> found_signatures(const std::string& dir, const LayoutLimits& lim = {});

}  // namespace ao
