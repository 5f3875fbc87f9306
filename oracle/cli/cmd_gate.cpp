// `attn-oracle gate <files|dirs> --backend B`: the CI regression gate. Every case line of the corpus is
// parsed and validated first (a bad line: `file:line: ...`, exit 2, nothing run), then replayed on
// each backend vs the reference. Exit 0 only if every case that ran passed; skipped cases are listed
// and, with --require-run, fail the gate; 125 if nothing ran at all. Reports via --report-dir.
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/case_file.h"
#include "commands.h"

namespace ao {
namespace {

struct GateArgs {
  std::vector<std::string> paths, backends;
  std::string vs = "cpu-ref", report_dir;
  bool require_run = false, quiet = false;
};

int run_gate(const GateArgs& a, const LayoutLimits& lim) {
  std::vector<CaseEntry> entries;
  try {
    entries = read_case_files(collect_case_files(a.paths), lim);
  } catch (const CaseFileError& e) {
    std::cerr << "attn-oracle gate: " << e.what() << "\n";
    return 2;
  }
  if (entries.empty()) {
    std::cerr << "attn-oracle gate: no cases found in the given files\n";
    return 2;
  }
  auto vs = make_backend(a.vs);
  std::vector<CaseResult> results;
  std::vector<std::string> where;
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& spec : a.backends) {
    auto be = make_backend(spec);
    for (const auto& e : entries) {
      results.push_back(run_case(e.c, *be, *vs, lim, !a.report_dir.empty()));  // artifacts: report.html
      const auto& r = results.back();
      where.push_back(fmt::format("{}:{}", e.file, e.line));
      std::string v = verdict_name(r.verdict.kind);
      for (auto& ch : v) ch = char(std::toupper(ch));
      if (r.verdict.kind == Verdict::Pass) ++passed;
      else if (r.verdict.kind == Verdict::Skipped) ++skipped;
      else ++failed;
      if (!a.quiet || r.verdict.kind != Verdict::Pass)
        std::cout << fmt::format("{:<7} {}  [{}]  {:.2f}s  {}{}\n", v, where.back(), spec,
                                 r.backend_seconds + r.ref_seconds, r.case_line,
                                 r.verdict.reason.empty() ? "" : "  (" + r.verdict.reason + ")");
    }
  }
  if (!a.report_dir.empty()) write_reports(a.report_dir, results);
  if (skipped > 0) {
    std::cout << fmt::format("skipped ({}{}):\n", skipped, a.require_run ? ", --require-run: they fail the gate" : "");
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].verdict.kind == Verdict::Skipped)
        std::cout << fmt::format("  {}  [{}]  {}\n", where[i], results[i].backend, results[i].verdict.reason);
  }
  const int code = failed > 0 || (a.require_run && skipped > 0) ? 1 : passed == 0 ? 125 : 0;
  std::cout << fmt::format("gate: {} cases x {} backend(s): {} passed, {} failed, {} skipped -> {}\n",
                           entries.size(), a.backends.size(), passed, failed, skipped,
                           code == 0 ? "PASS" : code == 125 ? "NOTHING RAN" : "FAIL");
  return code;
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<GateArgs>();
  auto* sub = app.add_subcommand("gate", "replay corpus files/directories (*.case); exit 0 only if all passed");
  sub->add_option("paths", a->paths, "case files or directories (searched recursively for *.case)")->required();
  sub->add_option("--backend,-b", a->backends, "backend(s) under test (repeatable)")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  sub->add_option("--report-dir", a->report_dir, "write report.json / report.md / report.xml here");
  sub->add_flag("--require-run", a->require_run, "skipped cases fail the gate");
  sub->add_flag("--quiet,-q", a->quiet, "print only cases that did not pass");
  return AppCommand{sub, [a, &lim] { return run_gate(*a, lim); }};
});

}  // namespace
}  // namespace ao
