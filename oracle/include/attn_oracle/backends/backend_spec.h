// Backend spellings in free text, beside normalize_backend_spec (backend.h).
#pragma once
#include <string>

namespace ao {

// Free text (an error reason, stderr) under the rule of SpecForm::Portable paths, as far as it applies
// to text: `<working dir>/` is dropped and `<temp dir>/<one component>` becomes `<tmp>` (a fresh case or
// socket directory), so a file that quotes the text holds no path of the machine it was written on.
std::string portable_paths_in_text(const std::string& text);

}  // namespace ao
