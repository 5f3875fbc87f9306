#include <cmath>

#include <nlohmann/json.hpp>

#include "attn_oracle/report/report.h"
#include "attn_oracle/verdict/verdict.h"

#ifndef AO_VERSION
#define AO_VERSION "unknown"
#endif

namespace ao {

const char* tool_version() { return AO_VERSION; }

namespace {
nlohmann::json number(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");  // JSON has no inf/nan
}
}  // namespace

std::string report_json(const std::vector<CaseResult>& results, const ReportStatus& status) {
  nlohmann::json j;
  j["schema"] = "attn-oracle.report";
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = {{"name", "attn-oracle"}, {"version", tool_version()}};
  // Added in schema 1 (readers that do not know it see the finished cases as before).
  j["status"] = status.signal ? "interrupted" : "complete";
  if (status.signal) j["signal"] = signal_name(status.signal);
  auto& cases = j["cases"] = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json c;
    c["case"] = r.case_line;
    c["backend"] = r.backend;
    c["backend_version"] = r.backend_version;
    // What the result depends on: this tool's build and the backend's libraries/driver (may be empty).
    c["versions"] = {{"attn-oracle", tool_version()}, {"backend", r.backend_version}};
    c["vs"] = r.vs;
    c["verdict"] = verdict_name(r.verdict.kind);
    c["reason"] = r.verdict.reason;
    auto& m = c["metrics"] = nlohmann::json::object();
    for (const auto& x : r.verdict.metrics) {
      m[x.name] = {{"value", number(x.value)}, {"rule", x.rule}, {"failed", x.failed}};
      if (x.gate >= 0) m[x.name]["gate"] = number(x.gate);  // derived gate: the margin is value / gate
      if (x.gate_ratio >= 0) m[x.name]["gate_ratio"] = number(x.gate_ratio);  // worst row error / gate
    }
    auto& w = c["worst_rows"] = nlohmann::json::array();
    for (const auto& x : r.verdict.worst_rows)
      w.push_back({{"row", x.row}, {"doc", x.doc}, {"chunk", x.chunk}, {"pos", x.pos}, {"value", number(x.value)}});
    c["seconds"] = {{"backend", r.backend_seconds},         {"reference", r.ref_seconds},
                    {"inputs", r.inputs_seconds},           {"run_setup", r.run_setup_seconds},
                    {"judge", r.judge_seconds},             {"gate_check", r.gate_check_seconds}};
    c["reference_ran"] = r.reference_ran;
    // Added in schema 4: the discrimination check of every judged output (discrimination.h).
    auto& gc = c["gate_checks"] = nlohmann::json::array();
    for (const auto& g : r.verdict.gate_checks) {
      nlohmann::json x = {{"output", g.output},         {"judged", g.judged},         {"exact_zero", g.exact_zero},
                          {"zero_fails", g.zero_fails}, {"nan_fails", g.nan_fails}, {"weak", g.weak()}};
      if (g.zero_ratio >= 0) x["zero_ratio"] = number(g.zero_ratio);
      if (!g.zero_failed.empty()) x["zero_failed"] = g.zero_failed;
      if (g.moved_ratio >= 0) x["moved_ratio"] = number(g.moved_ratio), x["moved_fails"] = g.moved_fails;
      gc.push_back(std::move(x));
    }
    if (r.explanation) {  // added in schema 3: failing cases only, unless explaining was turned off
      const Explanation& e = *r.explanation;
      auto& x = c["explanation"];
      x["outcome"] = e.outcome == Explanation::Explained  ? "explained"
                     : e.outcome == Explanation::NotExplained ? "not_explained"
                                                              : "nothing_to_explain";
      x["headline"] = e.headline();
      x["best"] = e.best();
      x["match"] = e.match_rule;
      x["rows"] = e.rows;
      x["wrong_rows"] = e.wrong_rows;
      x["pad_slots"] = e.pad_slots;
      x["wrong_pad_slots"] = e.wrong_pad_slots;
      x["wrong_o_rows"] = e.wrong_o_rows;  // SDPA: of the wrong rows, those whose O / LSE differs
      x["wrong_lse_rows"] = e.wrong_lse_rows;
      auto& ranked = x["ranked"] = nlohmann::json::array();
      for (size_t i = 0; i < e.ranked.size() && i < 5; ++i) {
        const auto& m = e.ranked[i];
        ranked.push_back({{"model", m.model}, {"catalog", m.catalog}, {"reproduced", m.reproduced},
                          {"broken", m.broken}, {"pad_reproduced", m.pad_reproduced}, {"pad_broken", m.pad_broken},
                          {"o_reproduced", m.o_reproduced}, {"lse_reproduced", m.lse_reproduced}});
      }
    }
    cases.push_back(std::move(c));
  }
  const VerdictTally n = tally(results);
  j["summary"] = nlohmann::json::object();
  for (auto k : {Verdict::Pass, Verdict::Fail, Verdict::Skipped, Verdict::Error, Verdict::Weak})
    j["summary"][verdict_name(k)] = n[k];  // "weak": added in schema 4
  // Strings are sanitized where they enter a result; `replace` keeps one that was not from ending the report.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ao
