// Input dtypes and round-to-nearest-even conversions written in integer arithmetic, so the CPU
// oracle and a CUDA kernel round identically (no dependence on host _Float16 or cuda_fp16 rounding).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include "attn_oracle/internal/hd.h"

namespace ao {

enum class DType { F32, BF16, F16 };

AO_HD uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AO_HD float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

AO_HD uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
AO_HD float bf16_bits_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

AO_HD uint16_t f32_to_f16_bits(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                   // half subnormal range
    if (ax < 0x33000000u) return uint16_t(sign);            // <= 2^-25 rounds to zero
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return uint16_t(sign | r);
}
AO_HD float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return f32_from_bits(sign);
    float v = float(m) * (1.0f / 16777216.0f);  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

AO_HD float round_to(DType t, float x) {
  switch (t) {
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(x));
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(x));
    default: return x;
  }
}

}  // namespace ao
