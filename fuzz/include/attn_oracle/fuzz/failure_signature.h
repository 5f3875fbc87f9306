// When two failures of a campaign are "the same" (one found file per signature), and which of two cases
// of one signature is the smaller (the one kept).
#pragma once
#include <string>

#include "attn_oracle/layout/layout.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

// Two failures are "the same" when their signatures are equal: the backend under test (its portable
// spelling, normalize_backend_spec: a temp socket or the checkout folder does not make a new one); the
// case's verdict (FAIL with the sorted names, not values, of its failing metrics, or ERROR); and the
// case's structure, read from the layout its failing trial ran (CaseResult::layout): op, mask, sliding
// window or not, cp > 1 or not, number of documents (1, 2 or 3+), padding present or not (gaps before,
// between or after documents in any buffer, offsets, tail, capacity, CP chunk padding), dtype class (f32
// or 16-bit). Written into each found file as `# signature: ...`.
std::string failure_signature(const std::string& backend, const Layout& failing, const Verdict& v);
// Size order among cases of one signature: valid tokens (q + kv), then documents, then line length.
bool smaller_case(const Case& a, const Case& b);

}  // namespace ao
