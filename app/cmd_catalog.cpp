// `attn-oracle catalog [--markdown]`: every bug model (bug_models()) as one table: id, catalog id,
// defect class, public source, the gated metrics that catch it, the backends of this build that
// re-create it (defect_table()); then the catalog entries no model re-creates, with the extension each
// needs (unmodelled_catalog_entries()). `--markdown` prints the tables that docs/reference/catalog.md
// holds whole (CTest `docs_generated` keeps the file equal to the CPU build's output). `--json` prints
// the whole list as data, the trigger and outside cases included, for the scripts that plan from it
// (scripts/device/catalog-plan.py). Everything comes from the model list: nothing here names a model.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/report/escape.h"
#include "attn_oracle/report/report.h"
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

std::vector<std::string> op_list(const BugModel& m) {
  std::vector<std::string> v;
  if (m.indexer) v.push_back("indexer");
  if (m.sdpa) v.push_back("sdpa");
  return v;
}

const char* scale_name(CaseScale s) { return s == CaseScale::Production ? "production" : "ordinary"; }

// The model list as data: each model's facts, its cases, and the backend specs of this build that
// re-create it; every backend with a `bug` knob, its values (a plan checks each against the models) and
// its knobs' allowed values; the unmodelled catalog entries. Trigger and outside lines carry no seed: each
// runs on every seed of `seeds`, a production-scale one ("scale": "production") on the first.
std::string catalog_json() {
  using json = nlohmann::ordered_json;  // keys in the order written: schema first, id first
  json j;
  j["schema"] = "attn-oracle.catalog";
  j["schema_version"] = 1;
  j["tool"] = {{"name", "attn-oracle"}, {"version", tool_version()}};
  j["seeds"] = json::array();
  for (uint64_t s : kModelCaseSeeds) j["seeds"].push_back(s);
  auto& models = j["models"] = json::array();
  for (const auto& m : bug_models()) {
    json x = {{"id", m.name},       {"what", m.what},     {"ops", op_list(m)},
              {"catalog", m.catalog}, {"source", m.source}, {"class", defect_class_name(m.defect_class)},
              {"catches", m.catches}, {"backends", backends_of(m.name)}};
    auto& t = x["triggers"] = json::array();
    for (const auto& c : m.triggers)
      t.push_back({{"case", c.line}, {"fails", c.fails}, {"scale", scale_name(c.scale)}});
    auto& o = x["outside"] = json::array();
    for (const auto& c : m.outside) o.push_back({{"case", c.line}, {"why", c.why}, {"scale", scale_name(c.scale)}});
    models.push_back(std::move(x));
  }
  auto& knob_backends = j["bug_knobs"] = json::array();
  for (const auto& b : registered_backends()) {
    json values = json::array(), knobs = json::object();
    for (const auto& k : b.knobs) {
      knobs[k.name] = k.values;  // a number knob: no value list
      if (k.name == "bug")
        for (const auto& v : k.values)
          if (v != k.default_value()) values.push_back(v);
    }
    if (!values.empty()) knob_backends.push_back({{"backend", b.name}, {"values", values}, {"knobs", knobs}});
  }
  auto& unmodelled = j["unmodelled"] = json::array();
  for (const auto& u : unmodelled_catalog_entries())
    unmodelled.push_back({{"catalog", u.catalog}, {"source", u.source}, {"needs", u.needs}, {"partly", u.partly}});
  // The list is the project's own text, but `replace` keeps a stray byte from ending the document.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
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
  auto markdown = std::make_shared<bool>(false), as_json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("catalog",
                                 "every bug model: catalog id, class, public source, the metrics that catch it, the "
                                 "backends that re-create it; and the catalog entries without a model");
  auto* md = sub->add_flag("--markdown", *markdown, "print the defect catalog tables (Markdown: docs/reference/catalog.md)");
  sub->add_flag("--json", *as_json,
                "print every model with its trigger and outside cases and the backends that re-create it (JSON, "
                "schema attn-oracle.catalog)")
      ->excludes(md);
  return AppCommand{sub, [markdown, as_json] {
                      std::cout << (*as_json ? catalog_json() : *markdown ? catalog_markdown() : catalog_text());
                      return 0;
                    }};
});

}  // namespace
}  // namespace ao
