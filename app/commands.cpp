#include "commands.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace ao {

namespace {
struct Registration {
  CommandFactory make;
  HelpRank rank;
};
std::vector<Registration>& registrations() {
  static std::vector<Registration> r;
  return r;
}
}  // namespace

namespace {
std::vector<std::string>& argv_store() {
  static std::vector<std::string> a;
  return a;
}
}  // namespace

std::string join_case_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

void set_cli_argv(int argc, char** argv) { argv_store().assign(argv, argv + argc); }
const std::vector<std::string>& cli_argv() { return argv_store(); }

CommandRegistrar::CommandRegistrar(CommandFactory f, HelpRank rank) {
  registrations().push_back({std::move(f), rank});
}

std::vector<AppCommand> registered_commands(CLI::App& app, const LayoutLimits& lim) {
  std::vector<Registration> r = registrations();
  std::stable_sort(r.begin(), r.end(), [](const Registration& a, const Registration& b) { return a.rank < b.rank; });
  std::vector<AppCommand> v;
  for (auto& reg : r) v.push_back(reg.make(app, lim));
  return v;
}

CLI::Validator finite_number(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        char* end = nullptr;
        const bool plain = !v.empty() && v.find_first_not_of("0123456789.eE+-") == std::string::npos;
        const double x = plain ? std::strtod(v.c_str(), &end) : 0;
        if (!plain || end != v.c_str() + v.size() || !std::isfinite(x))
          return fmt::format("'{}' is not a finite decimal number", v);
        if (x < lo || x > hi) return fmt::format("{} is not in [{}, {}]", v, lo, hi);
        return {};
      },
      fmt::format("FINITE in [{}, {}]", lo, hi));
}

CLI::Validator u64_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        uint64_t x = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (v.empty() || ec != std::errc() || p != v.data() + v.size())
          return fmt::format("'{}' is not an integer in [0, 2^64-1]", v);
        return {};
      },
      "UINT64");
}

}  // namespace ao
