// The references' working memory per thread (their row blocks), for the memory budget: each figure is
// defined next to the block constants it follows (reference_indexer.cpp, reference_sdpa.cpp).
#pragma once
#include <vector>

#include "attn_oracle/layout/layout.h"

namespace ao {

std::vector<ScratchBytes> indexer_reference_scratch(const Layout& l);
std::vector<ScratchBytes> sdpa_reference_scratch(const Layout& l);
inline std::vector<ScratchBytes> reference_scratch_bytes(const Layout& l) {
  return l.c.op == Op::Indexer ? indexer_reference_scratch(l) : sdpa_reference_scratch(l);
}

}  // namespace ao
