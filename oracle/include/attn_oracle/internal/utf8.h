// Text from foreign code (a backend's stderr tail, a plugin's name or message) may be any bytes;
// every report writer needs valid UTF-8. sanitize_utf8 is applied where such text enters a result.
#pragma once
#include <string>
#include <string_view>

namespace ao {

// Valid UTF-8 copy of s: each invalid or truncated sequence (a stray byte, an overlong form, a
// surrogate, a character cut at the end) becomes U+FFFD. Valid input is returned unchanged.
std::string sanitize_utf8(std::string_view s);

}  // namespace ao
