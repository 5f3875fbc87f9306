// Registers the external backends `exec:<command>` and `plugin:<path.so>[:<knobs>]` (external.h).
// Everything after the prefix is the backend's own text, so the registry's `name:knobs` split hands
// it over whole.
#include "attn_oracle/backends/external.h"

namespace ao {

void detail::register_external_backends() {
  register_backend({"exec",
                    "external process exchanging .npy files: exec:<shell command> (case dir appended; "
                    "AO_EXEC_TIMEOUT, AO_EXEC_KEEP=1)",
                    [](const std::string& cmd) { return make_exec_backend(cmd, exec_options_from_env()); }});
  register_backend({"plugin", "shared library with the attn_oracle/plugin.h C ABI: plugin:<path.so>[:<knobs>]",
                    [](const std::string& spec) { return make_plugin_backend(spec); }});
}

}  // namespace ao
