// `attn-oracle backends [--defects]`: the registry (backend.h) as text: per backend whether it runs
// here, its knobs and the defects it re-creates; or per defect id the backends that re-create it.
#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "commands.h"

namespace ao {

std::string format_backend_list() {
  std::string s;
  const std::string pad(26, ' ');
  for (const auto& b : registered_backends()) {
    const std::string why = b.unavailable_reason();
    const std::string name = b.argument.empty() ? b.name : b.name + ":" + b.argument;
    s += fmt::format("{:<26} {:<10} {}\n", name, why.empty() ? "runs here" : "skipped", b.description);
    if (!why.empty()) s += fmt::format("{} reason: {}\n", pad, why);
    for (const auto& k : b.knobs)
      s += fmt::format("{} knob {}={} (default {}): {}\n", pad, k.name, k.range ? "<" + k.allowed() + ">" : k.allowed(),
                       k.default_value(), k.doc);
    for (const auto& a : b.aliases) s += fmt::format("{} old spelling {} = {}\n", pad, a.from, a.to);
    const auto d = b.implemented_defects();
    if (!d.empty()) {
      std::string ids;
      for (const auto& id : d) ids += (ids.empty() ? "" : ", ") + id;
      s += fmt::format("{} defects: {}\n", pad, ids);
    }
  }
  return s;
}

std::string format_defect_table() {
  std::string s = fmt::format("{:<22} {:<13} {}\n", "defect", "ops", "re-created by");
  const auto& models = bug_models();
  for (const auto& [id, specs] : defect_table()) {
    std::string ops, by;
    for (const auto& m : models)
      if (m.name == id) ops = m.indexer && m.sdpa ? "indexer,sdpa" : m.indexer ? "indexer" : "sdpa";
    for (const auto& b : specs) by += (by.empty() ? "" : ", ") + b;
    s += fmt::format("{:<22} {:<13} {}\n", id, ops, by);
  }
  s += "Foreign code uses the same ids: plugin:<lib.so>:bug=<id> (checked by the oracle), and the Python "
       "adapters' --bug <id> (python -m attn_oracle.adapters list).\n";
  return s;
}

}  // namespace ao
