// Verdicts: the last stage of the pipeline. A comparator (compare/) measures named metrics, each with
// its gate; this stage turns them into the verdict (pass/fail + reason), labels it, counts verdicts
// over many cases, and says which metrics failed. Every caller (CLI, reports, fuzz, GPU tools) uses
// these functions, so a verdict reads the same everywhere.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ao {

struct Metric {
  std::string name;
  double value = 0;
  std::string rule;     // human-readable gate, e.g. "== 0", ">= 1"; empty = informational
  bool failed = false;
  double gate = -1;        // derived bound the value is judged against (-1: none); rule spells it out
  double gate_ratio = -1;  // worst row's error / its gate (-1: none); > 1 fails
  bool headline = false;   // shown in one-line summaries (cp-run's rank lines, GPU campaign segments)

  bool gated() const { return !rule.empty(); }
};

enum class Headline { No, Yes };
// A metric that is reported and never fails.
inline Metric info_metric(std::string name, double value, Headline h = Headline::No) {
  return {std::move(name), value, "", false, -1, -1, h == Headline::Yes};
}
// A metric with its gate: `rule` says it ("" makes it informational), `failed` is the comparator's judgement.
inline Metric gated_metric(std::string name, double value, std::string rule, bool failed, Headline h = Headline::No,
                           double gate = -1, double gate_ratio = -1) {
  return {std::move(name), value, std::move(rule), failed, gate, gate_ratio, h == Headline::Yes};
}

struct RowNote {        // a worst row, located so that a user can find it
  int64_t row = 0;      // Q row
  int doc = 0, chunk = -1;
  int64_t pos = 0;
  double value = 0;     // e.g. the row's strict overlap or max error
};

// How a comparator judged each (buffer row, head) of one output tensor: the backward comparators'
// gradients, for report.html's error maps (the forward's maps draw O/LSE from the outputs themselves).
// ratio: the cell's error over its gate (> 1 fails; inf: an error where the gate is 0).
struct CellMap {
  enum State : uint8_t { NotJudged, Pad, Judged, Clobbered, Unwritten, NonFinite };  // worse later
  std::string name;           // "dq", "dk", "dv", "dw"
  bool kv_rows = false;       // rows are K/V buffer rows, else Q buffer rows
  int64_t rows = 0;
  int heads = 1;
  std::vector<uint8_t> state;  // [rows][heads]
  std::vector<float> ratio;    // [rows][heads], where Judged
  CellMap(std::string n, bool kv, int64_t r, int h)
      : name(std::move(n)), kv_rows(kv), rows(r), heads(h), state(size_t(r) * size_t(h), NotJudged),
        ratio(state.size(), 0.f) {}
  // A row outside the judged ones: Pad, or Clobbered when `written`.
  void pad_row(int64_t r, bool written) {
    for (int h = 0; h < heads; ++h) state[size_t(r) * size_t(heads) + size_t(h)] = written ? Clobbered : Pad;
  }
  void judged(int64_t r, int h, State st, double err_over_gate) {
    state[size_t(r) * size_t(heads) + size_t(h)] = st;
    ratio[size_t(r) * size_t(heads) + size_t(h)] = float(err_over_gate);
  }
};

struct Verdict {
  enum Kind { Pass, Fail, Skipped, Error } kind = Pass;
  std::string reason;                // skipped / error reason, or the failing metric names
  std::vector<Metric> metrics;
  std::vector<RowNote> worst_rows;
  // The backward comparators' per-cell judgement (CellMap); run_trial moves it into a failing case's
  // kept artifacts and drops it otherwise, so stored results do not carry it.
  std::shared_ptr<const std::vector<CellMap>> cell_maps;
  const Metric* find(const std::string& name) const;
};

// The name of a verdict kind: "pass", "fail", "skipped", "error" (JSON, reports, CSS classes), and the
// same in capitals, "PASS", ..., the label of result lines and badges.
const char* verdict_name(Verdict::Kind k);
std::string verdict_label(Verdict::Kind k);

// Which end of RowNote::value is worse: recall/overlap (Lowest), error / gate ratios (Highest).
enum class WorseIs { Lowest, Highest };
inline constexpr size_t kWorstRowsKept = 8;

// The one verdict builder: Fail when a metric failed, else Pass; reason = the failing metrics' names
// in metric order. A gated metric whose value is NaN fails too (a comparator that lost its number must
// not pass). worst_rows: sorted worst first (stable), the first kWorstRowsKept kept.
Verdict build_verdict(std::vector<Metric> metrics, std::vector<RowNote> worst_rows = {},
                      WorseIs worse = WorseIs::Lowest);
// A verdict without metrics: the case could not be judged (Error) or did not run (Skipped).
Verdict error_verdict(std::string reason);
Verdict skipped_verdict(std::string reason);

// Names of the failing metrics, e.g. {"out_of_causal", "tie_aware_recall_min"} (sorted: a set, so
// failures compare by what failed, not by metric order).
std::set<std::string> failing_metrics(const Verdict& v);
// The failing metrics with value and rule, "name=value (rule), ..."; a verdict without a failing metric
// (error, skipped) reads "label: reason".
std::string failing_summary(const Verdict& v);

// Verdicts counted over many cases (gate, fuzz, reports, GPU runs).
struct VerdictTally {
  std::array<int64_t, 4> n{};  // indexed by Verdict::Kind

  void add(Verdict::Kind k) { ++n[size_t(k)]; }
  int64_t operator[](Verdict::Kind k) const { return n[size_t(k)]; }
  int64_t total() const { return n[0] + n[1] + n[2] + n[3]; }
  int64_t ran() const { return total() - n[Verdict::Skipped]; }
  int64_t bad() const { return n[Verdict::Fail] + n[Verdict::Error]; }  // "failed" in summaries
  // The CLI's exit code for these cases: 1 when one failed or errored, 125 when none ran, else 0.
  int exit_code() const { return bad() > 0 ? 1 : ran() > 0 ? 0 : 125; }
};

// Tally of anything with a `.verdict` (CaseResult).
template <class Results>
VerdictTally tally(const Results& results) {
  VerdictTally t;
  for (const auto& r : results) t.add(r.verdict.kind);
  return t;
}

}  // namespace ao
