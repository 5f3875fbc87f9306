// Bad input of any kind (a case key, a backend knob, an option): names the key and the value, so a user
// can fix the line; the CLI maps it to exit code 2. Below every stage, since every stage reports it.
#pragma once
#include <stdexcept>
#include <string>

namespace ao {

// A value as error messages echo it: at most max_bytes (cut at a UTF-8 boundary) + "... (N bytes)".
std::string clip_for_message(const std::string& v, size_t max_bytes = 80);

// The message carries both clipped (clip_for_message); the members hold them whole.
struct CaseError : std::runtime_error {
  std::string key, value;
  CaseError(std::string k, std::string v, const std::string& why);
};

}  // namespace ao
