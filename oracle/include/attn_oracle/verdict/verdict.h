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

// The discrimination check of one judged output (compare/discrimination.h): what answers that must
// fail score against the gates the comparator applied to this case. Every output of every op gets one.
//  * the zero answer: the output's valid judged rows all zero (index tensors: key 0), every other
//    output exact, pad slots as the harness wrote them;
//  * the NaN answer: the same rows NaN (index tensors: an index past the K/V buffer);
//  * the moved answer: the exact answer moved toward zero by kMovedGates times its gate at the zero
//    answer's worst cell (informational: the gate's err/gate there; float outputs whose zero answer fails).
// The output is weak when its gates cannot reject the zero answer although its exact value is not
// zero, or cannot reject the NaN answer: a gate that an all-zero answer can pass says nothing.
struct GateCheck {
  std::string output;        // the output's name in output_specs(): "o", "lse", "dq", "topk", ...
  int64_t judged = 0;        // judged elements (0: nothing of this output is judged in this case: never weak)
  bool exact_zero = false;   // the exact answer is zero (below 2^-100: underflow) on every judged element: a zero answer is right
  bool zero_fails = true, nan_fails = true;
  double zero_ratio = -1;    // the zero answer's worst err/gate over the gated metrics (-1: none carries one)
  double moved_ratio = -1;   // the moved answer's (-1: not computed)
  bool moved_fails = true;
  std::string zero_failed;   // the metrics the zero answer fails, comma-separated
  bool weak() const { return judged > 0 && ((!zero_fails && !exact_zero) || !nan_fails); }
};
inline constexpr double kMovedGates = 4;

struct Verdict {
  // Weak: no metric failed, but a gate of the case cannot reject an all-zero (or NaN) answer of some
  // output (GateCheck::weak): not a pass. Fail and Error take precedence over it.
  enum Kind { Pass, Fail, Skipped, Error, Weak } kind = Pass;
  std::string reason;                // skipped / error reason, the failing metric names, or the weak outputs
  std::vector<Metric> metrics;
  std::vector<RowNote> worst_rows;
  // The backward comparators' per-cell judgement (CellMap); run_trial moves it into a failing case's
  // kept artifacts and drops it otherwise, so stored results do not carry it.
  std::shared_ptr<const std::vector<CellMap>> cell_maps;
  // The discrimination check, one entry per judged output (empty where the case was not judged).
  std::vector<GateCheck> gate_checks;
  const Metric* find(const std::string& name) const;
};
inline constexpr int kVerdictKinds = 5;

// The name of a verdict kind: "pass", "fail", "skipped", "error", "weak" (JSON, reports, CSS classes),
// and the same in capitals, "PASS", ..., the label of result lines and badges.
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
// v with its discrimination check: a Pass with a weak output becomes Weak, its reason naming each weak
// output ("weak:dq (a zero dq passes every gate: worst err/gate 0.062)"); other kinds keep theirs.
Verdict with_gate_checks(Verdict v, std::vector<GateCheck> checks);
// One output's discrimination check in words, e.g. "dq: zero answer fails (worst err/gate 14.2; dq_violations),
// NaN answer fails, moved by 4 gates: err/gate 4" or "dk: zero answer PASSES (worst err/gate 0.06): WEAK".
std::string gate_check_text(const GateCheck& g);
// The weak outputs' names, in output order ({"dq", "dv"}).
std::vector<std::string> weak_outputs(const Verdict& v);
// Whether a verdict kind is a failure: Fail or Error (a Weak verdict is not, except under --strict).
inline bool is_failure(Verdict::Kind k) { return k == Verdict::Fail || k == Verdict::Error; }

// Names of the failing metrics, e.g. {"out_of_causal", "tie_aware_recall_min"} (sorted: a set, so
// failures compare by what failed, not by metric order).
std::set<std::string> failing_metrics(const Verdict& v);
// The failing metrics with value and rule, "name=value (rule), ..."; a verdict without a failing metric
// (error, skipped) reads "label: reason".
std::string failing_summary(const Verdict& v);

// Verdicts counted over many cases (gate, fuzz, reports, GPU runs).
struct VerdictTally {
  std::array<int64_t, kVerdictKinds> n{};  // indexed by Verdict::Kind

  void add(Verdict::Kind k) { ++n[size_t(k)]; }
  int64_t operator[](Verdict::Kind k) const { return n[size_t(k)]; }
  int64_t total() const { return n[0] + n[1] + n[2] + n[3] + n[4]; }
  int64_t ran() const { return total() - n[Verdict::Skipped]; }
  int64_t bad() const { return n[Verdict::Fail] + n[Verdict::Error]; }  // "failed" in summaries
  int64_t weak() const { return n[Verdict::Weak]; }                      // counted apart: neither passed nor failed
  // The CLI's exit code for these cases: 1 when one failed or errored (strict: or was weak), 125 when
  // none ran, else 0.
  int exit_code(bool strict = false) const { return bad() > 0 || (strict && weak() > 0) ? 1 : ran() > 0 ? 0 : 125; }
};

// Tally of anything with a `.verdict` (CaseResult).
template <class Results>
VerdictTally tally(const Results& results) {
  VerdictTally t;
  for (const auto& r : results) t.add(r.verdict.kind);
  return t;
}

}  // namespace ao
