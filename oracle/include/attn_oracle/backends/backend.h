// Backend interface: run(layout, inputs, outputs) fills pre-sentinelled output buffers.
// A backend may compute only layout.check_rows (the CPU references do); GPU kernels compute all.
// Names on the CLI: `name` or `name:knob=value,knob=value` (the knob grammar: knobs.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "attn_oracle/backends/knobs.h"
#include "attn_oracle/inputs/tensors.h"

namespace ao {

struct RunStatus {
  enum Kind { Ok, Skipped, Error } kind = Ok;
  std::string reason;  // why skipped / what failed
  double seconds = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Library/driver versions the result depends on (recorded in reports), e.g. "cuDNN 9.14.0".
  virtual std::string version() const { return {}; }
  // Empty when it can run here; otherwise the reason it cannot (no GPU, no library, ...).
  virtual std::string unavailable_reason() const { return {}; }
  // Empty when the case is in scope; otherwise why this backend does not serve it (reported skipped).
  virtual std::string declines(const Layout&) const { return {}; }
  virtual RunStatus run(const Layout& l, const Inputs& in, Outputs& out) = 0;
  // True only for the built-in exact reference (cpu-ref): a run whose outputs a comparator that does
  // not read them (comparator_reads_reference) need not wait for.
  virtual bool is_exact_reference() const { return false; }
};

// How a backend spec is spelled by normalize_backend_spec.
enum class SpecForm {
  Identity,  // for comparing two specs: paths absolute, with '.', '..' and symlinks resolved
  Portable,  // for writing into files: paths under the working directory relative to it, paths under
             // the temp directory ($TMPDIR, else /tmp) as `<tmp>/<file name>`, other absolute paths kept
};

// One backend of the registry: what `attn-oracle backends` lists and what make_backend builds.
struct BackendInfo {
  std::string name, description;
  std::vector<KnobSpec> knobs;       // parsed and checked by make_backend before `make` runs
  std::vector<KnobAlias> aliases;    // old knob spellings, read as the canonical ones
  std::vector<std::string> defects;  // defect ids (cpu-bug models) it always re-creates (cpu-bug:<id>)
  std::string argument;              // non-empty: takes this free text after "name:" instead of knobs
  std::function<std::string()> unavailable;  // why the bare name cannot run here; empty: it can
  std::function<std::unique_ptr<Backend>(const Knobs&)> make;
  // Optional: the name() of make's backend without making it, for backends whose construction runs
  // foreign code (a plugin's library); checks what make checks before that. Empty: make(...)->name().
  std::function<std::string(const Knobs&)> name_of;
  // For a backend taking an `argument`: its text in the one spelling of `form` (normalize_backend_spec);
  // empty: the text is kept as given (trimmed).
  std::function<std::string(const std::string& text, SpecForm form)> normalize_argument;

  std::vector<std::string> implemented_defects() const;  // `defects` and its `bug` knob's values
  std::string unavailable_reason() const { return unavailable ? unavailable() : std::string(); }
};

// The built-in backends, one way for all: each build part holds one static BackendSet with its list
// (the CPU and external backends: backend_registry.cpp; the GPU backends: gpu_backends/gpu_backend.cpp,
// when built). Sets are listed by `order`. The registry checks every entry once (knob naming rule,
// `bug` values that are cpu-bug ids) and throws std::logic_error on a broken one.
struct BackendSet {
  BackendSet(int order, std::vector<BackendInfo> (*list)());
};

const std::vector<BackendInfo>& registered_backends();
// Throws BadInput(key="backend") for unknown names or bad knobs.
std::unique_ptr<Backend> make_backend(const std::string& spec);
// The name() make_backend(spec) would give, with the spec checked the same way (same BadInput errors), but
// no library code of a plugin run: for naming backends that are not run (`# catches:` claims).
std::string backend_name(const std::string& spec);

// The one spelling of a backend spec: the registry's name, then its knobs as Knobs::identity_text()
// (defaults dropped, sorted; aliases read as their canonical spelling), or a free argument normalized
// by its backend (exec: words and paths, plugin: library path and knobs); leading blanks and trailing
// blanks but not a trailing newline (exec: appends "$@" after it) dropped. Identity: equal for specs of
// one backend; Portable: how a user re-runs it from the working dir (found files, failure signatures).
// Never loads or runs the backend. Throws BadInput(key="backend") for an unknown name or bad knobs.
std::string normalize_backend_spec(const std::string& spec, SpecForm form);
// A path in `form`'s spelling (SpecForm above); relative paths are taken from the working directory.
std::string normalize_spec_path(const std::string& path, SpecForm form);
// A `/bin/sh -c` command line with runs of blanks as one space and every plain word that holds a '/'
// (or `--opt=<path>`) spelled by normalize_spec_path; quoted or escaped words are kept as written.
std::string normalize_shell_command(const std::string& command, SpecForm form);

// Every defect id (the cpu-bug models' ids) with the backend specs that re-create it, in model order:
// ("topleft-cp", {"cpu-bug:topleft-cp", "cuda-indexer:bug=topleft-cp"}).
std::vector<std::pair<std::string, std::vector<std::string>>> defect_table();

// Runs a backend with exceptions turned into RunStatus::Error and timing filled in.
RunStatus run_backend(Backend& b, const Layout& l, const Inputs& in, Outputs& out);

}  // namespace ao
