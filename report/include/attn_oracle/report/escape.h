// Escaping for each report format. Foreign text (a backend's stderr tail, a plugin's name or message, a
// case line read from a file) may hold any bytes; each writer makes it inert for its own format.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ao {

// Text for XML/HTML text and attribute values: & < > " ' as entities; invalid UTF-8 becomes U+FFFD (as
// sanitize_utf8); characters XML 1.0 forbids or discourages become U+FFFD (the non-characters U+FFFE,
// U+FFFF, U+FDD0-U+FDEF and U+nFFFE/U+nFFFF of every plane) or a space (C0 controls other than tab and
// newline, DEL, C1 controls), so the document is well-formed whatever the text held.
std::string xml_escape(std::string_view s);

// What a Markdown table cell holds.
enum class MarkdownText {
  Authored,  // the project's own prose (doc lines): its inline markup (`code`, *emphasis*) is kept
  Literal,   // foreign text: shown exactly as written, in a code span
};

// One GFM table cell (also safe inline, e.g. in a heading) that stays on its row: line breaks and other
// control characters become spaces (a row is one line, so nothing can start a heading or a block) and
// `|` becomes `\|` (GitHub also unescapes it inside code spans). Literal text goes into a code span
// whose backtick fence is longer than any backtick run inside it, so no markup, raw HTML (`<!--`),
// entity, mention or link in it is interpreted; empty text gives an empty cell.
std::string markdown_cell(std::string_view s, MarkdownText kind);

// A GFM table: the header row, the `| --- |` rule, one line per row. Cells are Markdown as given
// (markdown_cell for text; the writer's own markup, such as a `name` in a code span), so every table
// the project prints (the key and catalog tables of docs/reference/, report.md) has one shape.
class MarkdownTable {
 public:
  explicit MarkdownTable(std::vector<std::string> header);
  // Exactly as many cells as the header has (std::logic_error otherwise: a row would shift its columns).
  MarkdownTable& row(std::vector<std::string> cells);
  const std::string& text() const { return text_; }

 private:
  size_t columns_;
  std::string text_;
};

}  // namespace ao
