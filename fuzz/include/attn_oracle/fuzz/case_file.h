// Case files (corpus): one case line per line, `#` starts a comment, blank lines are skipped.
// Directories are walked recursively for `*.case` files, in sorted order, so a gate over a corpus
// replays the same cases in the same order everywhere. A file without any case line (e.g. left empty
// by a crashed save) is an error, as is a path that cannot be resolved (a symlink loop) anywhere under
// a given directory: a corpus never loses a case silently.
// `# choices: dims=<small|glm|deepseek|tiny|wide> op=<indexer|sdpa|any> <n> <n> ...` (written by `fuzz` before a
// found case) records the choice sequence the generator replays to the case line after it; the line
// stays authoritative (a sequence that no longer replays to it, e.g. after a generator change, is
// ignored by its users), and readers that do not know it skip it as a comment.
// `# catches: <backend>` on its own line claims that <backend> fails the next case line (one claim per
// case; a claim not followed by a case line is an error); `gate` checks the claims of the backends it runs.
// Every case file is written through CaseFileWriter: whatever it holds that came from outside (error
// reasons, stderr, backend specs) is escaped onto one `# <tag>: ...` comment line, so no foreign text
// can add a claim, a choice sequence or a case line, or split a line.
// Reading is bounded: a line longer than kMaxCaseLineBytes, or a file larger than --max-mem, is an error
// naming the file (and line) and the limit, found before the rest is read. Explicit paths may be FIFOs or
// character devices (`gate <(echo LINE)`); they are read once, a FIFO with a bounded wait for its writer
// (nothing written for 10 s, no writer included, is an error naming it, never a hang). Directory walks
// take regular files only.
#pragma once
#include <cstddef>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/layout/layout.h"

namespace ao {

struct RecordedChoices {
  GenOptions gen;
  Choices seq;
};

struct CaseEntry {
  std::string file;
  int line = 0;  // 1-based
  Case c;
  std::string claim;   // backend spec of a `# catches:` line before the case, or empty
  int claim_line = 0;  // its line
  std::optional<RecordedChoices> choices;  // a `# choices:` line before the case
};

// A bad line or path: the message starts with `file:line:` (or the path) and carries the BadInput text.
struct CaseFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Explicit files are taken as given; directories contribute their *.case files recursively.
std::vector<std::string> collect_case_files(const std::vector<std::string>& paths);
// Parses and validates (make_layout) every case; throws CaseFileError at the first bad line.
std::vector<CaseEntry> read_case_files(const std::vector<std::string>& files, const LayoutLimits& lim = {});
// "# choices: dims=small op=any 3 0 17" and back; nullopt for a line that is not a `# choices:`
// line; throws BadInput("choices", ...) for a malformed one.
std::string choices_comment(const RecordedChoices& r);
std::optional<RecordedChoices> parse_choices_comment(const std::string& line);

// The longest line a case file may hold (a case line the layout accepts is far shorter).
inline constexpr size_t kMaxCaseLineBytes = size_t(1) << 20;

// Reads the next line (without its '\n') of `in` into `line`; false at the end. A line longer than
// `max` bytes throws CaseFileError("<file>:<n>: line longer than <max> bytes ...") after reading at most
// max + 1 of its bytes.
bool read_bounded_line(std::istream& in, std::string& line, const std::string& file, int n,
                       size_t max = kMaxCaseLineBytes);

// Foreign text on one comment line: valid UTF-8 (sanitize_utf8), `\` as `\\`, newline, carriage return and
// tab as `\n` `\r` `\t`, other control characters (C0, DEL, C1) and the Unicode line and paragraph
// separators as `\xNN` / `\uNNNN`.
std::string escape_comment_text(std::string_view text);
// The text a comment line holds back: unescape_comment_text(escape_comment_text(t)) == sanitize_utf8(t).
// An escape it does not know (not written by escape_comment_text) is kept as it stands.
std::string unescape_comment_text(std::string_view escaped);

// The one writer of case files.
class CaseFileWriter {
 public:
  // `# <text>`, escaped.
  CaseFileWriter& note(std::string_view text);
  // `# <tag>: <text>`, text escaped. Tags are the writer's own words (lowercase, spaces); `catches`
  // and `choices` are not comments but data and have their own calls.
  CaseFileWriter& comment(const std::string& tag, std::string_view text);
  CaseFileWriter& choices(const RecordedChoices& r);
  CaseFileWriter& case_line(const Case& c);  // the canonical line (print_case)
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The case text of one line (comment stripped, trimmed); empty for blank/comment lines.
std::string case_text_of_line(const std::string& line);

}  // namespace ao
