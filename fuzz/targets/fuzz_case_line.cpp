// libFuzzer target 1: the case-line parser and the layout validator. Properties (abort on violation):
//  * no crash, hang or leak on any input (ASan/UBSan in the libFuzzer build);
//  * every rejection is a CaseError whose message names a non-empty key;
//  * an accepted line prints canonically and round-trips: parse(print(c)) == c, print idempotent;
//  * an accepted layout is self-consistent (check rows inside segments, segments inside the Q buffer).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attn_oracle/layout/layout.h"
#include "attn_oracle/pipeline/memory_budget.h"

namespace {

[[noreturn]] void violated(const std::string& input, const std::string& what) {
  std::fprintf(stderr, "fuzz_case_line: property violated: %s\n  input: %s\n", what.c_str(), input.c_str());
  std::abort();
}

void check_rejection(const std::string& input, const ao::CaseError& e) {
  if (e.key.empty()) violated(input, std::string("rejection without a key: ") + e.what());
  std::string quoted(1, '\'');  // the key as the message shows it (long keys clipped)
  quoted.append(ao::clip_for_message(e.key)).push_back('\'');
  if (std::string(e.what()).find(quoted) == std::string::npos)
    violated(input, std::string("rejection message does not name its key: ") + e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2048) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  ao::Case c;
  try {
    c = ao::parse_case(input);
  } catch (const ao::CaseError& e) {
    check_rejection(input, e);
    return 0;
  }
  const std::string line = ao::print_case(c);
  ao::Case again;
  try {
    again = ao::parse_case(line);
  } catch (const ao::CaseError& e) {
    violated(input, "the canonical line does not parse: " + line + ": " + e.what());
  }
  if (!(again == c)) violated(input, "parse(print(c)) != c for " + line);
  if (ao::print_case(again) != line) violated(input, "print is not idempotent: " + line);
  ao::LayoutLimits lim;
  lim.max_bytes = ao::kProcessBaselineBytes + (int64_t(32) << 20);
  lim.threads = 1;
  try {
    const ao::Layout l = ao::make_layout(c, ao::with_stage_memory(lim));
    if (int64_t(l.row_segment.size()) != l.q_rows) violated(input, "row_segment size != q_rows");
    for (const auto& s : l.segments)
      if (s.row0 < 0 || s.rows < 0 || s.row0 + s.rows > l.q_rows || s.valid > s.rows)
        violated(input, "segment outside the Q buffer");
    int64_t prev = -1;
    for (int64_t r : l.check_rows) {
      if (r <= prev || r >= l.q_rows || l.row_segment[size_t(r)] < 0) violated(input, "bad check row");
      prev = r;
    }
  } catch (const ao::CaseError& e) {
    check_rejection(input, e);
  }
  return 0;
}
