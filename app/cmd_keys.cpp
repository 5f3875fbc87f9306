// `attn-oracle keys`: every case-line key from the key table (case_keys.h) with the ops it applies
// to, its default and its doc line; `--markdown` prints the key table that docs/reference/case-keys.md
// holds whole (CTest `docs_generated` keeps the file equal to it).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/report/escape.h"
#include "commands.h"

namespace ao {
namespace {

std::string keys_text() {
  size_t wn = 3, wd = 7;
  for (const auto& k : case_key_table()) {
    wn = std::max(wn, std::string(k.name).size());
    wd = std::max(wd, k.default_text.size());
  }
  std::string s = fmt::format("{:<{}}  {:<7}  {:<{}}  {}\n", "key", wn, "ops", "default", wd, "meaning");
  for (const auto& k : case_key_table())
    s += fmt::format("{:<{}}  {:<7}  {:<{}}  {}\n", k.name, wn, key_ops_text(k.ops), k.default_text, wd, k.doc);
  return s;
}

std::string keys_markdown() {
  const auto authored = [](const std::string& t) { return markdown_cell(t, MarkdownText::Authored); };
  MarkdownTable t({"key", "ops", "default", "meaning"});
  for (const auto& k : case_key_table())
    t.row({fmt::format("`{}`", k.name), key_ops_text(k.ops), authored(k.default_text), authored(k.doc)});
  return t.text();
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
  auto markdown = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("keys", "list the case-line keys (ops, default, meaning)");
  sub->add_flag("--markdown", *markdown, "print the key table (Markdown: docs/reference/case-keys.md)");
  return AppCommand{sub, [markdown] {
                      std::cout << (*markdown ? keys_markdown() : keys_text());
                      return 0;
                    }};
});

}  // namespace
}  // namespace ao
