// The knob grammar of knobs.h.
#include "attn_oracle/backends/knobs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/case/case.h"

namespace ao {

namespace {

std::string format_number(double x) { return fmt::format("{}", x); }

const KnobSpec* find_spec(const std::vector<KnobSpec>& specs, const std::string& name) {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

// Why `v` is not a value of `s` ("" = it is).
std::string check_value(const KnobSpec& s, const std::string& v) {
  if (s.range) {
    const KnobRange& r = *s.range;
    char* end = nullptr;
    const double x = v.empty() ? std::nan("") : std::strtod(v.c_str(), &end);
    const bool number = !v.empty() && end && *end == '\0' && std::isfinite(x);
    const bool in = number && (r.lo_open ? x > r.lo : x >= r.lo) && x <= r.hi && (!r.integer || x == std::floor(x));
    return in ? "" : "must be " + s.allowed();
  }
  if (std::find(s.values.begin(), s.values.end(), v) != s.values.end()) return {};
  return "must be " + s.allowed();
}

// Each alias is announced once per process.
void note_alias(const std::string& backend, const KnobAlias& a) {
  static std::mutex m;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(m);
  if (said.insert(backend + ":" + a.from).second)
    std::cerr << fmt::format("attn-oracle: note: {} knob '{}' is an old spelling of '{}'\n", backend, a.from, a.to);
}

}  // namespace

std::string KnobSpec::allowed() const {
  if (range) {
    const char* kind = range->integer ? "an integer" : "a number";
    return fmt::format("{} in {}{}, {}]", kind, range->lo_open ? "(" : "[", format_number(range->lo),
                       format_number(range->hi));
  }
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : "|") + v;
  return s;
}

KnobSpec knob_choice(std::string name, std::vector<std::string> values, std::string doc) {
  return KnobSpec{std::move(name), std::move(values), std::nullopt, "", std::move(doc)};
}

KnobSpec knob_number(std::string name, KnobRange range, std::string fallback, std::string doc) {
  return KnobSpec{std::move(name), {}, range, std::move(fallback), std::move(doc)};
}

KnobSpec bug_knob(std::vector<std::string> ids, std::string doc) {
  ids.insert(ids.begin(), "none");
  return knob_choice("bug", std::move(ids), std::move(doc));
}

bool is_knob_name(const std::string& name) {
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool Knobs::given(const std::string& name) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& kv) { return kv.first == name; });
}

std::string Knobs::get(const std::string& name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return v;
  if (const KnobSpec* s = find_spec(specs_, name)) return s->default_value();
  return {};
}

std::string Knobs::identity_text() const {
  std::vector<std::pair<std::string, std::string>> kept;
  for (const auto& [k, v] : items_) {
    const KnobSpec* s = find_spec(specs_, k);
    std::string value = v;
    if (s && s->range) value = format_number(std::strtod(v.c_str(), nullptr));  // "1.0" and "1" are one value
    const std::string& def = s ? s->default_value() : v;
    if (s && !def.empty() && value == (s->range ? format_number(std::strtod(def.c_str(), nullptr)) : def)) continue;
    kept.emplace_back(k, value);
  }
  std::sort(kept.begin(), kept.end());
  std::string out;
  for (const auto& [k, v] : kept) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

double Knobs::number(const std::string& name) const { return std::strtod(get(name).c_str(), nullptr); }

Knobs parse_knobs(const std::string& backend, const std::string& text, const std::vector<KnobSpec>& specs,
                  const std::vector<KnobAlias>& aliases, bool open) {
  Knobs out;
  out.specs_ = specs;
  auto bad = [&](const std::string& why) -> BadInput { return BadInput("backend", backend + ":" + text, why); };
  if (text.empty()) return out;
  if (specs.empty() && !open) throw bad(backend + " takes no knobs");
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(at, end - at);
    at = end + 1;
    for (const auto& a : aliases)
      if (item == a.from) {
        note_alias(backend, a);
        item = a.to;
        break;
      }
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw bad(fmt::format("knob '{}' is not knob=value", item));
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    const KnobSpec* s = find_spec(specs, k);
    if (!s && !(open && is_knob_name(k))) {
      std::string known;
      for (const auto& sp : specs) known += (known.empty() ? "" : ", ") + sp.name;
      throw bad(fmt::format("unknown knob '{}' (value '{}'; known: {})", k, v, known.empty() ? "none" : known));
    }
    if (s) {
      if (auto why = check_value(*s, v); !why.empty()) throw bad(fmt::format("knob {}: value '{}' {}", k, v, why));
    } else if (v.empty()) {
      throw bad(fmt::format("knob {}: empty value", k));
    }
    if (out.given(k)) throw bad(fmt::format("knob {} given twice (value '{}')", k, v));
    out.items_.emplace_back(k, v);
    out.text_ += (out.text_.empty() ? "" : ",") + k + "=" + v;
  }
  return out;
}

}  // namespace ao
