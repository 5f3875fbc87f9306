#include "attn_oracle/report/escape.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "attn_oracle/internal/utf8.h"

namespace ao {

namespace {

// Calls f(code point, its UTF-8 bytes) for each character of valid UTF-8 text.
template <class F>
void for_each_char(const std::string& s, F f) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3Fu);
    f(cp, std::string_view(s).substr(i, n));
    i += n;
  }
}

bool is_noncharacter(uint32_t cp) { return (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFEu) == 0xFFFEu; }

// C0 controls, DEL and C1 controls: no printable meaning, and a line break ends a Markdown row.
bool is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for_each_char(sanitize_utf8(s), [&](uint32_t cp, std::string_view bytes) {
    switch (cp) {
      case '&': o += "&amp;"; return;
      case '<': o += "&lt;"; return;
      case '>': o += "&gt;"; return;
      case '"': o += "&quot;"; return;
      case '\'': o += "&apos;"; return;
      case '\n':
      case '\t': o += bytes; return;
      default: break;
    }
    if (is_control(cp))
      o += ' ';
    else if (is_noncharacter(cp))
      o += "\xEF\xBF\xBD";
    else
      o += bytes;
  });
  return o;
}

std::string markdown_cell(std::string_view s, MarkdownText kind) {
  std::string body;
  size_t run = 0, longest = 0;
  for_each_char(sanitize_utf8(s), [&](uint32_t cp, std::string_view bytes) {
    run = cp == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (cp == '|')
      body += "\\|";
    else if (is_control(cp))
      body += ' ';
    else
      body += bytes;
  });
  if (kind == MarkdownText::Authored || body.empty()) return body;
  // A space inside each fence where the text starts or ends with a backtick (it would join the fence)
  // or starts and ends with a space: CommonMark strips one from each side, so the text comes out as written.
  const bool pad = body.front() == '`' || body.back() == '`' || (body.front() == ' ' && body.back() == ' ');
  const std::string fence(longest + 1, '`'), sp = pad ? " " : "";
  return fence + sp + body + sp + fence;
}

namespace {
std::string table_line(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& c : cells) s += " " + c + " |";
  return s + "\n";
}
}  // namespace

MarkdownTable::MarkdownTable(std::vector<std::string> header) : columns_(header.size()) {
  text_ = table_line(header) + table_line(std::vector<std::string>(columns_, "---"));
}

MarkdownTable& MarkdownTable::row(std::vector<std::string> cells) {
  if (cells.size() != columns_)
    throw std::logic_error("Markdown table row of " + std::to_string(cells.size()) + " cells under a header of " +
                           std::to_string(columns_));
  text_ += table_line(cells);
  return *this;
}

}  // namespace ao
