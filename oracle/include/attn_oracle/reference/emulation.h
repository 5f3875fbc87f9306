// The SDPA answers the tolerances are derived from (compare/tolerance.h), on the checked valid rows:
// the exact fp64 answer and an emulation of a flash kernel in the case dtype (reference_emulation.cpp).
#pragma once
#include <cstdint>
#include <vector>
#include "attn_oracle/inputs/tensors.h"

namespace ao {

inline constexpr double kEmulationFactor = 2;  // c: FlashAttention's "within 2x of the emulation's error"
inline constexpr double kLambda = 4;           // probabilistic rounding bound lambda*sqrt(n)*u (Higham-Mary)

// One checked (row, head) of an SDPA case: the exact and the emulated answers and the magnitudes the
// floors are derived from. p^ = exact softmax weights over the row's allowed keys.
struct SdpaRowTruth {
  int64_t keys = 0;       // allowed keys (0: the row must give O = 0, LSE = -inf)
  double lse = 0;         // exact LSE (-inf without keys)
  double score_abs = 0;   // sum_i p^_i * scale * sum_d |q_d k_id|: what fp32 score rounding scales with
  double v_abs = 0;       // max_e sum_i p^_i |v_ie|: what fp32 P.V accumulation scales with
  double v_rms = 0;       // max_e sqrt(sum_i p^_i^2 v_ie^2): what rounding P to the dtype scales with
  // A bound on max_e sum_i p_i |v_ie - O_e|, what a change of the weights moves O by: min(2 v_abs,
  // 2 max_i |v_i| (1 - sum_i p_i^2)) (sum_i p_i |v_i - O| <= sum_ik p_i p_k |v_i - v_k|): near 0 on a row
  // whose softmax is one key, where score rounding moves no weight that matters.
  double v_spread = 0;
  double emul_err = 0;    // max_e |O_emul - O_exact|
  double o_max = 0;       // max_e |O_exact|
};

struct SdpaTruth {
  std::vector<int64_t> rows;        // valid checked Q rows, in check order
  std::vector<SdpaRowTruth> rh;     // [rows, hq]
  std::vector<double> o_exact;      // [rows, hq, dim_v]
  std::vector<float> o_emul;        // [rows, hq, dim_v], rounded to the dtype
};

// Exact fp64 and dtype-emulated SDPA on the checked valid rows (reference_emulation.cpp).
SdpaTruth sdpa_truth(const Layout& l, const Inputs& in);

}  // namespace ao
