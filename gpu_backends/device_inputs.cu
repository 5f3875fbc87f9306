// Device side of device_inputs.h: one thread per element, the same recipe as make_inputs' fill().
#include "device_inputs.h"

#include <algorithm>

#include "attn_oracle/case/dtype.h"
#include "attn_oracle/internal/rng.h"

namespace ao::gpu {

namespace {

template <class T>
__global__ void generate_kernel(GenSpec g, T* dst) {
  const int64_t n = g.rows * g.width;
  const DType dt = static_cast<DType>(g.dtype);
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = idx / g.width, e = idx % g.width;
    const int64_t t = g.token[r];
    float v;
    if (t >= 0)
      v = round_to(dt, generated_value(g.seed, g.tensor, uint64_t(t * g.width + e), g.levels));
    else if (g.poison_generated)
      v = round_to(dt, generated_value(g.seed, g.tensor | 0x10u, uint64_t(r * g.width + e), g.levels));
    else
      v = f32_from_bits(g.poison_bits);
    if constexpr (sizeof(T) == 4)
      dst[idx] = f32_bits(v);
    else
      dst[idx] = f32_to_bf16_bits(v);
  }
}

}  // namespace

void launch_generate(const GenSpec& g, Storage st, void* dst) {
  const int64_t n = g.rows * g.width;
  if (n == 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 132 * 64));
  if (st == Storage::F32)
    generate_kernel<uint32_t><<<blocks, threads>>>(g, static_cast<uint32_t*>(dst));
  else
    generate_kernel<uint16_t><<<blocks, threads>>>(g, static_cast<uint16_t*>(dst));
  AO_CUDA(cudaGetLastError());
}

}  // namespace ao::gpu
