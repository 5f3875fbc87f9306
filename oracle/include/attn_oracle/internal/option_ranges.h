// The numeric options of a run and their ranges: one table that the CLI's validators (app/commands.h)
// and the Python face's arguments (python/src/core.cpp) both check against, so a value is refused the
// same way, naming the option as that face spells it, whichever face it came through.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/internal/bad_input.h"

namespace ao {

struct OptionRange {
  const char* cli;     // "--max-mem"
  const char* python;  // "max_mem_gib"
  double lo, hi;
  bool whole;          // an integer option
};

// GiB: from 1 MiB to about 1 EiB, so that the byte count fits int64.
inline constexpr OptionRange kMaxMemGib{"--max-mem", "max_mem_gib", 0.001, 1e9, false};
inline constexpr OptionRange kShrinkRuns{"--shrink-runs", "shrink_runs", 0, std::numeric_limits<int>::max(), true};
inline constexpr OptionRange kMaxFailures{"--max-failures", "max_failures", 0, std::numeric_limits<int>::max(), true};
inline constexpr OptionRange kConfirmRuns{"--confirm-runs", "confirm_runs", 0, 100, true};

// Empty when v is finite (whole where r.whole) and in [r.lo, r.hi]; else why not.
inline std::string option_range_error(const OptionRange& r, double v) {
  if (!std::isfinite(v)) return fmt::format("must be a finite number in [{}, {}]", r.lo, r.hi);
  if (r.whole && v != std::floor(v)) return fmt::format("must be a whole number in [{}, {}]", r.lo, r.hi);
  if (v < r.lo || v > r.hi) return fmt::format("must be in [{}, {}]", r.lo, r.hi);
  return {};
}

// The Python face's check: BadInput naming the argument (r.python) and the value.
inline void check_python_option(const OptionRange& r, double v, const std::string& shown) {
  if (auto why = option_range_error(r, v); !why.empty()) throw BadInput(r.python, shown, why);
}

}  // namespace ao
