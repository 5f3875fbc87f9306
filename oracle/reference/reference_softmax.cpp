// Softmax passes with GCC/Clang vector extensions: 16 fp32 or 8 fp64 lanes, which each ISA clone lowers to
// one AVX-512 register, two AVX2 ones or four SSE ones (the lanes never pass through a function call, whose
// vector ABI would differ between the clones). Built with -ffp-contract=off (CMakeLists.txt) so that no
// clone fuses a multiply-add the others round twice. One exp body serves both lane types; each type brings
// Cephes's polynomial and its range limits.
#include "reference_softmax.h"

#include "attn_oracle/internal/isa_clones.h"

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

#define AO_SOFTMAX_CLONES AO_ISA_CLONES

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

#define AO_INLINE __attribute__((always_inline)) inline

// Per lane type, Cephes's exp(c) for clamped arguments c (n = round(c / ln 2) by adding a shift constant,
// r = c - n ln 2 in two parts, exp(r) * 2^n from the exponent bits) with its range limits: below kLo, where
// 2^n leaves the normal range, the result is scaled in two steps (2^(n + 64) * 2^-64 in fp32, 2^(n + 128) *
// 2^-128 in fp64: subnormal results rounded once); below kZero it is 0; above kHi (overflow) or NaN the
// lane takes std::exp.
struct F32Lanes {  // 16 lanes, a degree-6 polynomial (expf)
  using T = float;
  using I = int32_t;
  static constexpr int kLanes = 16;
  typedef float V __attribute__((vector_size(kLanes * sizeof(float))));
  typedef int32_t M __attribute__((vector_size(kLanes * sizeof(int32_t))));
  static constexpr float kLo = -87.f, kHi = 88.3f, kZero = -104.f;
  static AO_INLINE void exp_clamped(const V& c, const M& under, V& out) {  // by reference: no vector ABI
    const V t = (c * 1.44269504088896341f + 12582912.f) - 12582912.f;  // 1.5 * 2^23: round to nearest
    V r = c - t * 0.693359375f;
    r = r - t * -2.12194440e-4f;
    const V z = r * r;
    V p = V{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.f;
    const M two_n = (__builtin_convertvector(t, M) + (under ? 127 + 64 : 127)) << 23;
    const V y = p * (V)two_n;  // a bit cast between same-size vectors
    out = under ? y * 5.42101086242752217e-20f : y;  // 2^-64
  }
};

struct F64Lanes {  // 8 lanes, exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)) (exp)
  using T = double;
  using I = int64_t;
  static constexpr int kLanes = 8;
  typedef double V __attribute__((vector_size(kLanes * sizeof(double))));
  typedef int64_t M __attribute__((vector_size(kLanes * sizeof(int64_t))));
  static constexpr double kLo = -708.0, kHi = 709.0, kZero = -746.0;
  static AO_INLINE void exp_clamped(const V& c, const M& under, V& out) {  // by reference: no vector ABI
    constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: n in the low bits of the shifted value
    const V shifted = c * 1.4426950408889634074 + kShift;
    const V t = shifted - kShift;
    V r = c - t * 6.93145751953125E-1;
    r = r - t * 1.42860682030941723212E-6;
    const V z = r * r;
    const V px = r * ((z * 1.26177193074810590878E-4 + 3.02994407707441961300E-2) * z + 9.99999999999999999910E-1);
    const V qx =
        ((z * 3.00198505138664455042E-6 + 2.52448340349684104192E-3) * z + 2.27265548208155028766E-1) * z + 2.0;
    const V p = (px / (qx - px)) * 2.0 + 1.0;
    const M two_n = ((M)shifted - (M)(V{} + kShift) + (under ? int64_t(1023 + 128) : int64_t(1023))) << 52;
    const V y = p * (V)two_n;
    out = under ? y * 0x1p-128 : y;
  }
};

// x = exp(x - m) with the row's sum, lanes summed in a fixed order. A row without rare lanes skips their
// patch-up; a partial vector at the row's end loads and stores only its lanes, its missing lanes add 0.
template <class L>
AO_INLINE typename L::T exp_shift_body(typename L::T* x, int64_t n, typename L::T m) {
  using T = typename L::T;
  using V = typename L::V;
  using M = typename L::M;
  constexpr int N = L::kLanes;
  const auto load = [x](V& v, int64_t i, int64_t k) __attribute__((always_inline)) {
    if (k == N) std::memcpy(&v, x + i, sizeof(V));
    else std::memcpy(&v, x + i, size_t(k) * sizeof(T));
  };
  M seen{};
  for (int64_t i = 0; i < n; i += N) {
    V v = V{} + m;  // a partial vector's missing lanes: x - m = 0
    load(v, i, std::min<int64_t>(N, n - i));
    v = v - m;
    seen |= ~(v <= L::kHi);  // above kHi, or NaN
  }
  typename L::I flags[N];
  std::memcpy(flags, &seen, sizeof flags);
  typename L::I check = 0;
  for (int j = 0; j < N; ++j) check |= flags[j];
  V acc{};
  for (int64_t i = 0; i < n; i += N) {
    const int64_t k = std::min<int64_t>(N, n - i);
    V v{};
    load(v, i, k);
    v = v - m;
    const M rare = ~(v <= L::kHi), zero = v < L::kZero;
    V c = rare ? V{} : v;
    c = zero ? V{} + L::kZero : c;
    const M under = v < L::kLo;
    V y;
    L::exp_clamped(c, under, y);
    y = zero ? V{} : y;
    if (check || k < N) {  // rare lanes from std::exp; a partial vector's missing lanes add 0
      T lanes[N], args[N];
      std::memcpy(lanes, &y, sizeof lanes);
      std::memcpy(args, &v, sizeof args);
      std::memcpy(flags, &rare, sizeof flags);
      for (int j = 0; j < N; ++j) lanes[j] = j >= k ? T(0) : flags[j] ? std::exp(args[j]) : lanes[j];
      std::memcpy(&y, lanes, sizeof lanes);
    }
    if (k == N) std::memcpy(x + i, &y, sizeof(V));
    else std::memcpy(x + i, &y, size_t(k) * sizeof(T));
    acc += y;
  }
  T lanes[N];
  std::memcpy(lanes, &acc, sizeof lanes);
  for (int w = N / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

AO_SOFTMAX_CLONES float exp_shift_impl(float* x, int64_t n, float m) { return exp_shift_body<F32Lanes>(x, n, m); }
AO_SOFTMAX_CLONES double exp_shift_impl(double* x, int64_t n, double m) { return exp_shift_body<F64Lanes>(x, n, m); }

}  // namespace

float exp_shift_sum(float* x, int64_t n, float m) { return exp_shift_impl(x, n, m); }
void exp_shift(float* x, int64_t n, float m) { exp_shift_impl(x, n, m); }
double exp_shift_sum(double* x, int64_t n, double m) { return exp_shift_impl(x, n, m); }
void exp_shift(double* x, int64_t n, double m) { exp_shift_impl(x, n, m); }

AO_SOFTMAX_CLONES void divide_row(float* x, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) x[i] /= d;
}

}  // namespace ao::detail
