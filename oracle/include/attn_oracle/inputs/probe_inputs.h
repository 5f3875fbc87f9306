// Mask-probe inputs (case key probe=edges, sdpa): Q/K/V where every row's boundary keys carry a large,
// distinctive share of the softmax, so one key too many or too few moves O by O(1) relative.
#pragma once
#include "attn_oracle/inputs/tensors.h"

namespace ao {

// Overwrites the valid Q/K/V rows of `in` (made by make_inputs for l.c) with the probe pattern;
// pad slots keep their poison. Values depend on (document, token) and the seed only.
void apply_edge_probe(const Layout& l, Inputs& in);

}  // namespace ao
