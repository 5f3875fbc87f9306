// attn-oracle: command-line front end. Exit codes: 0 pass, 1 fail, 2 bad input, 125 skipped.
#include <csignal>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/internal/interrupt.h"
#include "commands.h"
#include "layout_text.h"
#include "attn_oracle/reports/report_dir.h"

namespace ao {

std::string join_case_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

namespace {

int cmd_repro(const std::vector<std::string>& case_args, std::vector<std::string> backends, const std::string& vs,
              const std::string* report_dir, bool explain, const LayoutLimits& lim) {
  const bool demo = case_args.empty() && backends.empty();
  const Case c = parse_case(case_args.empty() ? kDefaultCase : join_case_args(case_args));
  if (demo) {
    std::cout << "attn-oracle demo: the seed's cp=32 rank=31 indexer case (reduced dims) under the exact\n"
                 "reference and under the top-left-mask bug model (PR #14), both checked against cpu-ref.\n\n";
    backends = {"cpu-ref", "cpu-bug:topleft-cp"};
  }
  if (backends.empty()) backends = {"cpu-ref"};
  // SIGINT/SIGTERM/SIGHUP: stop after the backend in flight (its process group killed, its case dir removed).
  install_interrupt_handlers();
  auto ref = make_backend(vs);
  std::unique_ptr<ReportDir> report;  // checked and locked before anything runs
  if (report_dir) report = std::make_unique<ReportDir>(*report_dir);
  std::vector<CaseResult> results;
  for (const auto& b : backends) {
    if (interrupted()) break;
    auto be = make_backend(b);
    results.push_back(run_case(c, *be, *ref, lim, report != nullptr, explain));
    std::cout << format_result(results.back()) << "\n" << std::flush;
  }
  if (report) report->write(results, {interrupted()});
  if (const int sig = interrupted()) {
    const std::string note = fmt::format("repro: INTERRUPTED by {} after {} of {} backends\n", signal_name(sig),
                                         results.size(), backends.size());
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

}  // namespace
}  // namespace ao

int main(int argc, char** argv) {
  using namespace ao;
  install_write_error_handlers();  // a closed stdout or a file size limit: a write error, not a death
  set_cli_argv(argc, argv);
  CLI::App app{"attn-oracle: correctness oracle and differential fuzzer for attention kernels"};
  app.require_subcommand(1);
  LayoutLimits lim;
  double max_mem_gib = double(lim.max_bytes) / double(1 << 30);
  app.add_option("--max-mem", max_mem_gib,
                 "refuse cases whose estimated peak memory (inputs, both output sets, row metadata, reference "
                 "working set) exceeds this many GiB")
      ->capture_default_str()
      ->check(finite_number(0.001, 1e9));  // 1 MiB .. about 1 EiB: the byte count fits int64

  std::vector<std::string> case_args, backends;
  std::string vs = "cpu-ref", report_dir;
  auto* repro = app.add_subcommand("repro", "run one case (a case line, as one or several arguments)");
  repro->add_option("case", case_args, "key=value ... (default: the embedded seed case, as a demo)");
  repro->add_option("--backend,-b", backends, "backend(s) under test (repeatable)");
  repro->add_option("--vs", vs, "reference backend")->capture_default_str();
  auto* report_dir_opt =
      repro->add_option("--report-dir", report_dir, "write report.json / report.md / report.xml / report.html here");
  bool no_explain = false;
  repro->add_flag("--no-explain", no_explain, "do not explain failing cases (explain runs every bug model on them)");

  std::vector<std::string> show_args;
  auto* show = app.add_subcommand("show", "print a case's layout: segments, causal offsets, key ranges, pad slots");
  show->add_option("case", show_args, "key=value ...")->required();

  auto* list = app.add_subcommand("backends", "list backends, whether each can run here, their knobs and defects");
  bool defects = false;
  list->add_flag("--defects", defects, "list each defect id with the backends that re-create it");

  std::vector<AppCommand> extra = extra_commands(app, lim);  // cmd_*.cpp

  // A subcommand's own code for bad input (bisect-run: 128, since 2 would blame the commit).
  auto bad_input_code = [&] {
    for (const auto& cmd : extra)
      if (cmd.sub->parsed()) return cmd.bad_input_code;
    for (int i = 1; i < argc; ++i)  // the parse may stop before the subcommand is reached
      for (const auto& cmd : extra)
        if (cmd.sub->get_name() == argv[i]) return cmd.bad_input_code;
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : bad_input_code();
  }
  lim.max_bytes = int64_t(max_mem_gib * double(1 << 30));
  try {
    if (*repro)
      return cmd_repro(case_args, backends, vs, report_dir_opt->count() ? &report_dir : nullptr, !no_explain, lim);
    if (*show) {
      std::cout << describe_layout(make_layout(parse_case(join_case_args(show_args)), lim, LayoutMode::Describe));
      return 0;
    }
    if (*list) {
      std::cout << (defects ? format_defect_table() : format_backend_list());
      return 0;
    }
    for (auto& cmd : extra)
      if (*cmd.sub) {
        // Commands that run backends stop cleanly on SIGINT/SIGTERM/SIGHUP (128 + signal): the backend's
        // processes killed, its case dir removed, the reports written. Shrink installs its own; the
        // others keep the default action, so Ctrl-C ends them at once.
        const std::string name = cmd.sub->get_name();
        if (name == "gate" || name == "fuzz" || name == "explain") install_interrupt_handlers();
        return cmd.run();
      }
  } catch (const BadInput& e) {
    std::cerr << "attn-oracle: " << e.what() << "\n";
    return bad_input_code();
  } catch (const std::exception& e) {
    std::cerr << "attn-oracle: error: " << e.what() << "\n";
    return bad_input_code();
  }
  return 2;
}
