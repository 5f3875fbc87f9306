// Host-side helpers (compiled by the C++ compiler: fmt does not build under nvcc).
#include "gpu_common.h"

#include <fmt/format.h>

namespace ao::gpu {

void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw CudaError(fmt::format("{} failed: {} ({}) at {}:{}", call, cudaGetErrorString(e), cudaGetErrorName(e), file, line));
}

std::string unavailable_reason() {
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
