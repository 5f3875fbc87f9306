#include "attn_oracle/pipeline/harness.h"

#include <atomic>

#include <fmt/format.h>

#include "attn_oracle/inputs/input_fingerprint.h"
#include "attn_oracle/reference/reference_sanity.h"
#include "attn_oracle/internal/utf8.h"

namespace ao {

namespace {

// Bytes of artifacts alive in this process; each CaseArtifacts gives its share back when freed.
std::atomic<int64_t> g_artifact_bytes{0};
constexpr int64_t kArtifactBudget = int64_t(1) << 30;

// The pictures use indices of checked rows (indexer) or O and LSE (SDPA); see CaseArtifacts.
std::shared_ptr<const CaseArtifacts> keep(const Layout& l, Outputs& got, Outputs& ref) {
  auto a = std::make_unique<CaseArtifacts>();
  a->layout = l;
  if (l.c.op == Op::Indexer) {
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
                        int64_t(sizeof(int64_t)) * int64_t(l.check_rows.size());
  if (g_artifact_bytes.fetch_add(bytes) + bytes > kArtifactBudget) {
    g_artifact_bytes -= bytes;
    return nullptr;
  }
  return std::shared_ptr<const CaseArtifacts>(a.release(), [bytes](const CaseArtifacts* p) {
    g_artifact_bytes -= bytes;
    delete p;
  });
}

}  // namespace

CaseResult run_case(const Case& c, Backend& backend, Backend& vs, const LayoutLimits& lim, bool keep_artifacts) {
  const Layout l = make_layout(c, lim);
  CaseResult res;
  // Names, versions and reasons may come from foreign code: valid UTF-8 before any writer sees them.
  res.case_line = print_case(c);
  res.backend = sanitize_utf8(backend.name());
  res.vs = sanitize_utf8(vs.name());
  res.backend_version = sanitize_utf8(backend.version());
  const Inputs in = make_inputs(l);
  const InputFingerprint pristine = fingerprint(in);
  auto error = [&](std::string why) {
    res.verdict = error_verdict(sanitize_utf8(why));
    return res;
  };
  Outputs got = make_sentinel_outputs(l);
  const RunStatus bs = run_backend(backend, l, in, got);
  res.backend_seconds = bs.seconds;
  if (bs.kind == RunStatus::Skipped) {
    res.verdict = skipped_verdict(sanitize_utf8(fmt::format("{} skipped: {}", backend.name(), bs.reason)));
    return res;
  }
  // Checked before the reference runs, so the reference and the comparator only ever see pristine inputs.
  if (auto what = changed_input(l, in, pristine); !what.empty())
    return error(fmt::format("backend {} wrote its input {}", backend.name(), what));
  if (bs.kind == RunStatus::Error) return error(bs.reason);
  Outputs ref = make_sentinel_outputs(l);
  const RunStatus rs = run_backend(vs, l, in, ref);
  res.ref_seconds = rs.seconds;
  if (auto what = changed_input(l, in, pristine); !what.empty())
    return error(fmt::format("reference {} wrote its input {}", vs.name(), what));
  if (rs.kind != RunStatus::Ok) {
    res.verdict = skipped_verdict(sanitize_utf8(fmt::format("reference {} did not run: {}", vs.name(), rs.reason)));
    return res;
  }
  if (auto bad = reference_sanity(l, ref); !bad.empty())
    return error(fmt::format("reference {} failed its own sanity check: {}", vs.name(), bad));
  res.verdict = compare(l, in, got, ref);
  if (keep_artifacts && res.verdict.kind == Verdict::Fail) res.artifacts = keep(l, got, ref);
  return res;
}

int exit_code(const std::vector<CaseResult>& results) { return tally(results).exit_code(); }

std::string format_result(const CaseResult& r) {
  std::string s = fmt::format("case:    {}\nbackend: {}   vs: {}\n", r.case_line, r.backend, r.vs);
  s += fmt::format("verdict: {}{}\n", verdict_label(r.verdict.kind), r.verdict.reason.empty() ? "" : " (" + r.verdict.reason + ")");
  for (const auto& m : r.verdict.metrics)
    s += fmt::format("  {:<24} {:>14.6g}  {}{}\n", m.name, m.value, m.rule, m.failed ? "   <-- FAILED" : "");
  if (!r.verdict.worst_rows.empty()) {
    s += "  worst rows (Q row, doc, chunk, position, value):\n";
    for (const auto& w : r.verdict.worst_rows)
      s += fmt::format("    row {:>8}  doc {:>3}  chunk {:>3}  pos {:>8}  {:.4g}\n", w.row, w.doc, w.chunk, w.pos,
                       w.value);
  }
  s += fmt::format("  time: backend {:.3f} s, reference {:.3f} s\n", r.backend_seconds, r.ref_seconds);
  return s;
}

}  // namespace ao
