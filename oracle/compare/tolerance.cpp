// Tolerance derivation (tolerance.h; docs/tolerances.md). u = 2^-24 is fp32's
// unit roundoff, u_d the dtype's; n = the row's allowed keys; D = head dim.
#include "attn_oracle/compare/tolerance.h"

#include <algorithm>
#include <cmath>

namespace ao {

namespace {
constexpr double kU32 = 0x1p-24;
}

double unit_roundoff(DType t) { return t == DType::BF16 ? 0x1p-8 : t == DType::F16 ? 0x1p-11 : kU32; }

double dtype_ulp(DType t, double x) {
  const int mant = t == DType::BF16 ? 7 : t == DType::F16 ? 10 : 23;
  const int emin = t == DType::F16 ? -14 : -126;
  const double a = std::fabs(x);
  const int e = a > 0 ? std::max(std::ilogb(a), emin) : emin;
  return std::ldexp(1.0, e - mant);
}

// O of one (row, head): gate = c * emul_err + floor, floor = the part of a kernel's error that the
// emulation cannot reproduce (another order, another exp, another rounding point of P):
//  * ulp_d(max|O|): the output rounding can land on the other neighbour of the exact value;
//  * lambda * u_d * v_rms: P rounded to the dtype at another point (a running max instead of the final
//    one), a sum of n independent roundings of p_i v_i (none in fp32);
//  * u * (D + 4) * score_abs * v_spread: fp32 score rounding (D-term dot, scale, log2(e), minus max)
//    moves the weights, dO = sum_i p_i (ds_i - ds^) (v_i - O), by at most sum_i p_i |v_i - O| <= v_spread
//    (min(2 v_abs, 2 max|v| (1 - sum p^2)): near 0 on a row whose softmax is one key, as at scale=1e6);
//  * u * (lambda sqrt(n) + 4) * v_abs: fp32 accumulation of P.V and of the sum in another order.
// A row without keys must give O = 0: gate ulp_d(1), one rounding at the scale of V.
// A row whose every allowed key scores one exact fp32 value has score_abs 0 (sdpa_truth): its score
// rounding is the same for every key and moves no weight, so neither term holds it (docs/tolerances.md, "P's rounding").
// LSE (fp32 in every dtype): c * u * ((D + 4) score_abs + 4 + lambda sqrt(n) + log(n) + |LSE|):
// score rounding, exp (<= 2 ulp each), the n-term sum, the log and the final add. It is relative to
// |LSE| where the scores dominate it (score_abs ~ |LSE| at large scale).
SdpaRowGate sdpa_row_gate(const Case& c, const SdpaRowTruth& t) {
  SdpaRowGate g;
  if (t.keys == 0) {
    g.o_floor = g.o_gate = dtype_ulp(c.dtype, 1.0);
    g.lse_gate = 0;  // -inf exactly (compare_sdpa)
    return g;
  }
  const double n = double(t.keys), D = double(c.dim);
  const double u_d = c.dtype == DType::F32 ? 0.0 : unit_roundoff(c.dtype);
  g.o_floor = dtype_ulp(c.dtype, t.o_max) + kLambda * u_d * t.v_rms +
              kU32 * ((D + 4) * t.score_abs * t.v_spread + (kLambda * std::sqrt(n) + 4) * t.v_abs);
  g.o_gate = kEmulationFactor * t.emul_err + g.o_floor;
  g.lse_gate = kEmulationFactor * kU32 *
               ((D + 4) * t.score_abs + 4 + kLambda * std::sqrt(n) + std::log(n) + std::fabs(t.lse));
  return g;
}

// rel_l2 aggregates many independent roundings, so the emulation's value is a stable estimate: the
// floor is the per-row floors' relative norm shrunk by min(1, lambda / sqrt(elements)).
double sdpa_rel_l2_gate(double emul2, double exact2, double floor2, int64_t n) {
  const double norm = exact2 > 0 ? exact2 : 1.0;
  const double shrink = std::min(1.0, kLambda / std::sqrt(double(std::max<int64_t>(n, 1))));
  return kEmulationFactor * std::sqrt(emul2 / norm) + shrink * std::sqrt(floor2 / norm);
}

// Indexer: forward-error bound of an fp32-accumulating kernel on this row: the inputs are exact (already
// rounded to the dtype), products of bf16/fp16 values are exact in fp32, so the error comes from the
// D-term dot and H-term head sums: (D + H) * 2^-24 * M with M = scale * sum_h |w_h| * ||q_h||_1 * max|k|.
// fp32 inputs may be multiplied in TF32 on tensor cores (10-bit mantissa): add 2^-10 * M.
double max_abs_key(const Layout& l, const Inputs& in) {
  double kmax = 0;
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s)
      for (int e = 0; e < l.c.dim; ++e)
        kmax = std::max(kmax, double(std::fabs(in.k[size_t((d.kv_off + s) * l.c.dim + e)])));
  return kmax;
}

double indexer_score_tolerance(const Layout& l, const Inputs& in, int64_t row, double kmax) {
  if (l.c.score_tol >= 0) return l.c.score_tol;
  const int H = l.c.heads, D = l.c.dim;
  double m = 0;
  for (int h = 0; h < H; ++h) {
    double l1 = 0;
    for (int d = 0; d < D; ++d) l1 += std::fabs(double(in.q[size_t((row * H + h) * D + d)]));
    m += std::fabs(double(in.w[size_t(row * H + h)])) * l1;
  }
  m *= kmax * l.scale;
  double u = double(D + H) * kU32;
  if (l.c.dtype == DType::F32) u += std::ldexp(1.0, -10);
  return u * m;
}

}  // namespace ao
