// What the CUDA backends share on the host side: the availability check and version string,
// and per-phase GPU timings of the last run (CUDA events). The GPU backends' registry entries are
// listed in gpu_backend.cpp; their knobs are parsed by the registry (attn_oracle/backends/knobs.h).
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "attn_oracle/backends/backend.h"
#include "gpu_common.h"

namespace ao::gpu {

// Milliseconds of the last run, measured with CUDA events on the device's stream.
struct PhaseTimes {
  double inputs_ms = 0;    // generating (or uploading) the inputs
  double compute_ms = 0;   // scores (indexer) / attention (sdpa)
  double select_ms = 0;    // top-k (indexer only)
  double transfer_ms = 0;  // output buffers up (sentinels) and back
  double total_ms = 0;
};

class GpuBackend : public Backend {
 public:
  std::string unavailable_reason() const override { return gpu::unavailable_reason(); }
  std::string version() const override { return gpu::device_description(); }
  const PhaseTimes& last_times() const { return times_; }

 protected:
  // Host-side milliseconds since t0 (the transfers, timed around synchronous copies).
  static double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  PhaseTimes times_;
};


// Records CUDA events in order and reports the milliseconds between consecutive marks.
class EventTimer {
 public:
  explicit EventTimer(int marks);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void mark(int i);
  double ms(int from, int to) const;  // synchronises on `to`

 private:
  std::vector<cudaEvent_t> ev_;
};

}  // namespace ao::gpu
