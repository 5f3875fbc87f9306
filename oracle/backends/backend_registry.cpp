// Backend registry: backends register by name (built-ins on first use); specs are `name[:knobs]`.
#include <chrono>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"

namespace ao {

namespace detail {
void register_cpu_backends();
void register_external_backends();  // exec:, plugin: (external_backends.cpp)
}

namespace {
std::vector<BackendInfo>& storage() {
  static std::vector<BackendInfo> r;
  return r;
}
std::vector<BackendInfo>& registry() {
  static bool builtin = [] {  // explicit, so static-library linking cannot drop them
    detail::register_cpu_backends();
    detail::register_external_backends();
    return true;
  }();
  (void)builtin;
  return storage();
}
}  // namespace

void register_backend(BackendInfo info) { storage().push_back(std::move(info)); }
const std::vector<BackendInfo>& registered_backends() { return registry(); }

std::unique_ptr<Backend> make_backend(const std::string& spec) {
  // Longest registered name that prefixes the spec, followed by end or ':' (names may contain ':').
  const BackendInfo* best = nullptr;
  for (const auto& b : registry()) {
    if (spec.compare(0, b.name.size(), b.name) != 0) continue;
    if (spec.size() != b.name.size() && spec[b.name.size()] != ':') continue;
    if (!best || b.name.size() > best->name.size()) best = &b;
  }
  if (!best) {
    std::string names;
    for (const auto& b : registry()) names += (names.empty() ? "" : ", ") + b.name;
    throw CaseError("backend", spec, "unknown backend (known: " + names + ")");
  }
  std::string knobs = spec.size() > best->name.size() ? spec.substr(best->name.size() + 1) : "";
  return best->make(knobs);
}

RunStatus run_backend(Backend& b, const Layout& l, const Inputs& in, Outputs& out) {
  RunStatus st;
  if (auto why = b.unavailable_reason(); !why.empty()) return {RunStatus::Skipped, why, 0};
  if (auto why = b.declines(l); !why.empty()) return {RunStatus::Skipped, why, 0};
  auto t0 = std::chrono::steady_clock::now();
  try {
    st = b.run(l, in, out);
  } catch (const std::exception& e) {
    st = {RunStatus::Error, fmt::format("{} threw: {}", b.name(), e.what()), 0};
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace ao
