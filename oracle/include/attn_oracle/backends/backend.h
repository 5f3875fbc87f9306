// Backend interface: run(layout, inputs, outputs) fills pre-sentinelled output buffers.
// A backend may compute only layout.check_rows (the CPU references do); GPU kernels compute all.
// Names on the CLI: `name` or `name:knob=value,knob=value` (knobs are backend-specific).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
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
};

struct BackendInfo {
  std::string name, description;
  std::function<std::unique_ptr<Backend>(const std::string& knobs)> make;
};

void register_backend(BackendInfo info);
const std::vector<BackendInfo>& registered_backends();
// Throws CaseError(key="backend") for unknown names or bad knobs.
std::unique_ptr<Backend> make_backend(const std::string& spec);

// Runs a backend with exceptions turned into RunStatus::Error and timing filled in.
RunStatus run_backend(Backend& b, const Layout& l, const Inputs& in, Outputs& out);

}  // namespace ao
