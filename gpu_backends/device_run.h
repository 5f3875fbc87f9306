// A GPU backend whose kernel can run on inputs already on the device: `cp-run` generates each rank's
// chunks on its own GPU, all-gathers K/V with NCCL, and hands the result in here.
#pragma once
#include "attn_oracle/inputs/tensors.h"
#include "device_inputs.h"
#include "gpu_backend.h"

namespace ao::gpu {

class DeviceRunnable {
 public:
  virtual ~DeviceRunnable() = default;
  // Fills `out` (host buffers, pre-sentinelled) from the kernel's device outputs.
  virtual void run_on_device(const Layout& l, const DeviceInputs& in, Outputs& out) = 0;
};

// The CUDA kernels' Backend::run: inputs generated on the device (or uploaded with the knob
// inputs=host), then run_on_device; phase times in last_times().
class DeviceKernelBackend : public GpuBackend, public DeviceRunnable {
 public:
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) final;

 protected:
  bool from_host_ = false;
};

}  // namespace ao::gpu
