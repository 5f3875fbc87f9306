// Comparators: one per op. They compare a backend's outputs with the reference outputs on
// layout.check_rows, recomputing exact (fp64) scores where a judgement needs them, and return
// named metrics, each with its gate rule. Every metric has a bug model that makes it fail.
#pragma once
#include <string>
#include <vector>
#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/compare/tolerance.h"

namespace ao {

struct Metric {
  std::string name;
  double value = 0;
  std::string rule;     // human-readable gate, e.g. "== 0", ">= 1"; empty = informational
  bool failed = false;
  double gate = -1;        // derived bound the value is judged against (-1: none); rule spells it out
  double gate_ratio = -1;  // worst row's error / its gate (-1: none); > 1 fails
};

struct RowNote {        // a worst row, located so that a user can find it
  int64_t row = 0;      // Q row
  int doc = 0, chunk = -1;
  int64_t pos = 0;
  double value = 0;     // e.g. the row's strict overlap or max error
};

struct Verdict {
  enum Kind { Pass, Fail, Skipped, Error } kind = Pass;
  std::string reason;                // skipped / error reason, or the failing metric names
  std::vector<Metric> metrics;
  std::vector<RowNote> worst_rows;
  const Metric* find(const std::string& name) const;
};

const char* verdict_name(Verdict::Kind k);

// Exact fp64 score of (query row, KV buffer row); the oracle's ground truth.
double exact_indexer_score(const Layout& l, const Inputs& in, int64_t row, int64_t key_row);

Verdict compare_indexer(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
Verdict compare_sdpa(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
Verdict compare(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);

// The fixed per-dtype tolerances of the peers, used when a case line overrides atol/rtol (an element
// passes within atol + rtol*|exact|) or lse_tol (absolute); the derived gates (tolerance.h) otherwise.
struct SdpaTolerance { double atol, rtol, lse_tol; };
SdpaTolerance sdpa_tolerance(const Case& c);

}  // namespace ao
