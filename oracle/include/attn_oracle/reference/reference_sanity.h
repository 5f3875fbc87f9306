// A reference is trusted only where it is checkable: before its outputs judge a backend (`--vs`),
// they must pass the contract a backend is held to, on the comparator's rows (layout.check_rows)
// and allowed keys (Layout::allowed_range):
//  * indexer: every checked row written (no sentinel); every index allowed for its row (same
//    document, causal/ratio range); no duplicates; exactly min(k, allowed) indices, the rest -1.
//  * sdpa: every checked valid row's O and LSE written and finite; LSE exactly -inf for a row
//    without allowed keys (its O must still be finite).
#pragma once
#include <string>
#include "attn_oracle/inputs/tensors.h"

namespace ao {

// Empty when the outputs are sane; otherwise what is wrong with the first bad row, e.g.
// "row 17 (doc 0, pos 17): index 40 is not an allowed key (allowed KV rows [0, 18))".
std::string reference_sanity(const Layout& l, const Outputs& ref);

}  // namespace ao
