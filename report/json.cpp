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
// Ordered: a case's metrics keep the comparator's order (the order of reasons and failing text).
using Json = nlohmann::ordered_json;

Json number(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");  // JSON has no inf/nan
}
// A quantity that a negative value marks as absent (gate, gate_ratio, zero_ratio, moved_ratio): null then.
Json optional_number(double x) { return x < 0 ? Json(nullptr) : number(x); }

const char* outcome_name(Explanation::Outcome o) {
  return o == Explanation::Explained      ? "explained"
         : o == Explanation::NotExplained ? "not_explained"
                                          : "nothing_to_explain";
}

// The per-case object of the verdict schema (report.h). Every field is always present (null where it does
// not apply), so that a reader never tells "absent" from "not applicable" by a missing key.
Json case_object(const CaseResult& r, const std::string& report_dir) {
  Json c;
  c["case"] = r.case_line;
  c["backend"] = r.backend;
  c["backend_version"] = r.backend_version;
  // What the result depends on: this tool's build and the backend's libraries/driver (may be empty).
  c["versions"] = {{"attn-oracle", tool_version()}, {"backend", r.backend_version}};
  c["vs"] = r.vs;
  c["verdict"] = verdict_name(r.verdict.kind);
  c["label"] = verdict_label(r.verdict.kind);
  c["reason"] = r.verdict.reason;
  c["failing_summary"] = failing_summary(r.verdict);
  auto& m = c["metrics"] = Json::object();
  for (const auto& x : r.verdict.metrics)
    m[x.name] = {{"value", number(x.value)},
                 {"rule", x.rule},
                 {"gated", x.gated()},
                 {"failed", x.failed},
                 {"gate", optional_number(x.gate)},               // derived gate: the margin is value / gate
                 {"gate_ratio", optional_number(x.gate_ratio)}};  // worst row error / gate
  auto& w = c["worst_rows"] = Json::array();
  for (const auto& x : r.verdict.worst_rows)
    w.push_back({{"row", x.row}, {"doc", x.doc}, {"chunk", x.chunk}, {"pos", x.pos}, {"value", number(x.value)}});
  // The discrimination check of every judged output (discrimination.h).
  auto& gc = c["gate_checks"] = Json::array();
  for (const auto& g : r.verdict.gate_checks) {
    const bool moved = g.moved_ratio >= 0;
    gc.push_back({{"output", g.output},
                  {"judged", g.judged},
                  {"exact_zero", g.exact_zero},
                  {"zero_fails", g.zero_fails},
                  {"nan_fails", g.nan_fails},
                  {"weak", g.weak()},
                  {"zero_ratio", optional_number(g.zero_ratio)},
                  {"zero_failed", g.zero_failed},
                  {"moved_ratio", optional_number(g.moved_ratio)},
                  {"moved_fails", moved ? Json(g.moved_fails) : Json(nullptr)},
                  {"text", gate_check_text(g)}});
  }
  // Failing cases only, unless explaining was turned off.
  if (r.explanation) {
    const Explanation& e = *r.explanation;
    Json x;
    x["outcome"] = outcome_name(e.outcome);
    x["headline"] = e.headline();
    x["best"] = e.best();
    x["match"] = e.match_rule;
    x["rows"] = e.rows;
    x["wrong_rows"] = e.wrong_rows;
    x["pad_slots"] = e.pad_slots;
    x["wrong_pad_slots"] = e.wrong_pad_slots;
    x["wrong_o_rows"] = e.wrong_o_rows;  // SDPA: of the wrong rows, those whose O / LSE differs
    x["wrong_lse_rows"] = e.wrong_lse_rows;
    auto& ranked = x["ranked"] = Json::array();
    for (size_t i = 0; i < e.ranked.size() && i < 5; ++i) {
      const auto& k = e.ranked[i];
      ranked.push_back({{"model", k.model}, {"catalog", k.catalog}, {"reproduced", k.reproduced},
                        {"broken", k.broken}, {"pad_reproduced", k.pad_reproduced}, {"pad_broken", k.pad_broken},
                        {"o_reproduced", k.o_reproduced}, {"lse_reproduced", k.lse_reproduced}});
    }
    x["text"] = format_explanation(e, 3);
    c["explanation"] = std::move(x);
  } else {
    c["explanation"] = nullptr;
  }
  c["seconds"] = {{"backend", r.backend_seconds}, {"reference", r.ref_seconds},
                  {"inputs", r.inputs_seconds},   {"run_setup", r.run_setup_seconds},
                  {"judge", r.judge_seconds},     {"gate_check", r.gate_check_seconds}};
  c["reference_ran"] = r.reference_ran;
  c["report_dir"] = report_dir.empty() ? Json(nullptr) : Json(report_dir);
  c["text"] = format_result(r);
  return c;
}

// Strings are sanitized where they enter a result; `replace` keeps one that was not from ending the output.
std::string dump(const Json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string case_json(const CaseResult& r, const std::string& report_dir, int indent) {
  return dump(case_object(r, report_dir), indent);
}

std::string report_json(const std::vector<CaseResult>& results, const ReportStatus& status,
                        const std::string& report_dir) {
  Json j;
  j["schema"] = "attn-oracle.report";
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = {{"name", "attn-oracle"}, {"version", tool_version()}};
  j["status"] = status.signal ? "interrupted" : "complete";
  if (status.signal) j["signal"] = signal_name(status.signal);
  auto& cases = j["cases"] = Json::array();
  for (const auto& r : results) cases.push_back(case_object(r, report_dir));
  const VerdictTally n = tally(results);
  j["summary"] = Json::object();
  for (auto k : {Verdict::Pass, Verdict::Fail, Verdict::Skipped, Verdict::Error, Verdict::Weak})
    j["summary"][verdict_name(k)] = n[k];
  return dump(j, 2) + "\n";
}

}  // namespace ao
