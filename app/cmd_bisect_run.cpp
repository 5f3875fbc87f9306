// `attn-oracle bisect-run <case line | case file> --backend B`: one `git bisect run` step. Prints one
// line and exits 0 good / 1 bad / 125 skip; the cases run in a child process (bisect.h) so a crash or
// a hang of the backend becomes 1 (or 125 with --crash-is-skip), never a signal death that would
// abort the bisect. Bad input (an invalid case line or file) exits 128, which stops `git bisect run`
// instead of blaming a commit; so do its command-line errors (AppCommand::bad_input_code, commands.h).
#include <filesystem>
#include <iostream>

#include "attn_oracle/fuzz/bisect.h"
#include "attn_oracle/fuzz/case_file.h"
#include "commands.h"

namespace ao {
namespace {

struct BisectArgs {
  std::vector<std::string> case_args;
  std::string backend, vs = "cpu-ref";
  double timeout = 600;
  bool crash_is_skip = false;
};

int run_bisect(const BisectArgs& a, const LayoutLimits& lim) {
  std::vector<Case> cases;
  try {
    if (a.case_args.size() == 1 && std::filesystem::exists(a.case_args[0])) {
      for (auto& e : read_case_files(collect_case_files(a.case_args), lim)) cases.push_back(e.c);
    } else {
      cases.push_back(parse_case(join_case_args(a.case_args)));
      make_layout(cases.back(), lim, LayoutMode::Describe);
    }
  } catch (const std::exception& e) {
    std::cout << "abort: " << e.what() << "\n";
    return kBisectAbort;
  }
  if (cases.empty()) {
    std::cout << "abort: no cases given\n";
    return kBisectAbort;
  }
  BisectOptions o;
  o.backend = a.backend;
  o.vs = a.vs;
  o.timeout_seconds = a.timeout;
  o.crash_is_skip = a.crash_is_skip;
  o.lim = lim;
  const BisectOutcome out = bisect_step(cases, o);
  std::cout << out.line << "\n";
  return out.code;
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<BisectArgs>();
  auto* sub = app.add_subcommand("bisect-run", "one git-bisect step: exit 0 good, 1 bad, 125 skip (128: bad input)");
  sub->add_option("case", a->case_args, "a case line (key=value ...) or a case file")->required();
  sub->add_option("--backend,-b", a->backend, "backend under test")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  sub->add_option("--timeout", a->timeout, "seconds before a hanging backend counts as bad (0: none)")
      ->capture_default_str()
      ->check(finite_number(0, 1e9));
  sub->add_flag("--crash-is-skip", a->crash_is_skip, "a crash exits 125 (skip) instead of 1 (bad)");
  return AppCommand{sub, [a, &lim] { return run_bisect(*a, lim); }, kBisectAbort};
});

}  // namespace
}  // namespace ao
