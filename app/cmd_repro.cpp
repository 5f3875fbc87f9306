// `attn-oracle repro [case] [--backend B ...]`: one case on each backend vs the reference, each result
// printed (format_result), reports via --report-dir (checked and locked before anything runs). Without
// a case and a backend it runs the demo: the seed case under cpu-ref and under the top-left-mask bug model.
// SIGINT/SIGTERM/SIGHUP: stops after the backend in flight (its process group killed, its case dir
// removed), writes the reports, exits 128 + signal.
#include <csignal>
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/report/dir.h"
#include "commands.h"

namespace ao {
namespace {

struct ReproArgs {
  std::vector<std::string> case_args, backends;
  std::string vs = "cpu-ref", report_dir;
  bool report_dir_given = false, no_explain = false;
};

int run_repro(ReproArgs a, const LayoutLimits& lim) {
  const bool demo = a.case_args.empty() && a.backends.empty();
  const Case c = parse_case(a.case_args.empty() ? kDefaultCase : join_case_args(a.case_args));
  if (demo) {
    std::cout << "attn-oracle demo: the seed's cp=32 rank=31 indexer case (reduced dims) under the exact\n"
                 "reference and under the top-left-mask bug model (PR #14), both checked against cpu-ref.\n\n";
    a.backends = {"cpu-ref", "cpu-bug:topleft-cp"};
  }
  if (a.backends.empty()) a.backends = {"cpu-ref"};
  install_interrupt_handlers();
  auto ref = make_backend(a.vs);
  std::unique_ptr<ReportDir> report;
  if (a.report_dir_given) report = std::make_unique<ReportDir>(a.report_dir);
  std::vector<CaseResult> results;
  for (const auto& b : a.backends) {
    if (interrupted()) break;
    auto be = make_backend(b);
    results.push_back(run_case(c, *be, *ref, lim, report != nullptr, !a.no_explain));
    std::cout << format_result(results.back()) << "\n" << std::flush;
  }
  if (report) report->write(results, {interrupted()});
  if (const int sig = interrupted()) {
    const std::string note = fmt::format("repro: INTERRUPTED by {} after {} of {} backends\n", signal_name(sig),
                                         results.size(), a.backends.size());
    (sig == SIGPIPE ? std::cerr : std::cout) << note << std::flush;  // SIGPIPE: stdout is gone
    return 128 + sig;
  }
  if (demo) {
    const bool ok = results[0].verdict.kind == Verdict::Pass && results[1].verdict.kind == Verdict::Fail;
    std::cout << (ok ? "demo: cpu-ref passed and the bug model was caught.\n"
                     : "demo: UNEXPECTED verdicts (cpu-ref must pass, the bug model must fail).\n");
    return ok ? 0 : 1;
  }
  return exit_code(results);
}

const CommandRegistrar reg(
    [](CLI::App& app, const LayoutLimits& lim) {
      auto a = std::make_shared<ReproArgs>();
      auto* sub = app.add_subcommand("repro", "run one case (a case line, as one or several arguments)");
      sub->add_option("case", a->case_args, "key=value ... (default: the embedded seed case, as a demo)");
      sub->add_option("--backend,-b", a->backends, "backend(s) under test (repeatable)");
      sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
      auto* rd =
          sub->add_option("--report-dir", a->report_dir, "write report.json / report.md / report.xml / report.html here");
      sub->add_flag("--no-explain", a->no_explain,
                    "do not explain failing cases (explain runs every bug model on them)");
      return AppCommand{sub, [a, rd, &lim] {
                          a->report_dir_given = rd->count() > 0;
                          return run_repro(*a, lim);
                        }};
    },
    HelpRank::RunCase);

}  // namespace
}  // namespace ao
