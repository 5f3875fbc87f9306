// The verdict stage (verdict.h): metrics in, verdict out; labels, tallies and failing-metric text.
#include "attn_oracle/verdict/verdict.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace ao {

const Metric* Verdict::find(const std::string& name) const {
  for (const auto& m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

const char* verdict_name(Verdict::Kind k) {
  switch (k) {
    case Verdict::Pass: return "pass";
    case Verdict::Fail: return "fail";
    case Verdict::Skipped: return "skipped";
    case Verdict::Weak: return "weak";
    default: return "error";
  }
}

std::string verdict_label(Verdict::Kind k) {
  std::string s = verdict_name(k);
  for (auto& ch : s) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

Verdict build_verdict(std::vector<Metric> metrics, std::vector<RowNote> worst_rows, WorseIs worse) {
  Verdict v;
  if (metrics.empty()) return error_verdict("the comparator measured no metric");  // nothing judged: no pass
  for (auto& m : metrics) {
    if (m.gated() && std::isnan(m.value)) m.failed = true;
    if (m.failed) v.reason += (v.reason.empty() ? "" : ", ") + m.name;
  }
  v.kind = v.reason.empty() ? Verdict::Pass : Verdict::Fail;
  v.metrics = std::move(metrics);
  std::stable_sort(worst_rows.begin(), worst_rows.end(), [worse](const RowNote& a, const RowNote& b) {
    return worse == WorseIs::Lowest ? a.value < b.value : a.value > b.value;
  });
  if (worst_rows.size() > kWorstRowsKept) worst_rows.resize(kWorstRowsKept);
  v.worst_rows = std::move(worst_rows);
  return v;
}

Verdict error_verdict(std::string reason) { return {Verdict::Error, std::move(reason), {}, {}, {}, {}}; }
Verdict skipped_verdict(std::string reason) { return {Verdict::Skipped, std::move(reason), {}, {}, {}, {}}; }

Verdict with_gate_checks(Verdict v, std::vector<GateCheck> checks) {
  v.gate_checks = std::move(checks);
  if (v.kind != Verdict::Pass) return v;
  std::string reason;
  for (const auto& g : v.gate_checks) {
    if (!g.weak()) continue;
    std::string why;
    if (!g.nan_fails) why = fmt::format("a NaN {} passes every gate", g.output);
    if (!g.zero_fails && !g.exact_zero)
      why += fmt::format("{}a zero {} passes every gate{}", why.empty() ? "" : "; ", g.output,
                         g.zero_ratio >= 0 ? fmt::format(": worst err/gate {:.3g}", g.zero_ratio) : std::string());
    reason += fmt::format("{}weak:{} ({})", reason.empty() ? "" : ", ", g.output, why);
  }
  if (!reason.empty()) {
    v.kind = Verdict::Weak;
    v.reason = std::move(reason);
  }
  return v;
}

std::string gate_check_text(const GateCheck& g) {
  if (g.judged == 0) return fmt::format("{}: nothing judged", g.output);
  const auto ratio = [](double r) { return r >= 0 ? fmt::format("worst err/gate {:.3g}", r) : std::string(); };
  std::string s = g.output + ": ";
  if (g.exact_zero) {
    s += "exact answer is zero (a zero answer is right)";
  } else {
    s += fmt::format("zero answer {}", g.zero_fails ? "fails" : "PASSES");
    const std::string r = ratio(g.zero_ratio);
    const std::string what = g.zero_fails ? g.zero_failed : "";
    if (!r.empty() || !what.empty()) s += " (" + r + (!r.empty() && !what.empty() ? "; " : "") + what + ")";
  }
  s += fmt::format(", NaN answer {}", g.nan_fails ? "fails" : "PASSES");
  if (g.moved_ratio >= 0)
    s += fmt::format(", moved by {:g} gates: err/gate {:.3g}{}", kMovedGates, g.moved_ratio, g.moved_fails ? "" : " PASSES");
  if (g.weak()) s += ": WEAK";
  return s;
}

std::vector<std::string> weak_outputs(const Verdict& v) {
  std::vector<std::string> out;
  for (const auto& g : v.gate_checks)
    if (g.weak()) out.push_back(g.output);
  return out;
}

std::set<std::string> failing_metrics(const Verdict& v) {
  std::set<std::string> s;
  for (const auto& m : v.metrics)
    if (m.failed) s.insert(m.name);
  return s;
}

std::string failing_summary(const Verdict& v) {
  std::string s;
  for (const auto& m : v.metrics)
    if (m.failed) s += fmt::format("{}{}={:.6g} ({})", s.empty() ? "" : ", ", m.name, m.value, m.rule);
  if (s.empty()) s = std::string(verdict_name(v.kind)) + (v.reason.empty() ? "" : ": " + v.reason);
  return s;
}

}  // namespace ao
