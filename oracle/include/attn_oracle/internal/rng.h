// Counter-based input generator: value = f(seed, tensor id, element index). No state, so any element
// can be generated anywhere (CPU, GPU, any order) and comes out bit-identical.
#pragma once
#include <cstdint>
#include <cstring>
#include "attn_oracle/internal/hd.h"

namespace ao {

enum TensorId : uint32_t { kTensorQ = 1, kTensorK = 2, kTensorV = 3, kTensorW = 4, kTensorDO = 5,
                        kTensorSavedO = 6, kTensorSavedLse = 7, kTensorTarget = 8, kTensorGradLoss = 9,
                        kTensorPadFill = 15 };

AO_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

AO_HD uint64_t counter_hash(uint64_t seed, uint32_t tensor, uint64_t index) {
  return splitmix64(splitmix64(seed ^ (uint64_t(tensor) << 56)) ^ index);
}

// Uniform in [-1, 1) on a 2^-23 grid: exact in fp32, so no rounding mode can differ between machines.
AO_HD float uniform_pm1(uint64_t h) {
  return float(int32_t(uint32_t(h >> 40)) - (1 << 23)) * (1.0f / float(1 << 23));
}

// `levels` = N > 1 rounds to the nearest multiple of 2/N, ties away from zero: N+1 values for even N,
// N for odd N (plus -(N+1)/N at u = -1); tie stress, as vLLM's top-k tests do.
AO_HD float generated_value(uint64_t seed, uint32_t tensor, uint64_t index, uint32_t levels) {
  float u = uniform_pm1(counter_hash(seed, tensor, index));
  if (levels > 1) {
    float half = float(levels) * 0.5f;
    int32_t q = int32_t(u * half + (u >= 0.f ? 0.5f : -0.5f));
    u = float(q) / half;
  }
  return u;
}

}  // namespace ao
