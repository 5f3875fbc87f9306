// The names of the case enums, as case lines, reports, the exec protocol and messages spell them.
// One table per enum (enum_names.cpp); the first name of a value is its canonical name (to_string),
// later ones are accepted aliases (mask: `causal` = `topleft`).
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attn_oracle/case/case.h"

namespace ao {

template <class E>
struct EnumName {
  const char* name;
  E value;
};

// Specialized for every enum of case.h and DType.
template <class E>
std::span<const EnumName<E>> enum_names();

const char* to_string(Op e);
const char* to_string(MaskKind e);
const char* to_string(CpScheme e);
const char* to_string(Poison e);
const char* to_string(Precision e);
const char* to_string(PadWrites e);
const char* to_string(Probe e);
const char* to_string(DType e);
const char* to_string(WindowConvention e);
const char* to_string(EmptyRows e);
const char* to_string(Values e);
const char* to_string(Ties e);
const char* to_string(Pass e);
const char* to_string(GradPad e);
const char* to_string(LossMean e);

// The value named s (canonical name or alias), or nullopt.
template <class E>
std::optional<E> parse_enum(std::string_view s) {
  for (const auto& n : enum_names<E>())
    if (s == n.name) return n.value;
  return std::nullopt;
}

// Every accepted name, separated by `sep` (e.g. "none|topleft|causal|bottomright").
template <class E>
std::string enum_choices(std::string_view sep = "|") {
  std::string s;
  for (const auto& n : enum_names<E>()) (s += s.empty() ? "" : std::string(sep)) += n.name;
  return s;
}

}  // namespace ao
