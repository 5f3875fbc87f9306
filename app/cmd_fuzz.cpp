// `attn-oracle fuzz`: a generated-case campaign against a backend (campaign.h); shrinks each failure
// and saves one smallest case per failure signature as <out>/<hash>.case. Exit 1 if anything failed,
// 125 if nothing ran, else 0; 128 + signal when SIGINT/SIGTERM stopped it (after the summary). A case
// that cannot be saved is printed at once (stderr) and in the summary; the campaign goes on.
#include <unistd.h>

#include <iostream>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/option_ranges.h"
#include "commands.h"

namespace ao {
namespace {

struct FuzzArgs {
  std::string backend, vs = "cpu-ref", budget = "60s", shard = "0/1", out = "corpus/found", dims = "small",
              op = "any", pass = "any";
  uint64_t seed = 1;
  int shrink_runs = 300, max_failures = 0, confirm_runs = 3;
  bool no_save = false;
};

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<FuzzArgs>();
  auto* sub = app.add_subcommand("fuzz", "run generated edge-biased cases; shrink and save every new failure");
  sub->add_option("--backend,-b", a->backend, "backend under test")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  sub->add_option("--seed", a->seed, "campaign seed (case i of a seed is always the same case)")
      ->capture_default_str()
      ->check(u64_number());
  sub->add_option("--budget", a->budget, "60s / 5m / 1h (time) or N (cases)")->capture_default_str();
  sub->add_option("--shard", a->shard, "i/n: run case numbers i, i+n, i+2n, ... (job arrays)")->capture_default_str();
  sub->add_option("--out", a->out, "directory for shrunk failures (<hash>.case)")->capture_default_str();
  sub->add_flag("--no-save", a->no_save, "do not write found cases");
  sub->add_option("--dims", a->dims, "small (CPU-fast) | glm (32 heads x 128, topk 2048) | deepseek (glm with 64 indexer heads, topk 128..2048 in multiples of 128) | tiny (libFuzzer-sized) | wide (head dims 264..576, large-tile kernels)")->capture_default_str();
  sub->add_option("--op", a->op, "indexer | sdpa | any")->capture_default_str();
  sub->add_option("--pass", a->pass, "fwd | bwd | any (bwd: every case a backward case, for a backward kernel)")
      ->capture_default_str();
  sub->add_option("--shrink-runs", a->shrink_runs, "backend runs the shrinker may spend per failure")
      ->capture_default_str()
      ->check(CLI::Range(int(kShrinkRuns.lo), int(kShrinkRuns.hi)));
  sub->add_option("--max-failures", a->max_failures, "stop after this many failing cases (0: whole budget)")
      ->capture_default_str()
      ->check(CLI::Range(int(kMaxFailures.lo), int(kMaxFailures.hi)));
  sub->add_option("--confirm-runs", a->confirm_runs,
                  "re-runs of each failure (and of its shrunk case) before it is kept; one that does not fail "
                  "every time is marked nondeterministic and kept unshrunk")
      ->capture_default_str()
      ->check(CLI::Range(int(kConfirmRuns.lo), int(kConfirmRuns.hi)));
  return AppCommand{sub, [a, &lim] {
                      CampaignOptions o;
                      o.backend = a->backend;
                      o.vs = a->vs;
                      o.seed = a->seed;
                      o.budget = parse_budget(a->budget);
                      std::tie(o.shard, o.shards) = parse_shard(a->shard);
                      o.out_dir = a->no_save ? "" : a->out;
                      o.gen.dims = parse_dims(a->dims);
                      o.gen.op = parse_op_filter(a->op);
                      o.gen.pass = parse_pass_filter(a->pass);
                      o.shrink_runs = a->shrink_runs;
                      o.max_failures = a->max_failures;
                      o.confirm_runs = a->confirm_runs;
                      o.lim = lim;
                      o.progress = isatty(STDERR_FILENO) != 0;
                      install_interrupt_handlers();
                      const CampaignSummary s = run_campaign(o, std::cerr);
                      std::cout << format_summary(o, s) << std::flush;
                      return s.interrupted != 0 ? 128 + s.interrupted : campaign_exit_code(s);
                    }};
});

}  // namespace
}  // namespace ao
