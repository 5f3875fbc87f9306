// Test helper: one case line run against a backend spec and judged against cpu-ref (the shortest way
// from a line to a CaseResult, for the tests that only read the verdict).
#pragma once
#include <string>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/pipeline/run_case.h"

namespace ao::test {

inline CaseResult run_line(const std::string& line, const std::string& backend) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

}  // namespace ao::test
