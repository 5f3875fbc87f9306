// `attn-oracle shrink <case> --backend B`: reduces a failing case. Prints the minimal case line on
// stdout (pipeable) and the steps/runs and failing metrics on stderr. With `--choices` (the text after
// `# choices:` in a found case file) it shrinks the choice sequence (choice_shrink.h) and prints the
// minimal one on stderr; a hand-written line goes through the structural shrinker (shrink.h). Exit 0 when a failing
// case was shrunk, 1 when the given case does not fail with B (nothing to shrink), 2 bad input,
// 128 + signal when SIGINT/SIGTERM stopped it (the smallest failing case so far is still printed).
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/choice_shrink.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/fuzz/shrink.h"
#include "commands.h"

namespace ao {
namespace {

struct ShrinkArgs {
  std::vector<std::string> case_args;
  std::string backend, vs = "cpu-ref", choices;
  int runs = 300;
};

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<ShrinkArgs>();
  auto* sub = app.add_subcommand("shrink", "reduce a failing case while it still fails with the backend");
  sub->add_option("case", a->case_args, "key=value ...")->required();
  sub->add_option("--backend,-b", a->backend, "backend the case fails with")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  sub->add_option("--runs", a->runs, "backend runs the shrinker may spend")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  sub->add_option("--choices", a->choices,
                  "the case's choice sequence ('dims=.. op=.. n n ...', as after '# choices:' in a found case)");
  return AppCommand{sub, [a, &lim] {
                      const Case c = parse_case(join_case_args(a->case_args));
                      make_layout(c, lim, LayoutMode::Describe);
                      std::optional<RecordedChoices> rc;
                      if (!a->choices.empty()) {
                        rc = parse_choices_comment("# choices: " + a->choices);
                        const Case replayed = replay_choices(rc->seq, rc->gen);
                        if (!(replayed == c))
                          throw BadInput("choices", a->choices,
                                          "replays to '" + print_case(replayed) + "', not to the given case");
                      }
                      auto be = make_backend(a->backend);
                      auto vs = make_backend(a->vs);
                      install_interrupt_handlers();
                      const CaseResult r = run_case(c, *be, *vs, lim);
                      if (const int sig = interrupted(); sig != 0) {
                        std::cerr << fmt::format("shrink: interrupted by signal {} before the case finished\n", sig);
                        return 128 + sig;
                      }
                      if (r.verdict.kind != Verdict::Fail && r.verdict.kind != Verdict::Error) {
                        std::cerr << fmt::format("shrink: the case does not fail with {} (verdict {}{}); nothing to shrink\n",
                                                 a->backend, verdict_name(r.verdict.kind),
                                                 r.verdict.reason.empty() ? "" : ": " + r.verdict.reason);
                        return 1;
                      }
                      ShrinkOptions so;
                      so.max_runs = a->runs;
                      so.lim = lim;
                      CaseResult fin = r;  // the minimal case's result (the predicate keeps the latest failing one)
                      ChoiceShrinkResult s;
                      if (rc) {
                        s = shrink_choices(rc->seq, rc->gen, fails_like(r, *be, *vs, lim, &fin), so);
                      } else {
                        static_cast<ShrinkResult&>(s) = shrink_case(c, fails_like(r, *be, *vs, lim, &fin), so);
                      }
                      std::cerr << fmt::format("shrink: {} steps ({} runs{}); original failing: {}\n  minimal failing: {}\n",
                                               s.steps, s.runs, shrink_stop_note(s.stop),
                                               failing_summary(r.verdict), failing_summary(fin.verdict));
                      if (rc) std::cerr << choices_comment({rc->gen, s.choices}) << "\n";
                      std::cerr << std::flush;
                      std::cout << print_case(s.minimal) << std::endl;
                      return s.stop == ShrinkStop::Interrupted ? 128 + interrupted() : 0;
                    }};
});

}  // namespace
}  // namespace ao
