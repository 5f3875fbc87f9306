// Exact CPU references (fp32 or fp64 per case precision; the large products through OpenBLAS or Eigen). They
// read inputs only from valid slots, compute only layout.check_rows, and write outputs at the bound offsets.
// The seams (reference_seams.h) are where a bug model re-creates a kernel's defect on the same path; the
// default, exact_seams(), is the oracle.
#pragma once
#include <string>

#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/reference/reference_seams.h"

namespace ao {

void reference_indexer(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& s = exact_seams());
// One key's indexer score in fp64 (scale * sum_h w_h ReLU(q_h . k)): the comparator's exact score, and
// under ties=strict the reference's order of tied keys (equal fp64 scores ascend by index).
double exact_indexer_score(const Layout& l, const Inputs& in, int64_t row, int64_t key_row);
void reference_sdpa(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& s = exact_seams());
// The SDPA backward (pass=bwd): dQ of every valid row, dK/dV of every valid K/V row (a CP rank's partial),
// from the saved O and LSE in `in` (see reference_sdpa_bwd.cpp).
void reference_sdpa_bwd(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& s = exact_seams());
// dV = P^T dO alone (exact seams), of the first `cols` columns of `dout`, read in place of in.dout: the
// comparator's weighted column sums of P, without a copy of the inputs or the rest of the backward.
// out.dv holds them in its first `cols` columns (zeros in the others); out.dq and out.dk are untouched.
void reference_sdpa_bwd_dv(const Layout& l, const Inputs& in, const std::vector<float>& dout, int cols, Outputs& out);
// The whole backward (exact seams) into out, and beside it what reference_sdpa_bwd_dv(weights, cols) gives,
// bit for bit, into cols_out.dv, from the backward's own P (no products of S of its own).
void reference_sdpa_bwd_with_columns(const Layout& l, const Inputs& in, Outputs& out, const std::vector<float>& weights,
                                     int cols, Outputs& cols_out);
// An emulation of a flash backward in the case dtype (fp32 accumulation; P and scale * dS rounded to the
// dtype before the products that take them; under GQA each query head's dK/dV rounded before the group's
// sum): what the backward's gates are derived from (compare_sdpa_bwd).
void emulate_sdpa_bwd(const Layout& l, const Inputs& in, Outputs& out);
// Both fp32 answers of the comparator from one backward: f32 = reference_sdpa_bwd at fp32 precision, emul =
// emulate_sdpa_bwd, bit for bit, with the products of S and dP (4 of their 14) made once.
void reference_and_emulate_sdpa_bwd_f32(const Layout& l, const Inputs& in, Outputs& f32, Outputs& emul);

// A case's inputs: make_inputs, and under pass=bwd what the backward takes from the forward (sdpa: O and
// LSE; indexer: the top-k and the distributions over its slots), the exact forward's results rounded as a
// kernel's forward hands them over. Every path (Trial, the input-write check's pristine copy) uses this.
Inputs make_case_inputs(const Layout& l);
// What the references run on in this process: the GEMM library with its version and the kernels it chose for
// this CPU, and the thread count (OMP_NUM_THREADS or the physical cores): "OpenBLAS 0.3.34, SkylakeX kernels;
// 16 threads". A slow check on a fast CPU shows here first (an OPENBLAS_CORETYPE naming old kernels).
std::string reference_runtime();

}  // namespace ao
