// Subcommands beyond repro/show/backends/keys register here, each in its own source file.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn_oracle/harness.h"

namespace ao {

struct AppCommand {
  CLI::App* sub;
  std::function<int()> run;
};

std::vector<AppCommand> extra_commands(CLI::App& app, LayoutLimits& lim);
std::string join_case_args(const std::vector<std::string>& args);
void write_reports(const std::string& dir, const std::vector<CaseResult>& results);

}  // namespace ao
