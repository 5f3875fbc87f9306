// Shared by the GPU backends: device availability, error wrapping with the failing call.
// Note: .cu files must not include fmt (its consteval checks do not compile under nvcc 13).
#pragma once
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace ao::gpu {

// Empty when a CUDA device is usable; otherwise why not (reported as the backend's skip reason): no
// device, or this process's CUDA context lost to a sticky error (check()).
std::string unavailable_reason();
// "NVIDIA H200, driver 580.xx, runtime 13.0" (for reports).
std::string device_description();

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws CudaError naming the call; a sticky error (the context is lost: an illegal address or instruction,
// a launch failure, ...) is also remembered, and unavailable_reason() names it from then on.
void check(cudaError_t e, const char* call, const char* file, int line);

}  // namespace ao::gpu

#define AO_CUDA(call) ::ao::gpu::check((call), #call, __FILE__, __LINE__)
