// Tolerances derived from the arithmetic (docs/tolerances.md).
//  * SDPA: an emulation of a flash kernel in the case dtype and the exact fp64 answer on the checked
//    rows (reference_emulation.cpp); FlashAttention's rule per (row, head): a kernel's max error
//    against the exact answer <= c * the emulation's + a floor that follows from the dtype.
//  * SDPA LSE (fp32 in every dtype): a bound of fp32 score, exp, sum and log rounding.
//  * Indexer: the forward-error bound of an fp32-accumulating score (tie-aware recall's score_tol).
#pragma once
#include <cstdint>
#include <vector>
#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/reference/emulation.h"  // SdpaTruth

namespace ao {

// kEmulationFactor (c) and kLambda: emulation.h (the indexer backward's gates use them too).

double unit_roundoff(DType t);          // 2^-8 bf16, 2^-11 fp16, 2^-24 fp32
double dtype_ulp(DType t, double x);    // spacing of the dtype's values at |x| (subnormal spacing at 0)

// Gates of one (row, head). o_gate bounds max_e |O - O_exact|, lse_gate bounds |LSE - LSE_exact|.
struct SdpaRowGate {
  double o_floor = 0, o_gate = 0, lse_gate = 0;
};
SdpaRowGate sdpa_row_gate(const Case& c, const SdpaRowTruth& t);
// rel_l2_err gate: c * the emulation's rel_l2 + floor; n = elements compared, floor2 = sum over
// (row, head) of dim_v * o_floor^2, emul2 / exact2 = the emulation's squared error / exact norm.
double sdpa_rel_l2_gate(double emul2, double exact2, double floor2, int64_t n);

// Indexer: tie-aware recall's score tolerance of a row; kmax = max_abs_key(l, in).
double max_abs_key(const Layout& l, const Inputs& in);
double indexer_score_tolerance(const Layout& l, const Inputs& in, int64_t row, double kmax);

}  // namespace ao
