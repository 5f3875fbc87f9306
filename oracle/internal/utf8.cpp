#include "attn_oracle/internal/utf8.h"

#include <cstdint>

namespace ao {

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0 (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF).
size_t valid_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}
}  // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = valid_sequence(s, i)) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    out += "\xEF\xBF\xBD";  // U+FFFD for the bad lead byte; its continuation bytes follow one by one
    ++i;
  }
  return out;
}

}  // namespace ao
