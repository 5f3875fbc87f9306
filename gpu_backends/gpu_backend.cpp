// Host helpers of gpu_backend.h.
#include "gpu_backend.h"

#include "device_run.h"

#include <algorithm>
#include <sstream>

#include "attn_oracle/case/case.h"

namespace ao::gpu {

void bad_knob(const std::string& name, const std::string& knobs, const std::string& why) {
  throw CaseError("backend", name + ":" + knobs, why);
}

std::map<std::string, std::string> parse_knobs(const std::string& name, const std::string& knobs,
                                               const std::vector<std::string>& allowed) {
  std::map<std::string, std::string> kv;
  if (knobs.empty()) return kv;
  std::stringstream ss(knobs);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) bad_knob(name, knobs, "knob '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string known;
      for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
      bad_knob(name, knobs, "unknown knob '" + k + "' (known: " + known + ")");
    }
    if (!kv.emplace(k, v).second) bad_knob(name, knobs, "knob '" + k + "' given twice");
  }
  return kv;
}

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
