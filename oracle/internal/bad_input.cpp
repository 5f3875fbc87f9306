// BadInput and the clipping of echoed values (bad_input.h).
#include "attn_oracle/internal/bad_input.h"

#include <fmt/format.h>

namespace ao {

std::string clip_for_message(const std::string& v, size_t max_bytes) {
  if (v.size() <= max_bytes) return v;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(v[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return fmt::format("{}... ({} bytes)", v.substr(0, n), v.size());
}

BadInput::BadInput(std::string k, std::string v, const std::string& why)
    : BadInput(std::move(k), std::move(v), why, "") {}

BadInput::BadInput(std::string k, std::string v, const std::string& why, const char* kind)
    : std::runtime_error(fmt::format("{}'{}' = '{}': {}", kind, clip_for_message(k), clip_for_message(v), why)),
      key(std::move(k)),
      value(std::move(v)) {}

CaseError::CaseError(std::string k, std::string v, const std::string& why)
    : BadInput(std::move(k), std::move(v), why, "case key ") {}

}  // namespace ao
