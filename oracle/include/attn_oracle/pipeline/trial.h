// One trial of one case: the pipeline case -> Layout -> Inputs -> backend runs -> judgement, as one
// object that every driver uses (run_case, selftest, cp-run, the GPU campaign, the fuzz campaign).
//  * Built from a Case (or a Layout made elsewhere): the validated layout, the generated inputs and
//    their fingerprint. Throws CaseError for an invalid case (callers map it to exit code 2).
//  * run(b): the backend on fresh sentinel outputs. The inputs are checked after every run: a
//    backend that wrote them gets RunStatus::Error (wrote_input names the element) and the trial
//    restores them, so no later run and no judgement ever sees written inputs.
//  * judge(got, ref): the verdict of a run against a reference run: SKIPPED/ERROR when either run
//    produced nothing to judge, ERROR when the reference fails reference_sanity(), else compare()
//    (with its discrimination check: WEAK where a gate cannot reject an all-zero or NaN answer).
//  * gate_checks(): that discrimination check before any backend runs, where the comparator reads no
//    reference run; the comparator's prepared half (the exact answer and the gates) is kept for the
//    trial's judge_exact calls, so a check made first costs nothing more.
//  * keep_artifacts(got, ref, v): what report pictures need of a failing trial (bounded; see below).
// Foreign text (backend names, reasons) is made valid UTF-8 here.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/compare/compare.h"
#include "attn_oracle/inputs/input_fingerprint.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

// One backend's run in a trial.
struct TrialRun {
  std::string backend;      // the backend's name (valid UTF-8)
  Outputs out;              // sentinel outputs as the backend left them
  RunStatus status;         // Error also when the backend wrote its inputs (then wrote_input is set)
  std::string wrote_input;  // the first changed input element, e.g. "q (first changed element 3 of 64: ...)"
  bool ok() const { return status.kind == RunStatus::Ok; }
};

// What the report pictures need from a failing case: its layout and both output sets. Bounded: the
// indexer keeps top-k of the checked rows only (got/ref.topk row i = layout.check_rows[i]; scores
// dropped), SDPA keeps O and LSE, a backward case its comparator's cell maps (Verdict::cell_maps) and
// no outputs; all kept artifacts of a process share a 1 GiB budget (past it a failing case keeps none).
// The writers downsample further, so a report stays small whatever the case.
struct CaseArtifacts {
  Layout layout;
  Outputs got, ref;
  std::shared_ptr<const std::vector<CellMap>> cell_maps;
};

class Trial {
 public:
  explicit Trial(const Case& c, const LayoutLimits& lim = {});
  explicit Trial(Layout l);  // a layout made elsewhere (cp-run's per-rank layouts)
  // Moved, not copied: the prepared comparator refers to the trial's layout and inputs, so it stays
  // behind (a moved trial prepares it again at its next need).
  Trial(Trial&& o) noexcept;
  Trial(const Trial&) = delete;
  Trial& operator=(const Trial&) = delete;
  ~Trial();

  const Layout& layout() const { return l_; }
  const Inputs& inputs() const { return in_; }

  TrialRun run(Backend& b);

  // The verdict of a run that produced nothing to judge: SKIPPED ("<name> skipped: ..."), or ERROR
  // (its error, or "backend <name> wrote its input ..."); nullopt when it ran.
  static std::optional<Verdict> unjudged(const TrialRun& got);
  // got judged against the reference's run ref (see the top of this file).
  Verdict judge(const TrialRun& got, const TrialRun& ref) const;
  // The verdict of got where the comparator does not read a reference (comparator_reads_reference is
  // false): the built-in reference's run would change nothing, so none is needed.
  Verdict judge_exact(const TrialRun& got) const;
  // The discrimination check of this case's gates (discrimination.h), computed from the exact answer
  // before any backend runs; null where the comparator reads a reference run (the indexer's forward).
  const std::vector<GateCheck>* gate_checks();
  // Seconds the last discrimination check took (its judge() passes and answers, not the prepared half).
  double gate_check_seconds() const { return gate_check_seconds_; }
  // The same on a subset of layout().check_rows (per-segment verdicts).
  Verdict judge_rows(const TrialRun& got, const TrialRun& ref, std::vector<int64_t> rows) const;

  // Layout and outputs (moved out of got and ref) or v's cell maps (moved out of v) for report.html;
  // null past the process budget.
  std::shared_ptr<const CaseArtifacts> keep_artifacts(TrialRun& got, TrialRun& ref, Verdict& v) const;

 private:
  Verdict judge_on(const Layout& l, const TrialRun& got, const TrialRun& ref) const;

  // The comparator's prepared half and its gate checks, for judge_exact (made at the first need).
  const PreparedJudgement& prepared() const;

  Layout l_;
  Inputs in_;
  InputFingerprint pristine_;
  const Outputs no_reference_;  // what the prepared comparator is given as the reference it does not read
  mutable std::unique_ptr<PreparedJudgement> prepared_;
  mutable std::unique_ptr<std::vector<GateCheck>> checks_;
  mutable double gate_check_seconds_ = 0;
};

}  // namespace ao
