// The external backends `exec:<command>` and `plugin:<path.so>[:<knobs>]` (external.h).
// Everything after the prefix is the backend's own text, so the registry's `name:knobs` split hands
// it over whole.
#include "attn_oracle/backends/external.h"

namespace ao {

std::vector<BackendInfo> detail::external_backends() {
  BackendInfo exec;
  exec.name = "exec";
  exec.description = "external process exchanging .npy files (case dir appended; AO_EXEC_TIMEOUT, AO_EXEC_KEEP=1)";
  exec.argument = "<shell command>";
  exec.make = [](const Knobs& k) { return make_exec_backend(k.text(), exec_options_from_env()); };
  BackendInfo plugin;
  plugin.name = "plugin";
  plugin.description = "shared library with the attn_oracle/plugin.h C ABI; its knobs are the library's own "
                       "(knob grammar and naming rule checked; bug=<defect id>)";
  plugin.argument = "<path.so>[:<knobs>]";
  plugin.unavailable = [] { return std::string("plugin needs a library: --backend plugin:<path.so>[:<knobs>]"); };
  plugin.make = [](const Knobs& k) { return make_plugin_backend(k.text()); };
  plugin.name_of = [](const Knobs& k) { return plugin_backend_name(k.text()); };
  return {std::move(exec), std::move(plugin)};
}

}  // namespace ao
