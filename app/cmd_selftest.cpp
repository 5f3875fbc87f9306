// `attn-oracle selftest`: the kill matrix (selftest.h). Exit 0 when every observable bug model is
// detected and cpu-ref passes everywhere, 1 otherwise.
#include <iostream>

#include "attn_oracle/pipeline/selftest.h"
#include "commands.h"

namespace ao {
namespace {

struct SelftestOpts {
  bool verbose = false;
  uint64_t seed_offset = 0;
  int seeds = 1;
};

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
  auto opts = std::make_shared<SelftestOpts>();
  auto* sub = app.add_subcommand("selftest", "kill matrix: every bug model over built-in layout families");
  sub->add_flag("--verbose,-v", opts->verbose, "list every cell's failing metrics");
  sub->add_option("--seed-offset", opts->seed_offset, "added to every family's seed")->capture_default_str();
  sub->add_option("--seeds", opts->seeds, "run the matrix for this many consecutive seed offsets")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  return AppCommand{sub, [opts] {
                      bool ok = true;
                      for (int i = 0; i < opts->seeds; ++i) {
                        const uint64_t off = opts->seed_offset + uint64_t(i);
                        if (opts->seeds > 1) std::cout << "== seed offset " << off << "\n";
                        const auto r = run_selftest(selftest_families(), off);
                        std::cout << format_selftest(r, opts->verbose) << std::flush;
                        ok &= r.ok();
                      }
                      return ok ? 0 : 1;
                    }};
});

}  // namespace
}  // namespace ao
