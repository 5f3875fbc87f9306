// fp32 softmax passes with GCC/Clang vector extensions: 16 lanes, which each ISA clone lowers to one
// AVX-512 register, two AVX2 ones or four SSE ones (the lanes never pass through a function call, whose
// vector ABI would differ between the clones). Built with -ffp-contract=off (CMakeLists.txt) so that no
// clone fuses a multiply-add the others round twice. exp is Cephes's expf: n = round(x / ln 2) by the
// 1.5 * 2^23 shift, r = x - n ln 2 in two parts, a degree-6 polynomial, times 2^n from the exponent bits.
#include "reference_softmax.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ao::detail {

namespace {

constexpr int kLanes = 16;
typedef float vf __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(kLanes * sizeof(int32_t))));
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

#define AO_SOFTMAX_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// Loads lanes [i, i + k) of x into v (the rest keep v's fill) and stores them back: whole vectors in the
// loop body, a partial one at the row's end.
#define AO_LOAD(v, x, i, k) std::memcpy(&(v), (x) + (i), size_t(k) * sizeof(float))
#define AO_STORE(x, i, v, k) std::memcpy((x) + (i), &(v), size_t(k) * sizeof(float))

AO_SOFTMAX_CLONES bool finite_max(const float* x, int64_t n, float& mx) {
  vf m = vf{} - kInf;
  vi bad{};
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t k = std::min<int64_t>(kLanes, n - i);
    vf v = vf{} - std::numeric_limits<float>::max();  // a partial vector's missing lanes: finite, no max
    if (k == kLanes) AO_LOAD(v, x, i, kLanes);
    else AO_LOAD(v, x, i, k);
    const vf a = v < 0 ? -v : v;
    bad |= ~(a <= std::numeric_limits<float>::max());  // NaN and +-inf
    m = v > m ? v : m;
  }
  float lanes[kLanes];
  int32_t flags[kLanes];
  std::memcpy(lanes, &m, sizeof lanes);
  std::memcpy(flags, &bad, sizeof flags);
  float r = -kInf;
  for (int j = 0; j < kLanes; ++j) {
    if (flags[j]) return false;
    r = std::max(r, lanes[j]);
  }
  mx = r;
  return true;
}

