#include "attn_oracle/pipeline/run_case.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/utf8.h"

namespace ao {

namespace {
std::shared_ptr<const Layout> layout_without_rows(const Layout& l) {
  Layout d = l;  // failing cases only: the copy of the row vectors is small beside the run
  d.row_segment = {};
  d.check_rows = {};
  return std::make_shared<const Layout>(std::move(d));
}
bool failed(const Verdict& v) { return v.kind == Verdict::Fail || v.kind == Verdict::Error; }
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

CaseResult run_case(const Case& c, Backend& backend, Backend& vs, const LayoutLimits& lim, bool keep_artifacts,
                    bool explain) {
  const auto t0 = Clock::now();
  Trial t(c, lim);
  const double inputs_seconds = seconds_since(t0);
  CaseResult res = run_trial(t, backend, vs, keep_artifacts, explain);
  res.inputs_seconds = inputs_seconds;
  return res;
}

CaseResult run_trial(Trial& t, Backend& backend, Backend& vs, bool keep_artifacts, bool explain) {
  CaseResult res;
  // Names, versions and reasons may come from foreign code: valid UTF-8 before any writer sees them.
  res.case_line = print_case(t.layout().c);
  res.backend = sanitize_utf8(backend.name());
  res.vs = sanitize_utf8(vs.name());
  res.backend_version = sanitize_utf8(backend.version());
  auto t0 = Clock::now();
  TrialRun got = t.run(backend);
  res.backend_seconds = got.status.seconds;
  res.run_setup_seconds = std::max(0.0, seconds_since(t0) - got.status.seconds);
  if (auto v = Trial::unjudged(got)) {  // the reference runs only where there is something to judge
    res.verdict = std::move(*v);
    if (failed(res.verdict)) res.layout = layout_without_rows(t.layout());
    return res;
  }
  TrialRun ref;
  auto run_reference = [&] {
    t0 = Clock::now();
    ref = t.run(vs);
    res.reference_ran = true;
    res.ref_seconds = ref.status.seconds;
    res.run_setup_seconds += std::max(0.0, seconds_since(t0) - ref.status.seconds);
  };
  // The built-in reference's outputs change no SDPA verdict (the comparator recomputes the exact answer):
  // it runs only where a failing case's explanation or pictures compare outputs with it. Any other --vs
  // runs, and its run must pass (a reference that cannot run leaves the case unjudged).
  const bool reference_needed = comparator_reads_reference(t.layout().c) || !vs.is_exact_reference();
  if (reference_needed) run_reference();
  t0 = Clock::now();
  res.verdict = reference_needed ? t.judge(got, ref) : t.judge_exact(got);
  res.judge_seconds = seconds_since(t0);
  res.gate_check_seconds = t.gate_check_seconds();
  if (failed(res.verdict)) res.layout = layout_without_rows(t.layout());
  const bool fail = res.verdict.kind == Verdict::Fail;
  // Before keep_artifacts moves the outputs. Not after a stop request: explaining runs every bug model,
  // and the user asked to stop after the case in flight, whose verdict stands.
  const bool explaining = explain && fail && !interrupted();
  if ((explaining || (keep_artifacts && fail)) && !res.reference_ran) run_reference();
  if (explaining && ref.ok() && ref.wrote_input.empty())
    res.explanation = std::make_shared<const Explanation>(explain_trial(t, got, ref));
  if (keep_artifacts && fail && ref.ok() && ref.wrote_input.empty())
    res.artifacts = t.keep_artifacts(got, ref, res.verdict);
  res.verdict.cell_maps.reset();  // kept in the artifacts or not at all (see Verdict)
  return res;
}

int exit_code(const std::vector<CaseResult>& results) { return tally(results).exit_code(); }

std::string reference_not_run_note(const CaseResult& r) {
  // An unjudged case (judge_seconds 0) ran no reference either, and has nothing to say about it.
  if (r.reference_ran || r.judge_seconds == 0) return {};
  return "reference not run: the judgement recomputes the exact answer";
}

std::string format_result(const CaseResult& r) {
  std::string s = fmt::format("case:    {}\nbackend: {}   vs: {}\n", r.case_line, r.backend, r.vs);
  s += fmt::format("verdict: {}{}\n", verdict_label(r.verdict.kind), r.verdict.reason.empty() ? "" : " (" + r.verdict.reason + ")");
  for (const auto& m : r.verdict.metrics)
    s += fmt::format("  {:<24} {:>14.6g}  {}{}\n", m.name, m.value, m.rule, m.failed ? "   <-- FAILED" : "");
  if (!r.verdict.gate_checks.empty()) {
    s += "  discrimination (an all-zero / NaN answer of each output against this case's gates):\n";
    for (const auto& g : r.verdict.gate_checks) s += "    " + gate_check_text(g) + "\n";
  }
  if (!r.verdict.worst_rows.empty()) {
    s += "  worst rows (Q row, doc, chunk, position, value):\n";
    for (const auto& w : r.verdict.worst_rows)
      s += fmt::format("    row {:>8}  doc {:>3}  chunk {:>3}  pos {:>8}  {:.4g}\n", w.row, w.doc, w.chunk, w.pos,
                       w.value);
  }
  // The reference's seconds stay in their place (0 when not run) so that the line parses the same way.
  s += fmt::format("  time: backend {:.3f} s, reference {:.3f} s; inputs {:.3f} s, outputs + input checks {:.3f} s, judge {:.3f} s "
                   "(gate check {:.3f} s){}\n",
                   r.backend_seconds, r.ref_seconds, r.inputs_seconds, r.run_setup_seconds, r.judge_seconds,
                   r.gate_check_seconds,
                   reference_not_run_note(r).empty() ? "" : " (" + reference_not_run_note(r) + ")");
  if (r.explanation) s += "explain: " + format_explanation(*r.explanation, 3);
  return s;
}

}  // namespace ao
