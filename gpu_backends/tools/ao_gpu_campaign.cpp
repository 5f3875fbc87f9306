// ao-gpu-campaign: runs a plan of (expectation, backend, case) lines against the CPU oracle and writes
// a JSON report with verdicts, every metric, per-segment (CP chunk) verdicts and GPU phase timings.
// Plan lines: `expect=pass|fail|fail:<metric> backend=<spec> <case line>`; `#` comments. fail:<metric>
// holds only when that gated metric is among the failed ones (a defect caught for the stated reason).
// Exit 0 when every expectation held, 1 otherwise, 2 on a bad plan line.
//   ao-gpu-campaign --plan plan.txt --json out.json [--repeat N] [--max-mem GiB]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/pipeline/trial.h"
#include "gpu_backend.h"
#include "segment_report.h"

using nlohmann::json;

namespace {

struct PlanLine {
  std::string expect, backend, case_line;
  std::string metric;  // expect=fail:<metric>: the gated metric that must fail
  int line_no = 0;
};

std::vector<PlanLine> read_plan(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ao::BadInput("--plan", path, "cannot open");
  std::vector<PlanLine> out;
  std::string line;
  int no = 0;
  while (std::getline(f, line)) {
    ++no;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream is(line);
    std::string tok, rest;
    PlanLine p;
    p.line_no = no;
    while (is >> tok) {
      if (tok.rfind("expect=", 0) == 0) p.expect = tok.substr(7);
      else if (tok.rfind("backend=", 0) == 0) p.backend = tok.substr(8);
      else rest += (rest.empty() ? "" : " ") + tok;
    }
    if (rest.empty() && p.backend.empty()) continue;
    if (p.expect.rfind("fail:", 0) == 0) {
      p.metric = p.expect.substr(5);
      p.expect = "fail";
      if (p.metric.empty())
        throw ao::BadInput("expect", "fail:", fmt::format("{}:{}: fail: needs a metric name", path, no));
    }
    if (p.expect != "pass" && p.expect != "fail")
      throw ao::BadInput("expect", p.expect, fmt::format("{}:{}: needs expect=pass or expect=fail", path, no));
    if (p.backend.empty()) throw ao::BadInput("backend", "", fmt::format("{}:{}: needs backend=<spec>", path, no));
    p.case_line = rest;
    out.push_back(p);
  }
  return out;
}

json metrics_json(const ao::Verdict& v) {
  json m = json::object();
  for (const auto& x : v.metrics) m[x.name] = x.value;
  return m;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string plan_path, json_path;
  int repeat = 0;
  double max_mem = 16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::cerr << a << " needs a value\n"; std::exit(2); }
      return argv[++i];
    };
    if (a == "--plan") plan_path = next();
    else if (a == "--json") json_path = next();
    else if (a == "--repeat") repeat = std::stoi(next());
    else if (a == "--max-mem") max_mem = std::stod(next());
    else { std::cerr << "unknown argument " << a << "\n"; return 2; }
  }
  if (plan_path.empty()) { std::cerr << "usage: ao-gpu-campaign --plan FILE [--json OUT] [--repeat N]\n"; return 2; }
  ao::LayoutLimits lim;
  lim.max_bytes = int64_t(max_mem * double(int64_t(1) << 30));

  std::vector<PlanLine> plan;
  try {
    plan = read_plan(plan_path);
  } catch (const ao::BadInput& e) {
    std::cerr << "ao-gpu-campaign: " << e.what() << "\n";
    return 2;
  }
  json report;
  report["tool"] = "ao-gpu-campaign";
  report["device"] = ao::gpu::device_description();
  report["plan"] = plan_path;
  json results = json::array();
  int unexpected = 0;
  auto ref = ao::make_backend("cpu-ref");
  for (const auto& pl : plan) {
    json r;
    r["line"] = pl.line_no;
    r["expect"] = pl.expect;
    r["backend"] = pl.backend;
    try {
      const ao::Case c = ao::parse_case(pl.case_line);
      r["case"] = ao::print_case(c);
      auto be = ao::make_backend(pl.backend);
      auto t0 = std::chrono::steady_clock::now();
      ao::Trial trial(c, lim);
      r["host_inputs_ms"] = ms_since(t0);
      const ao::TrialRun got = trial.run(*be);
      r["backend_s"] = got.status.seconds;
      auto* gb = dynamic_cast<ao::gpu::GpuBackend*>(be.get());
      auto times_json = [](const ao::gpu::PhaseTimes& t) {
        return json{{"inputs_ms", t.inputs_ms}, {"compute_ms", t.compute_ms}, {"select_ms", t.select_ms},
                    {"transfer_ms", t.transfer_ms}, {"total_ms", t.total_ms}};
      };
      if (gb) r["gpu_ms"] = times_json(gb->last_times());
      std::string verdict, reason;
      bool metric_failed = false;
      if (auto none = ao::Trial::unjudged(got)) {
        verdict = ao::verdict_name(none->kind);
        reason = none->reason;
      } else {
        const ao::TrialRun refo = trial.run(*ref);
        r["reference_s"] = refo.status.seconds;
        const ao::Verdict v = trial.judge(got, refo);
        verdict = ao::verdict_name(v.kind);
        reason = v.reason;
        r["metrics"] = metrics_json(v);
        if (!pl.metric.empty()) {
          const ao::Metric* m = v.find(pl.metric);
          if (!m || !m->gated()) throw ao::BadInput("expect", "fail:" + pl.metric, "no gated metric of that name");
          metric_failed = m->failed;
        }
        json segs = json::array();
        for (const auto& sv : ao::gpu::segment_verdicts(trial, got, refo)) {
          json s{{"doc", sv.doc}, {"chunk", sv.chunk}, {"pos0", sv.pos0}, {"rows_checked", sv.rows_checked},
                 {"verdict", ao::verdict_name(sv.verdict.kind)}, {"reason", sv.verdict.reason}};
          for (const auto& m : sv.verdict.metrics)
            if (m.headline) s[m.name] = m.value;
          segs.push_back(s);
        }
        r["segments"] = segs;
        if (gb && repeat > 0) {  // timing: the same run again, outputs discarded
          std::vector<double> tot, comp, sel;
          for (int i = 0; i < repeat; ++i) {
            if (!trial.run(*be).ok()) break;
            tot.push_back(gb->last_times().total_ms);
            comp.push_back(gb->last_times().compute_ms);
            sel.push_back(gb->last_times().select_ms);
          }
          r["repeat"] = json{{"n", tot.size()}, {"total_ms_median", median(tot)},
                             {"compute_ms_median", median(comp)}, {"select_ms_median", median(sel)}};
        }
      }
      r["verdict"] = verdict;
      r["reason"] = reason;
      const bool ok = (pl.expect == "pass" && verdict == "pass") ||
                      (pl.expect == "fail" && verdict == "fail" && (pl.metric.empty() || metric_failed));
      if (!pl.metric.empty()) r["expect_metric"] = pl.metric;
      r["as_expected"] = ok;
      unexpected += !ok;
      std::cout << fmt::format("{:<10} {:<8} expect {:<4} {:<40} {}{}\n", ok ? "ok" : "UNEXPECTED", verdict,
                               pl.metric.empty() ? pl.expect : "fail:" + pl.metric,
                               pl.backend, r["case"].get<std::string>(), reason.empty() ? "" : "  (" + reason + ")");
    } catch (const std::exception& e) {
      r["verdict"] = "error";
      r["reason"] = e.what();
      r["as_expected"] = false;
      ++unexpected;
      std::cout << fmt::format("UNEXPECTED error {} : {}\n", pl.backend, e.what());
    }
    std::cout.flush();
    results.push_back(r);
    if (!json_path.empty()) {  // rewritten after every line: a killed run keeps what it did
      report["results"] = results;
      report["unexpected"] = unexpected;
      std::ofstream(json_path) << report.dump(1) << "\n";
    }
  }
  std::cout << fmt::format("{} lines, {} not as expected\n", plan.size(), unexpected);
  return unexpected ? 1 : 0;
}
