// Every subcommand lives in its own cmd_*.cpp and registers itself with one static CommandRegistrar
// (the CLI sources are linked directly, so registrars are kept); main() parses and runs whichever was
// given, naming none of them.
#pragma once
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn_oracle/pipeline/run_case.h"

namespace ao {

struct AppCommand {
  CLI::App* sub;
  std::function<int()> run;  // returns the process exit code
  int bad_input_code = 2;    // exit code for its command-line errors (bisect-run: 128, see git bisect run)
};

// Adds the subcommand's options to `app` and returns it with its action. `lim` is filled from
// --max-mem before run() is called. A command that runs backends and must stop cleanly on
// SIGINT/SIGTERM/SIGHUP installs the handlers (interrupt.h) at the start of its run().
using CommandFactory = std::function<AppCommand(CLI::App& app, const LayoutLimits& lim)>;

// Where a command is listed in `attn-oracle --help`: the everyday commands first (by their rank), then
// the rest (HelpRank::Other, in link order: by file name).
enum class HelpRank { RunCase = 0, ShowCase = 1, ListBackends = 2, Other = 3 };

struct CommandRegistrar {
  explicit CommandRegistrar(CommandFactory f, HelpRank rank = HelpRank::Other);
};

// Every registered command added to `app`, in help order.
std::vector<AppCommand> registered_commands(CLI::App& app, const LayoutLimits& lim);
std::string join_case_args(const std::vector<std::string>& args);
// `backends`: each backend with its knobs and defects; `backends --defects`: defect -> backends (backend_list.cpp).
std::string format_backend_list();
std::string format_defect_table();
// This process's command line (main() records it; cp-run re-executes it once per rank).
void set_cli_argv(int argc, char** argv);
const std::vector<std::string>& cli_argv();
// Option validators (CLI11 runs them on the raw string, and names the option in its message).
// A finite decimal number in [lo, hi] (CLI11 alone accepts nan, inf and the empty string as doubles).
CLI::Validator finite_number(double lo, double hi);
// An unsigned 64-bit integer, the whole range and nothing else (CLI11 wraps -1, clamps >= 2^64).
CLI::Validator u64_number();

}  // namespace ao
