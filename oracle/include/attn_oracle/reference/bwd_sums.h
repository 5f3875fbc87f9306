// The SDPA backward's sums over its own P and dS that the comparator's floors take (compare_sdpa_bwd.cpp,
// docs/tolerances.md, "P's rounding"), beside the exact backward: no products of S or dP of their own.
#pragma once
#include <vector>

#include "attn_oracle/inputs/tensors.h"

namespace ao {

// With `weights` (shaped as dO; its first `cols` columns, 1 <= cols <= dim): |dS|^T W into the first `cols`
// columns of each K/V row and head of cols_out.dk (0 in the others); and per (Q buffer row, query head) of
// every valid row, rows[2 (r Hq + h)] = sum_j |dS_rj| max_e |k_je| and rows[2 (r Hq + h) + 1] = sum_j dS_rj^2
// (0 for other rows). dS = P o (dP - D), unscaled.
struct DsSums {
  const std::vector<float>* weights = nullptr;
  int cols = 0;
  std::vector<double> rows;
};

// reference_sdpa_bwd_with_columns (reference.h: the whole backward into out, P^T W of `weights`' first
// `p_cols` columns into cols_out.dv), and the sums over dS into cols_out.dk and ds.rows.
void reference_sdpa_bwd_with_sums(const Layout& l, const Inputs& in, Outputs& out, const std::vector<float>& weights,
                                  int p_cols, Outputs& cols_out, DsSums& ds);

}  // namespace ao
