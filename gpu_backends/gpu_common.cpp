// Host-side helpers (compiled by the C++ compiler: fmt does not build under nvcc).
#include "gpu_common.h"

#include <fmt/format.h>

#include <mutex>

namespace ao::gpu {

namespace {
// Errors that leave the process's CUDA context unusable: every later CUDA call returns them again.
bool sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc: case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError: case cudaErrorAssert: case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}
std::mutex g_lost_mu;
std::string g_lost;  // the first sticky error seen, as check() worded it
}  // namespace

void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::string what = fmt::format("{} failed: {} ({}) at {}:{}", call, cudaGetErrorString(e), cudaGetErrorName(e), file, line);
  if (sticky(e)) {
    std::lock_guard<std::mutex> g(g_lost_mu);
    if (g_lost.empty()) g_lost = what;
  }
  throw CudaError(what);
}

std::string unavailable_reason() {
  {
    // Once the context is lost, a run would only report the old error again (or, shrunk, a case that
    // "fails" for no reason of its own): the GPU backends stop being available to this process.
    std::lock_guard<std::mutex> g(g_lost_mu);
    if (!g_lost.empty())
      return "the CUDA context of this process was lost (" + g_lost +
             "): every later CUDA call fails; run the case again in a fresh process";
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no usable CUDA device (cudaGetDeviceCount: {})", cudaGetErrorString(e));
  }
  if (n == 0) return "no CUDA device on this machine";
  return {};
}

std::string device_description() {
  if (!unavailable_reason().empty()) return "no GPU";
  cudaDeviceProp p{};
  int dev = 0, drv = 0, rt = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&p, dev);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  return fmt::format("{} (sm_{}{}), CUDA driver API {}.{}, runtime {}.{}", p.name, p.major, p.minor, drv / 1000,
                     (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}

}  // namespace ao::gpu
