// `attn-oracle catalog [--markdown]`: every bug model (bug_models()) as one table: id, catalog id,
// defect class, public source, the gated metrics that catch it, the backends of this build that
// re-create it (defect_table()); then the catalog entries no model re-creates, with the extension each
// needs (unmodelled_catalog_entries()). `--markdown` prints the README's "Defect catalog" table (a test
// keeps the README equal to it). Everything comes from the model list: nothing here names a model.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/reports/escape.h"
#include "commands.h"

namespace ao {
namespace {

std::string join(const std::vector<std::string>& v, const std::string& sep, const std::string& quote = "") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + quote + x + quote;
  return s;
}

std::string ops_of(const BugModel& m) { return m.indexer && m.sdpa ? "both" : m.indexer ? "indexer" : "sdpa"; }

std::vector<std::string> backends_of(const std::string& id) {
  for (const auto& [d, specs] : defect_table())
    if (d == id) return specs;
  return {};
}

std::string catalog_markdown() {
  const auto authored = [](const std::string& t) { return markdown_cell(t, MarkdownText::Authored); };
  MarkdownTable models({"model", "catalog", "class", "ops", "public source", "caught by", "re-created by"});
  for (const auto& m : bug_models())
    models.row({"`" + m.name + "`", m.catalog.empty() ? "-" : m.catalog, defect_class_name(m.defect_class), ops_of(m),
                m.source.empty() ? "-" : authored(m.source), join(m.catches, ", ", "`"),
                join(backends_of(m.name), ", ", "`")});
  MarkdownTable unmodelled({"catalog", "public source", "not modelled: needs"});
  for (const auto& u : unmodelled_catalog_entries())
    unmodelled.row({u.catalog, authored(u.source), (u.partly ? "partly modelled; " : "") + authored(u.needs)});
  return models.text() + "\n" + unmodelled.text();
}

std::string catalog_text() {
  std::string s;
  for (const auto& m : bug_models()) {
    s += fmt::format("{:<24} {:<6} {:<18} {:<8} {}\n", m.name, m.catalog.empty() ? "-" : m.catalog,
                     defect_class_name(m.defect_class), ops_of(m), m.source.empty() ? "(invented here)" : m.source);
    s += fmt::format("{:<24} {}\n", "", m.what);
    s += fmt::format("{:<24} caught by: {}\n", "", join(m.catches, ", "));
    s += fmt::format("{:<24} re-created by: {}\n", "", join(backends_of(m.name), ", "));
  }
  s += "\nnot modelled (catalog entries without a bug model, and what each needs):\n";
  for (const auto& u : unmodelled_catalog_entries())
    s += fmt::format("  {:<6} {}: {}{}\n", u.catalog, u.source, u.partly ? "partly modelled; " : "", u.needs);
  return s;
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
  auto markdown = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("catalog",
                                 "every bug model: catalog id, class, public source, the metrics that catch it, the "
                                 "backends that re-create it; and the catalog entries without a model");
  sub->add_flag("--markdown", *markdown, "print the README's defect catalog tables (Markdown)");
  return AppCommand{sub, [markdown] {
                      std::cout << (*markdown ? catalog_markdown() : catalog_text());
                      return 0;
                    }};
});

}  // namespace
}  // namespace ao
