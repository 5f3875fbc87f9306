// Helpers of ao_gpu_tests: skip without a GPU (visibly, with the reason), run a case through the
// harness, and run a backend + the reference by hand when a test needs the raw outputs.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "attn_oracle/pipeline/run_case.h"
#include "gpu_common.h"

#define AO_REQUIRE_GPU()                                                             \
  do {                                                                               \
    if (auto why_ = ::ao::gpu::unavailable_reason(); !why_.empty()) GTEST_SKIP() << why_; \
  } while (0)

namespace ao::gputest {

inline CaseResult run_line(const std::string& line, const std::string& backend) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

// One trial with the backend's and cpu-ref's runs kept.
struct RawRun {
  Trial trial;
  TrialRun got, ref;
};

inline RawRun run_raw(const std::string& line, const std::string& backend) {
  RawRun r{Trial(parse_case(line)), {}, {}};
  auto be = make_backend(backend);
  r.got = r.trial.run(*be);
  auto ref = make_backend("cpu-ref");
  r.ref = r.trial.run(*ref);
  return r;
}

inline std::string describe(const CaseResult& r) { return format_result(r); }

// Test names for case-line parameters: letters, digits and '_' only (CTest and gtest filters).
inline std::string case_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = "c";  // no "literal" + std::string: GCC 12 -Wrestrict false positive under -Werror
  s += std::to_string(info.index);
  s += '_';
  for (const char* p = info.param; *p; ++p) s += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return s;
}

}  // namespace ao::gputest
