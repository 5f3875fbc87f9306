// Backend knobs: the one grammar `name:knob=value,knob=value` and its parser. Every backend that takes
// knobs declares them as KnobSpecs in its BackendInfo (backend.h); the registry parses the text after
// the name against them before the backend is made, so a backend only reads values already checked.
// Naming rule: knob names are lowercase words joined by '_' (as case keys are: `scratch_gib`,
// `pad_mask`); a knob that re-creates a defect is `bug=<defect id>`, the id of its `cpu-bug:<id>` model.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ao {

struct KnobRange {
  double lo = 0, hi = 0;
  bool lo_open = false;  // (lo, hi] instead of [lo, hi]
  bool integer = false;
};

struct KnobSpec {
  std::string name;                 // lowercase, words joined by '_'
  std::vector<std::string> values;  // allowed values (the first is the default unless `fallback` says)
  std::optional<KnobRange> range;   // a number instead of a value list
  std::string fallback;             // the default ("" = the first of `values`)
  std::string doc;
  const std::string& default_value() const { return fallback.empty() && !values.empty() ? values.front() : fallback; }
  std::string allowed() const;      // "a|b|c" or "number in (0, 64]"
};

// An old spelling kept working: `from` ("mask=topleft") is read as `to` ("bug=topleft-cp"); the parser
// prints a note naming the canonical spelling.
struct KnobAlias {
  std::string from, to;
};

// A knob with a value list (the first value is the default) / a number in a range.
KnobSpec knob_choice(std::string name, std::vector<std::string> values, std::string doc);
KnobSpec knob_number(std::string name, KnobRange range, std::string fallback, std::string doc);
// `bug=none|<ids>`: the knob with which a backend re-creates the defects `ids` (cpu-bug model ids).
KnobSpec bug_knob(std::vector<std::string> ids, std::string doc = "re-create a defect (the cpu-bug:<id> model's id)");

// Parsed knobs: every given knob, in the order given, after aliases; a lookup falls back to the default.
class Knobs {
 public:
  Knobs() = default;
  explicit Knobs(std::string raw) : text_(std::move(raw)) {}
  const std::string& text() const { return text_; }  // canonical text ("" = none given); the raw text when unparsed
  // The knobs that make a difference, in one spelling: given values other than their default (so
  // `bug=none` is no knob), numbers in shortest form, sorted by name. Two knob texts that make the
  // same backend have the same identity text (backend_spec.h compares backend specs with it).
  std::string identity_text() const;
  bool given(const std::string& name) const;
  std::string get(const std::string& name) const;  // the value or the spec's default
  double number(const std::string& name) const;
  bool flag(const std::string& name) const { return get(name) == "1"; }
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  friend Knobs parse_knobs(const std::string&, const std::string&, const std::vector<KnobSpec>&,
                           const std::vector<KnobAlias>&, bool);
  std::string text_;
  std::vector<std::pair<std::string, std::string>> items_;
  std::vector<KnobSpec> specs_;
};

// Parses `text` ("k=v,k=v") for `backend` against `specs`. Throws BadInput("backend", "backend:text",
// why naming the knob and the value) for a malformed item, an unknown knob (unless `open`: the
// knobs a foreign library reads itself, which must still follow the grammar and naming rule), a value
// not allowed, or a knob given twice.
Knobs parse_knobs(const std::string& backend, const std::string& text, const std::vector<KnobSpec>& specs,
                  const std::vector<KnobAlias>& aliases = {}, bool open = false);

// True when `name` follows the naming rule (lowercase letters, digits, '_'; starts with a letter).
bool is_knob_name(const std::string& name);

}  // namespace ao
