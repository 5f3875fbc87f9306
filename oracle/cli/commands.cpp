#include "commands.h"

namespace ao {

namespace {
std::vector<CommandFactory>& factories() {
  static std::vector<CommandFactory> f;
  return f;
}
}  // namespace

namespace {
std::vector<std::string>& argv_store() {
  static std::vector<std::string> a;
  return a;
}
}  // namespace

void set_cli_argv(int argc, char** argv) { argv_store().assign(argv, argv + argc); }
const std::vector<std::string>& cli_argv() { return argv_store(); }

CommandRegistrar::CommandRegistrar(CommandFactory f) { factories().push_back(std::move(f)); }

std::vector<AppCommand> extra_commands(CLI::App& app, const LayoutLimits& lim) {
  std::vector<AppCommand> v;
  for (auto& f : factories()) v.push_back(f(app, lim));
  return v;
}

}  // namespace ao
