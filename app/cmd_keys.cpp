// `attn-oracle keys`: every case-line key from the key table (case_keys.h) with the ops it applies
// to, its default and its doc line; `--markdown` prints the key table that docs/reference/case-keys.md
// holds whole (CTest `docs_generated` keeps the file equal to it). `--kernel` lists how a kernel sees the
// keys (meta.json path, plugin ABI field) and meta.json's layout fields (with `--markdown`:
// docs/reference/meta-json.md); `--json` prints the whole table with the kernel view and the layout fields
// (what the Python tests hold Case and CaseMeta to).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/case/enum_names.h"
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

// When a kernel's meta.json carries a key: the ops, and the pass where only one.
std::string meta_when(const CaseKey& k) {
  std::string s = key_ops_text(k.kernel.meta_ops.value_or(k.ops));
  if (k.kernel.only_pass) s += fmt::format(", pass={}", to_string(*k.kernel.only_pass));
  return s;
}

std::string code_or_dash(const char* x) { return x ? fmt::format("`{}`", x) : std::string("-"); }

std::string kernel_text() {
  std::string s = fmt::format("{:<18}  {:<20}  {:<22}  {}\n", "key", "meta.json", "plugin ao_layout", "when / via");
  for (const auto& k : case_key_table()) {
    const KernelView& v = k.kernel;
    if (!v.meta && !v.abi_field && !v.via) continue;
    s += fmt::format("{:<18}  {:<20}  {:<22}  {}\n", k.name, v.meta ? v.meta : "-", v.abi_field ? v.abi_field : "-",
                     v.meta ? meta_when(k) : v.via ? fmt::format("via {}", v.via) : std::string("-"));
  }
  s += "\nlayout fields of meta.json:\n";
  for (const auto& f : meta_layout_fields()) s += fmt::format("{:<18}  {}\n", f.name, f.doc);
  return s;
}

std::string kernel_markdown() {
  const auto authored = [](const std::string& t) { return markdown_cell(t, MarkdownText::Authored); };
  std::string s = "## The case keys a kernel is given\n\n";
  MarkdownTable t({"key", "meta.json", "carried for", "plugin `ao_layout`", "meaning"});
  for (const auto& k : case_key_table())
    if (k.kernel.meta || k.kernel.abi_field)
      t.row({fmt::format("`{}`", k.name), code_or_dash(k.kernel.meta), k.kernel.meta ? meta_when(k) : "-",
             code_or_dash(k.kernel.abi_field), authored(k.doc)});
  s += t.text();
  s += "\n## The case keys a kernel sees through the layout\n\n";
  MarkdownTable via({"key", "meta.json fields", "meaning"});
  for (const auto& k : case_key_table())
    if (k.kernel.via && !k.kernel.meta) via.row({fmt::format("`{}`", k.name), authored(k.kernel.via), authored(k.doc)});
  s += via.text();
  s += "\n## The layout's fields\n\n";
  MarkdownTable lay({"meta.json", "written", "content"});
  for (const auto& f : meta_layout_fields())
    lay.row({fmt::format("`{}`", f.name), f.case_dir_only ? "case directory only" : f.sometimes ? "some cases" : "always",
             authored(f.doc)});
  s += lay.text();
  std::string hidden;
  for (const auto& k : case_key_table())
    if (!k.kernel.meta && !k.kernel.abi_field && !k.kernel.via)
      hidden += fmt::format("{}`{}`", hidden.empty() ? "" : ", ", k.name);
  s += fmt::format("\nNot given to a kernel (the inputs' generation or the judging): {}.\n", hidden);
  return s;
}

std::string keys_json() {
  using json = nlohmann::ordered_json;
  json keys = json::array();
  for (const auto& k : case_key_table()) {
    const KernelView& v = k.kernel;
    json x = {{"name", k.name}, {"ops", key_ops_text(k.ops)}, {"default", k.default_text}, {"doc", k.doc}};
    if (k.alias_of) x["alias_of"] = k.alias_of;
    x["meta"] = v.meta ? json(v.meta) : json(nullptr);
    x["meta_ops"] = key_ops_text(v.meta_ops.value_or(k.ops));
    x["meta_pass"] = v.only_pass ? json(to_string(*v.only_pass)) : json(nullptr);
    x["abi_field"] = v.abi_field ? json(v.abi_field) : json(nullptr);
    x["via"] = v.via ? json(v.via) : json(nullptr);
    keys.push_back(std::move(x));
  }
  json fields = json::array();
  for (const auto& f : meta_layout_fields())
    fields.push_back({{"name", f.name}, {"doc", f.doc}, {"case_dir_only", f.case_dir_only}, {"sometimes", f.sometimes}});
  return json{{"keys", keys}, {"meta_layout_fields", fields}}.dump(1) + "\n";
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
  auto markdown = std::make_shared<bool>(false);
  auto kernel = std::make_shared<bool>(false);
  auto as_json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("keys", "list the case-line keys (ops, default, meaning)");
  sub->add_flag("--markdown", *markdown, "print the key table (Markdown: docs/reference/case-keys.md)");
  sub->add_flag("--kernel", *kernel,
                "how a kernel sees each key: its meta.json path and plugin ao_layout field, and meta.json's layout "
                "fields (with --markdown: docs/reference/meta-json.md)");
  auto* j = sub->add_flag("--json", *as_json, "every key with its kernel view, and meta.json's layout fields (JSON)");
  j->excludes(sub->get_option("--markdown"));
  j->excludes(sub->get_option("--kernel"));
  return AppCommand{sub, [markdown, kernel, as_json] {
                      if (*as_json)
                        std::cout << keys_json();
                      else if (*kernel)
                        std::cout << (*markdown ? kernel_markdown() : kernel_text());
                      else
                        std::cout << (*markdown ? keys_markdown() : keys_text());
                      return 0;
                    }};
});

}  // namespace
}  // namespace ao
