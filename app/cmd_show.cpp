// `attn-oracle show <case>`: the case's layout as text (layout_text.h): segments, causal offsets, key
// ranges, pad slots. Runs nothing.
#include <iostream>

#include "commands.h"
#include "layout_text.h"

namespace ao {
namespace {

const CommandRegistrar reg(
    [](CLI::App& app, const LayoutLimits& lim) {
      auto case_args = std::make_shared<std::vector<std::string>>();
      auto* sub =
          app.add_subcommand("show", "print a case's layout: segments, causal offsets, key ranges, pad slots");
      sub->add_option("case", *case_args, "key=value ...")->required();
      return AppCommand{sub, [case_args, &lim] {
                          std::cout << describe_layout(
                              make_layout(parse_case(join_case_args(*case_args)), lim, LayoutMode::Describe));
                          return 0;
                        }};
    },
    HelpRank::ShowCase);

}  // namespace
}  // namespace ao
