// `attn-oracle backends [--defects]`: the backend registry as text (backend_list.cpp).
#include <iostream>

#include "commands.h"

namespace ao {
namespace {

const CommandRegistrar reg(
    [](CLI::App& app, const LayoutLimits&) {
      auto defects = std::make_shared<bool>(false);
      auto* sub = app.add_subcommand("backends", "list backends, whether each can run here, their knobs and defects");
      sub->add_flag("--defects", *defects, "list each defect id with the backends that re-create it");
      return AppCommand{sub, [defects] {
                          std::cout << (*defects ? format_defect_table() : format_backend_list());
                          return 0;
                        }};
    },
    HelpRank::ListBackends);

}  // namespace
}  // namespace ao
