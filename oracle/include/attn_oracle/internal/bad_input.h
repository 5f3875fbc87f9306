// Bad input of any kind (a case key, a backend spec or knob, an environment variable, an option value, a
// choice sequence): names the key and the value, so a user can fix it; the CLI maps it to exit code 2.
// Below every stage, since every stage reports it.
#pragma once
#include <stdexcept>
#include <string>

namespace ao {

// A value as error messages echo it: at most max_bytes (cut at a UTF-8 boundary) + "... (N bytes)".
std::string clip_for_message(const std::string& v, size_t max_bytes = 80);

// The message carries both clipped (clip_for_message); the members hold them whole. `key` is what the
// user wrote the value under: a case key, "backend", an environment variable, an option ("budget").
// Message: `'<key>' = '<value>': <why>` (a case's: `case key '<key>' = ...`).
struct BadInput : std::runtime_error {
  std::string key, value;
  BadInput(std::string k, std::string v, const std::string& why);

 protected:
  BadInput(std::string k, std::string v, const std::string& why, const char* kind);
};

// Bad input in a case: a key of the case line or a combination of them that no layout can hold (parse,
// the layout stage). Callers that only try cases (the shrinkers) catch this one alone: a rejected
// case is not a candidate, while a bad backend or option is the user's to fix.
struct CaseError : BadInput {
  CaseError(std::string k, std::string v, const std::string& why);
};

}  // namespace ao
