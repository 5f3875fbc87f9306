// `attn-oracle show`: a Layout as text for people (display only; the core has no display code).
#pragma once
#include <string>

#include "attn_oracle/layout/layout.h"

namespace ao {

// Per rank/segment row ranges, causal offsets, key ranges, pad slots, checked rows and the memory estimate.
std::string describe_layout(const Layout& l);

}  // namespace ao
