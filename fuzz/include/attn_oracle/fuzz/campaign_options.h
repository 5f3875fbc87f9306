// What a fuzz campaign (campaign.h) is asked to do: the backend and its reference, the seed and shard,
// the budget, the output directory, the generator's options and the shrink and confirmation runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/layout/layout.h"

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
  // The backend to run when it is not a registry spec (the Python package's callables, python/): then
  // `backend` only names it in the summary, the found files and the failure signatures.
  std::shared_ptr<Backend> backend_object;
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

}  // namespace ao
