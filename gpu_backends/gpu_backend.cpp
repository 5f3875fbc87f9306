// Host helpers of gpu_backend.h, and the GPU backends' BackendSet.
#include "gpu_backend.h"

#include "device_run.h"

#include "attn_oracle/case/case.h"

namespace ao::gpu {

// The GPU part of the one backend list (backend.h), linked whenever ao_gpu is. A new GPU backend is
// its own file defining a `BackendInfo <name>_backend()` and one line here.
BackendInfo cuda_indexer_backend();  // cuda_indexer.cpp
BackendInfo cuda_sdpa_backend();     // cuda_sdpa.cpp
BackendInfo cudnn_sdpa_backend();    // cudnn_sdpa.cpp

namespace {
std::vector<BackendInfo> gpu_backends() { return {cuda_indexer_backend(), cuda_sdpa_backend(), cudnn_sdpa_backend()}; }
const BackendSet gpu_set(1, gpu_backends);
}  // namespace

EventTimer::EventTimer(int marks) : ev_(size_t(marks), nullptr) {
  for (auto& e : ev_) AO_CUDA(cudaEventCreate(&e));
}
EventTimer::~EventTimer() {
  for (auto e : ev_)
    if (e) cudaEventDestroy(e);
}
void EventTimer::mark(int i) { AO_CUDA(cudaEventRecord(ev_[size_t(i)])); }
double EventTimer::ms(int from, int to) const {
  AO_CUDA(cudaEventSynchronize(ev_[size_t(to)]));
  float t = 0;
  AO_CUDA(cudaEventElapsedTime(&t, ev_[size_t(from)], ev_[size_t(to)]));
  return double(t);
}

RunStatus DeviceKernelBackend::run(const Layout& l, const Inputs& in, Outputs& out) {
  // The device generator knows the default inputs only: never run a probe case on different inputs.
  if (l.c.probe != Probe::None && !from_host_)
    return {RunStatus::Skipped, "probe= inputs are generated on the host only (inputs=host)", 0};
  if (l.c.values != Values::Normal && !from_host_)
    return {RunStatus::Skipped, "values= inputs are shaped on the host only (inputs=host)", 0};
  times_ = {};
  EventTimer ev(3);
  ev.mark(0);
  const Storage st = l.c.dtype == DType::BF16 ? Storage::BF16 : Storage::F32;
  DeviceInputs din = make_device_inputs(l, st, from_host_, &in);
  ev.mark(1);
  times_.inputs_ms = ev.ms(0, 1);
  run_on_device(l, din, out);
  ev.mark(2);
  times_.total_ms = ev.ms(0, 2);
  return {};
}

}  // namespace ao::gpu
