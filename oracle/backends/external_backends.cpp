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
  exec.normalize_argument = normalize_shell_command;
  BackendInfo plugin;
  plugin.name = "plugin";
  plugin.description = "shared library with the attn_oracle/backends/plugin.h C ABI; its knobs are the library's own "
                       "(knob grammar and naming rule checked; bug=<defect id>)";
  plugin.argument = "<path.so>[:<knobs>]";
  plugin.unavailable = [] { return std::string("plugin needs a library: --backend plugin:<path.so>[:<knobs>]"); };
  plugin.make = [](const Knobs& k) { return make_plugin_backend(k.text()); };
  plugin.name_of = [](const Knobs& k) { return plugin_backend_name(k.text()); };
  plugin.normalize_argument = [](const std::string& text, SpecForm form) {
    const auto colon = text.find(':');
    std::string path = text.substr(0, colon);
    if (path.empty()) return text;  // make_backend says what is wrong with it
    if (path.find('/') == std::string::npos) path = "./" + path;  // the library loads a file, not a search
    std::string out = normalize_spec_path(path, form);
    if (colon == std::string::npos) return out;
    const std::string knobs = parse_plugin_knobs(text.substr(0, colon), text.substr(colon + 1)).identity_text();
    return knobs.empty() ? out : out + ":" + knobs;
  };
  return {std::move(exec), std::move(plugin)};
}

}  // namespace ao
