#include "attn_oracle/pipeline/trial.h"

#include "attn_oracle/internal/interrupt.h"

#include <atomic>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/compare/discrimination.h"
#include "attn_oracle/internal/utf8.h"
#include "attn_oracle/pipeline/memory_budget.h"
#include "attn_oracle/reference/reference.h"
#include "attn_oracle/reference/reference_sanity.h"

namespace ao {

namespace {

// Bytes of artifacts alive in this process; each CaseArtifacts gives its share back when freed.
std::atomic<int64_t> g_artifact_bytes{0};
constexpr int64_t kArtifactBudget = int64_t(1) << 30;

}  // namespace

Trial::Trial(const Case& c, const LayoutLimits& lim) : Trial(make_layout(c, with_stage_memory(lim))) {}

Trial::Trial(Layout l) : l_(std::move(l)), in_(make_case_inputs(l_)), pristine_(fingerprint(in_)) {}

Trial::Trial(Trial&& o) noexcept : l_(std::move(o.l_)), in_(std::move(o.in_)), pristine_(std::move(o.pristine_)) {
  o.prepared_.reset();
  o.checks_.reset();
}

Trial::~Trial() = default;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

const PreparedJudgement& Trial::prepared() const {
  if (!prepared_) prepared_ = prepare_judgement(l_, in_, no_reference_);
  if (!checks_) {
    const auto t0 = Clock::now();
    checks_ = std::make_unique<std::vector<GateCheck>>(check_gates(l_, *prepared_));
    gate_check_seconds_ = seconds_since(t0);
  }
  return *prepared_;
}

const std::vector<GateCheck>* Trial::gate_checks() {
  if (comparator_reads_reference(l_.c)) return nullptr;
  prepared();
  return checks_.get();
}

TrialRun Trial::run(Backend& b) {
  TrialRun r;
  r.backend = sanitize_utf8(b.name());
  r.out = make_sentinel_outputs(l_);
  set_work_in_flight(r.backend + " on " + print_case(l_.c));
  r.status = run_backend(b, l_, in_, r.out);
  set_work_in_flight("");
  if (auto what = changed_input(l_, in_, pristine_, make_case_inputs); !what.empty()) {
    r.wrote_input = sanitize_utf8(what);
    in_ = make_case_inputs(l_);  // deterministic: the pristine inputs again, for every later run and judgement
    if (r.status.kind != RunStatus::Skipped)
      r.status = {RunStatus::Error, fmt::format("{} wrote its input {}", r.backend, r.wrote_input), r.status.seconds};
  }
  return r;
}

std::optional<Verdict> Trial::unjudged(const TrialRun& got) {
  if (got.status.kind == RunStatus::Skipped)
    return skipped_verdict(sanitize_utf8(fmt::format("{} skipped: {}", got.backend, got.status.reason)));
  if (!got.wrote_input.empty())
    return error_verdict(sanitize_utf8(fmt::format("backend {} wrote its input {}", got.backend, got.wrote_input)));
  if (got.status.kind == RunStatus::Error) return error_verdict(sanitize_utf8(got.status.reason));
  return std::nullopt;
}

Verdict Trial::judge(const TrialRun& got, const TrialRun& ref) const { return judge_on(l_, got, ref); }

Verdict Trial::judge_exact(const TrialRun& got) const {
  if (comparator_reads_reference(l_.c)) throw std::logic_error("judge_exact: this comparator reads the reference");
  if (auto v = unjudged(got)) return *v;
  const PreparedJudgement& j = prepared();
  return with_gate_checks(j.judge(got.out), *checks_);
}

Verdict Trial::judge_rows(const TrialRun& got, const TrialRun& ref, std::vector<int64_t> rows) const {
  Layout l = l_;
  l.check_rows = std::move(rows);
  return judge_on(l, got, ref);
}

Verdict Trial::judge_on(const Layout& l, const TrialRun& got, const TrialRun& ref) const {
  if (auto v = unjudged(got)) return *v;
  if (!ref.wrote_input.empty())
    return error_verdict(sanitize_utf8(fmt::format("reference {} wrote its input {}", ref.backend, ref.wrote_input)));
  if (!ref.ok())
    return skipped_verdict(sanitize_utf8(fmt::format("reference {} did not run: {}", ref.backend, ref.status.reason)));
  if (auto bad = reference_sanity(l, ref.out); !bad.empty())
    return error_verdict(sanitize_utf8(fmt::format("reference {} failed its own sanity check: {}", ref.backend, bad)));
  if (&l == &l_ && !comparator_reads_reference(l.c)) {  // the reference's outputs are not read: the prepared half
    const PreparedJudgement& j = prepared();
    return with_gate_checks(j.judge(got.out), *checks_);
  }
  const auto j = prepare_judgement(l, in_, ref.out);
  Verdict v = j->judge(got.out);
  const auto t0 = Clock::now();
  std::vector<GateCheck> checks = check_gates(l, *j);
  gate_check_seconds_ = seconds_since(t0);
  return with_gate_checks(std::move(v), std::move(checks));
}

// The pictures use indices of checked rows (indexer) or O and LSE (SDPA); see CaseArtifacts.
std::shared_ptr<const CaseArtifacts> Trial::keep_artifacts(TrialRun& got_run, TrialRun& ref_run, Verdict& v) const {
  const Layout& l = l_;
  Outputs &got = got_run.out, &ref = ref_run.out;
  auto a = std::make_unique<CaseArtifacts>();
  a->layout = l;
  int64_t map_bytes = 0;
  if (l.c.pass == Pass::Bwd) {  // the comparator's judgement per cell, not the gradients
    if (!v.cell_maps) return nullptr;
    for (const auto& m : *v.cell_maps) map_bytes += int64_t(m.state.size() * (1 + sizeof(float)));
    a->cell_maps = std::move(v.cell_maps);
  } else if (l.c.op == Op::Indexer) {
    const size_t K = size_t(l.c.topk);
    for (int64_t r : l.check_rows) {
      a->got.topk.insert(a->got.topk.end(), got.topk.begin() + long(size_t(r) * K), got.topk.begin() + long(size_t(r + 1) * K));
      a->ref.topk.insert(a->ref.topk.end(), ref.topk.begin() + long(size_t(r) * K), ref.topk.begin() + long(size_t(r + 1) * K));
    }
  } else {
    a->got.o = std::move(got.o);
    a->got.lse = std::move(got.lse);
    a->ref.o = std::move(ref.o);
    a->ref.lse = std::move(ref.lse);
  }
  const int64_t bytes = int64_t(sizeof(float)) * int64_t(a->got.topk.size() + a->ref.topk.size() + a->got.o.size() +
                                                         a->ref.o.size() + a->got.lse.size() + a->ref.lse.size()) +
                        int64_t(sizeof(int32_t)) * int64_t(l.row_segment.size()) +
                        int64_t(sizeof(int64_t)) * int64_t(l.check_rows.size()) + map_bytes;
  if (g_artifact_bytes.fetch_add(bytes) + bytes > kArtifactBudget) {
    g_artifact_bytes -= bytes;
    return nullptr;
  }
  return std::shared_ptr<const CaseArtifacts>(a.release(), [bytes](const CaseArtifacts* p) {
    g_artifact_bytes -= bytes;
    delete p;
  });
}

}  // namespace ao
