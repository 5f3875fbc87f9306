// Backend registry: the built-in backends come in BackendSets (backend.h); specs are `name[:knobs]`.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"

namespace ao {

namespace detail {
std::vector<BackendInfo> cpu_backends();       // cpu-ref, cpu-bug:<id> (cpu_backends.cpp)
std::vector<BackendInfo> external_backends();  // exec, plugin (external_backends.cpp)
}  // namespace detail

namespace {

struct SetEntry {
  int order;
  std::vector<BackendInfo> (*list)();
};
std::vector<SetEntry>& sets() {
  static std::vector<SetEntry> s;
  return s;
}

// This file's set: always linked, since make_backend lives here. A new CPU backend is its own file
// defining a `detail::<name>_backends()` and one line here.
std::vector<BackendInfo> core_backends() {
  auto v = detail::cpu_backends();
  for (auto& b : detail::external_backends()) v.push_back(std::move(b));
  return v;
}
const BackendSet core_set(0, core_backends);

bool is_defect_id(const std::string& id) {
  const auto& m = bug_models();
  return std::any_of(m.begin(), m.end(), [&](const BugModel& b) { return b.name == id; });
}

// A broken entry is a programming error: every test that makes a backend fails on it.
void check_entry(const BackendInfo& b) {
  auto broken = [&](const std::string& why) { throw std::logic_error("backend " + b.name + ": " + why); };
  for (const auto& k : b.knobs) {
    if (!is_knob_name(k.name)) broken("knob name '" + k.name + "' breaks the naming rule (lowercase, '_')");
    if (k.name == "bug" && k.default_value() != "none") broken("knob bug must default to none");
  }
  for (const auto& id : b.implemented_defects())
    if (!is_defect_id(id)) broken("defect '" + id + "' is not a cpu-bug model id");
  for (const auto& a : b.aliases) (void)parse_knobs(b.name, a.to, b.knobs);  // the canonical side must parse
  if (!b.make) broken("no factory");
}

std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r = [] {
    auto s = sets();
    std::stable_sort(s.begin(), s.end(), [](const SetEntry& a, const SetEntry& b) { return a.order < b.order; });
    std::vector<BackendInfo> all;
    for (const auto& e : s)
      for (auto& b : e.list()) {
        check_entry(b);
        for (const auto& o : all)
          if (o.name == b.name) throw std::logic_error("backend " + b.name + " registered twice");
        all.push_back(std::move(b));
      }
    return all;
  }();
  return r;
}

}  // namespace

BackendSet::BackendSet(int order, std::vector<BackendInfo> (*list)()) { sets().push_back({order, list}); }

std::vector<std::string> BackendInfo::implemented_defects() const {
  std::vector<std::string> d = defects;
  for (const auto& k : knobs)
    if (k.name == "bug")
      for (const auto& v : k.values)
        if (v != "none") d.push_back(v);
  return d;
}

const std::vector<BackendInfo>& registered_backends() { return registry(); }

namespace {

// The registry entry a spec names and the text after its name.
std::pair<const BackendInfo*, std::string> resolve(const std::string& spec) {
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
    throw BadInput("backend", spec, "unknown backend (known: " + names + ")");
  }
  return {best, spec.size() > best->name.size() ? spec.substr(best->name.size() + 1) : ""};
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& spec) {
  const auto [best, text] = resolve(spec);
  if (!best->argument.empty()) {
    // "exec:" or "plugin:   " names no command or library: bad input (bisect-run's 128), not a backend that
    // skips every case. The bare name ("exec") stays the registry's listing entry, reported unavailable.
    if (spec.size() > best->name.size() && text.find_first_not_of(" \t\r\n") == std::string::npos)
      throw BadInput("backend", spec, fmt::format("{} needs {} after '{}:'", best->name, best->argument, best->name));
    return best->make(Knobs(text));
  }
  return best->make(parse_knobs(best->name, text, best->knobs, best->aliases));
}

std::string backend_name(const std::string& spec) {
  const auto [best, text] = resolve(spec);
  const Knobs k = best->argument.empty() ? parse_knobs(best->name, text, best->knobs, best->aliases) : Knobs(text);
  return best->name_of ? best->name_of(k) : best->make(k)->name();
}

std::string normalize_backend_spec(const std::string& raw, SpecForm form) {
  // A trailing newline is kept: after an exec: command it separates the appended case directory.
  const auto b = raw.find_first_not_of(" \t\r\n"), e = raw.find_last_not_of(" \t");
  const std::string spec = b == std::string::npos ? std::string() : raw.substr(b, e - b + 1);
  const auto [info, text] = resolve(spec);
  std::string norm;
  if (!info->argument.empty())
    norm = info->normalize_argument ? info->normalize_argument(text, form) : text;
  else
    norm = parse_knobs(info->name, text, info->knobs, info->aliases).identity_text();
  return norm.empty() ? info->name : info->name + ":" + norm;
}

std::vector<std::pair<std::string, std::vector<std::string>>> defect_table() {
  std::vector<std::pair<std::string, std::vector<std::string>>> t;
  for (const auto& m : bug_models()) {
    std::vector<std::string> specs;
    for (const auto& b : registry())
      for (const auto& id : b.defects)
        if (id == m.name) specs.push_back(b.name);
    for (const auto& b : registry())
      for (const auto& k : b.knobs)
        if (k.name == "bug" && std::find(k.values.begin(), k.values.end(), m.name) != k.values.end())
          specs.push_back(b.name + ":bug=" + m.name);
    t.emplace_back(m.name, std::move(specs));
  }
  return t;
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
  } catch (...) {  // a backend's failure never ends the harness, whatever it throws
    st = {RunStatus::Error, fmt::format("{} threw an exception that is not a std::exception", b.name()), 0};
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace ao
