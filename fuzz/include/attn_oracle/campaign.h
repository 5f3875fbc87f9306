// A fuzz campaign: generated cases (generator.h) run against a backend vs a reference; each new
// failure is shrunk (shrink.h) and, deduplicated by its shrunk line, written as <hash>.case into the
// output directory. Deterministic for a (seed, shard, budget in cases); a time budget stops early.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "attn_oracle/generator.h"
#include "attn_oracle/harness.h"

namespace ao {

struct Budget {
  double seconds = 0;   // > 0: stop after this wall time
  uint64_t cases = 0;   // > 0: stop after this many cases
};
// "60s", "5m", "1h" (time) or "N" (cases). Throws CaseError("budget", ...).
Budget parse_budget(const std::string& s);
// "i/n" with 0 <= i < n. Throws CaseError("shard", ...).
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
};

struct FoundCase {
  uint64_t index = 0;          // case number in the campaign
  std::string original, shrunk, file;
  CaseResult original_result, shrunk_result;
  int steps = 0, runs = 0;
  bool shrink_budget_exhausted = false;  // the shrinker stopped on its run budget, not at a minimum
  bool already_known = false;  // the file existed before this campaign
};

struct CampaignSummary {
  uint64_t cases = 0, passed = 0, failed = 0, skipped = 0, invalid = 0;
  std::vector<FoundCase> unique;          // one per distinct shrunk line
  std::vector<std::string> invalid_lines; // generator bugs (should never happen)
  double seconds = 0, shrink_seconds = 0;
  int64_t first_failure_case = -1;        // cases generated up to and including the first failure
  double first_failure_seconds = -1;      // wall time until the first failure was seen (before shrinking)
};

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err);
std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s);
// 1 if anything failed (or the generator produced an invalid case), 125 if nothing ran, else 0.
int campaign_exit_code(const CampaignSummary& s);

// File name of a shrunk case: 16 hex digits of a 64-bit FNV-1a hash of the canonical line.
std::string case_hash(const std::string& line);
// Text of a found-case file: comment lines (original line, backend, failing metrics), then the line.
std::string found_case_text(const CampaignOptions& opt, const FoundCase& f);
// "name=value (rule)" for each failing metric.
std::string failing_summary(const Verdict& v);

}  // namespace ao
