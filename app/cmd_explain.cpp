// `attn-oracle explain <case> --backend B [--vs R]`: which known defect (bug model) reproduces B's
// outputs on this case (explain.h). Exit 0: explained, or nothing to explain (B passes); 1: B fails and
// no model reproduces it (or B errored: nothing to score); 2: bad input; 125: B skipped the case;
// 128 + signal: stopped by SIGINT/SIGTERM/SIGHUP (SIGPIPE: stdout closed).
#include <csignal>
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/pipeline/explain.h"
#include "attn_oracle/report/report.h"
#include "commands.h"

namespace ao {
namespace {

struct ExplainArgs {
  std::vector<std::string> case_args;
  std::string backend, vs = "cpu-ref", match = "auto";
  size_t top = 5;
};

// A stop (SIGINT/SIGTERM/SIGHUP, or a closed stdout) while a backend ran: its processes were killed and its
// case dir removed; nothing is judged on a run cut short.
int stopped(int sig) {
  (sig == SIGPIPE ? std::cerr : std::cout) << fmt::format("explain: INTERRUPTED by {}\n", signal_name(sig))
                                           << std::flush;
  return 128 + sig;
}

int run_explain(const ExplainArgs& a, const LayoutLimits& lim) {
  install_interrupt_handlers();
  const Case c = parse_case(join_case_args(a.case_args));
  auto be = make_backend(a.backend);
  auto ref_be = make_backend(a.vs);
  Trial t(c, lim);
  std::cout << fmt::format("case:    {}\nbackend: {}   vs: {}\n", print_case(c), be->name(), ref_be->name());
  TrialRun got = t.run(*be);
  if (const int sig = interrupted()) return stopped(sig);
  if (auto v = Trial::unjudged(got)) {
    std::cout << fmt::format("verdict: {} ({})\ncannot explain: {} produced no outputs to score\n",
                             verdict_label(v->kind), v->reason, got.backend);
    return v->kind == Verdict::Skipped ? 125 : 1;
  }
  TrialRun ref = t.run(*ref_be);
  if (const int sig = interrupted()) return stopped(sig);
  const Verdict v = t.judge(got, ref);
  std::cout << fmt::format("verdict: {}{}\n", verdict_label(v.kind), v.reason.empty() ? "" : " (" + v.reason + ")");
  if (v.kind == Verdict::Pass || v.kind == Verdict::Weak) {  // weak: no metric failed either
    std::cout << fmt::format("nothing to explain: {} {} this case\n", got.backend,
                             v.kind == Verdict::Pass ? "passes" : "fails no metric of");
    return 0;
  }
  if (v.kind != Verdict::Fail) {
    std::cout << "cannot explain: the case could not be judged\n";
    return 1;
  }
  const ExplainMatch m = a.match == "bitwise" ? ExplainMatch::Bitwise
                         : a.match == "kernel" ? ExplainMatch::Kernel
                                               : ExplainMatch::Auto;
  const Explanation e = explain_trial(t, got, ref, m);
  if (const int sig = interrupted()) return stopped(sig);
  std::cout << format_explanation(e, a.top);
  return e.outcome == Explanation::NotExplained ? 1 : 0;
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<ExplainArgs>();
  auto* sub = app.add_subcommand(
      "explain", "rank the bug models by how much of a failing backend's output each reproduces exactly");
  sub->add_option("case", a->case_args, "key=value ...")->required();
  sub->add_option("--backend,-b", a->backend, "the backend under test")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  sub->add_option("--match", a->match,
                  "row equality: bitwise, kernel (a small documented tolerance for real kernels), or auto "
                  "(bitwise for cpu-ref/cpu-bug:*, kernel otherwise)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bitwise", "kernel"}));
  sub->add_option("--top", a->top, "ranked models to list")->capture_default_str()->check(CLI::Range(1, 1000));
  return AppCommand{sub, [a, &lim] { return run_explain(*a, lim); }};
});

}  // namespace
}  // namespace ao