namespace {

// x = exp(x - m) with the row's sum. Below kLo, where 2^n leaves the normal range, the result is scaled
// in two steps (p * 2^(n+64) * 2^-64: subnormal results rounded once); below -104 it is 0. Lanes above
// kHi (overflow) or NaN take std::exp; a row without any skips that check.
constexpr float kLo = -87.f, kHi = 88.3f, kZero = -104.f;
AO_SOFTMAX_CLONES float exp_shift_impl(float* x, int64_t n, float m) {
  vi seen{};
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t k = std::min<int64_t>(kLanes, n - i);
    vf v = vf{} + m;  // a partial vector's missing lanes: x - m = 0
    if (k == kLanes) AO_LOAD(v, x, i, kLanes);
    else AO_LOAD(v, x, i, k);
    v = v - m;
    seen |= ~(v <= kHi);  // above kHi, or NaN
  }
  int32_t flags[kLanes];
  std::memcpy(flags, &seen, sizeof flags);
  int32_t check = 0;
  for (int j = 0; j < kLanes; ++j) check |= flags[j];
  vf acc{};
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t k = std::min<int64_t>(kLanes, n - i);
    vf v{};
    if (k == kLanes) AO_LOAD(v, x, i, kLanes);
    else AO_LOAD(v, x, i, k);
    v = v - m;
    const vi rare = ~(v <= kHi), under = v < kLo, zero = v < kZero;
    vf c = rare ? vf{} : v;
    c = zero ? vf{} + kZero : c;
    const vf t = (c * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
    vf r = c - t * 0.693359375f;
    r = r - t * -2.12194440e-4f;
    const vf z = r * r;
    vf p = vf{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.f;
    const vi two_n = (__builtin_convertvector(t, vi) + (under ? 127 + 64 : 127)) << 23;
    vf y = p * (vf)two_n;  // a bit cast between same-size vectors
    y = under ? y * 5.42101086242752217e-20f : y;  // 2^-64
    y = zero ? vf{} : y;
    if (check || k < kLanes) {  // rare lanes from std::exp; a partial vector's missing lanes add 0
      float lanes[kLanes], args[kLanes];
      std::memcpy(lanes, &y, sizeof lanes);
      std::memcpy(args, &v, sizeof args);
      std::memcpy(flags, &rare, sizeof flags);
      for (int j = 0; j < kLanes; ++j) lanes[j] = j >= k ? 0.f : flags[j] ? std::exp(args[j]) : lanes[j];
      std::memcpy(&y, lanes, sizeof lanes);
    }
    if (k == kLanes) AO_STORE(x, i, y, kLanes);
    else AO_STORE(x, i, y, k);
    acc += y;
  }
  float lanes[kLanes];
  std::memcpy(lanes, &acc, sizeof lanes);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

// The fp64 twin, 8 lanes: Cephes's exp (n = round(x / ln 2) by the 1.5 * 2^52 shift, whose low bits are n;
// r = x - n ln 2 in two parts; exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2))), times 2^n from the exponent
// bits. Below kLoD the result is scaled in two steps (2^(n+128) * 2^-128), below kZeroD it is 0; lanes above
// kHiD (overflow) or NaN take std::exp. Lanes summed in a fixed order, as the fp32 one.
constexpr int kLanesD = 8;
typedef double vd __attribute__((vector_size(kLanesD * sizeof(double))));
typedef int64_t vl __attribute__((vector_size(kLanesD * sizeof(int64_t))));
constexpr double kLoD = -708.0, kHiD = 709.0, kZeroD = -746.0, kShiftD = 6755399441055744.0;  // 1.5 * 2^52
#define AO_LOAD_D(v, x, i, k) std::memcpy(&(v), (x) + (i), size_t(k) * sizeof(double))
#define AO_STORE_D(x, i, v, k) std::memcpy((x) + (i), &(v), size_t(k) * sizeof(double))
AO_SOFTMAX_CLONES double exp_shift_impl(double* x, int64_t n, double m) {
  vl seen{};
  for (int64_t i = 0; i < n; i += kLanesD) {
    const int64_t k = std::min<int64_t>(kLanesD, n - i);
    vd v = vd{} + m;  // a partial vector's missing lanes: x - m = 0
    AO_LOAD_D(v, x, i, k);
    v = v - m;
    seen |= ~(v <= kHiD);  // above kHiD, or NaN
  }
  int64_t flags[kLanesD];
  std::memcpy(flags, &seen, sizeof flags);
  int64_t check = 0;
  for (int j = 0; j < kLanesD; ++j) check |= flags[j];
  vd acc{};
  const vl shift_bits = (vl)(vd{} + kShiftD);
  for (int64_t i = 0; i < n; i += kLanesD) {
    const int64_t k = std::min<int64_t>(kLanesD, n - i);
    vd v{};
    AO_LOAD_D(v, x, i, k);
    v = v - m;
    const vl rare = ~(v <= kHiD), under = v < kLoD, zero = v < kZeroD;
    vd c = rare ? vd{} : v;
    c = zero ? vd{} + kZeroD : c;
    const vd shifted = c * 1.4426950408889634074 + kShiftD;  // round to nearest: n in the low bits
    const vd t = shifted - kShiftD;
    vd r = c - t * 6.93145751953125E-1;
    r = r - t * 1.42860682030941723212E-6;
    const vd z = r * r;
    const vd px = r * ((z * 1.26177193074810590878E-4 + 3.02994407707441961300E-2) * z + 9.99999999999999999910E-1);
    const vd qx =
        ((z * 3.00198505138664455042E-6 + 2.52448340349684104192E-3) * z + 2.27265548208155028766E-1) * z + 2.0;
    const vd p = (px / (qx - px)) * 2.0 + 1.0;
    const vl two_n = ((vl)shifted - shift_bits + (under ? int64_t(1023 + 128) : int64_t(1023))) << 52;
    vd y = p * (vd)two_n;  // a bit cast between same-size vectors
    y = under ? y * 0x1p-128 : y;
    y = zero ? vd{} : y;
    if (check || k < kLanesD) {  // rare lanes from std::exp; a partial vector's missing lanes add 0
      double lanes[kLanesD], args[kLanesD];
      std::memcpy(lanes, &y, sizeof lanes);
      std::memcpy(args, &v, sizeof args);
      std::memcpy(flags, &rare, sizeof flags);
      for (int j = 0; j < kLanesD; ++j) lanes[j] = j >= k ? 0.0 : flags[j] ? std::exp(args[j]) : lanes[j];
      std::memcpy(&y, lanes, sizeof lanes);
    }
    AO_STORE_D(x, i, y, k);
    acc += y;
  }
  double lanes[kLanesD];
  std::memcpy(lanes, &acc, sizeof lanes);
  for (int w = kLanesD / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

}  // namespace

float exp_shift_sum(float* x, int64_t n, float m) { return exp_shift_impl(x, n, m); }
void exp_shift(float* x, int64_t n, float m) { exp_shift_impl(x, n, m); }
double exp_shift_sum(double* x, int64_t n, double m) { return exp_shift_impl(x, n, m); }
void exp_shift(double* x, int64_t n, double m) { exp_shift_impl(x, n, m); }

AO_SOFTMAX_CLONES void divide_row(float* x, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) x[i] /= d;
}

}  // namespace ao::detail
