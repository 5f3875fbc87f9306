// attn-oracle: command-line front end. Exit codes: 0 pass, 1 fail, 2 bad input, 125 skipped.
// Every subcommand registers itself (commands.h, one cmd_*.cpp each); main() parses and runs the one given.
#include <iostream>

#include <CLI/CLI.hpp>

#include "attn_oracle/pipeline/memory_budget.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/option_ranges.h"
#include "commands.h"

int main(int argc, char** argv) {
  using namespace ao;
  install_fatal_signal_report();   // an in-process backend's crash names the case it ran
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
      ->check(finite_number(kMaxMemGib.lo, kMaxMemGib.hi));  // the one table (option_ranges.h)

  const std::vector<AppCommand> commands = registered_commands(app, lim);

  // A subcommand's own code for bad input (bisect-run: 128, since 2 would blame the commit).
  auto bad_input_code = [&] {
    for (const auto& cmd : commands)
      if (cmd.sub->parsed()) return cmd.bad_input_code;
    for (int i = 1; i < argc; ++i)  // the parse may stop before the subcommand is reached
      for (const auto& cmd : commands)
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
  lim = with_stage_memory(lim);  // every command's layouts count the stages' scratch
  try {
    for (const auto& cmd : commands)
      if (*cmd.sub) return cmd.run();
  } catch (const BadInput& e) {
    std::cerr << "attn-oracle: " << e.what() << "\n";
    return bad_input_code();
  } catch (const std::exception& e) {
    std::cerr << "attn-oracle: error: " << e.what() << "\n";
    return bad_input_code();
  }
  return 2;
}
