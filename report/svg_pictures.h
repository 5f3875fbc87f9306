// The pictures report.html shows for one failing case, each an HTML fragment holding one inline
// <svg> (plus, where useful, a small table of the numbers the picture is drawn from). Long axes are
// binned (every cell shows the worst / union of what it covers), so the output stays bounded
// (a few hundred kB) whatever the case size; small cases are drawn one cell per row / key / head.
//   layout_strip:  every buffer as a bar: documents, pad slots, capacity; under CP the global buffer
//                  cut into zigzag chunks coloured by the rank that holds them, and this rank's chunks
//                  mapped onto its local Q rows with their q_causal_offsets.
//   selection_map: indexer, Q rows x KV rows: the allowed (causal, same-document) region, picks both
//                  made, reference picks the backend missed, the backend's extra picks; a zoom on the
//                  extra picks when they are confined to a narrow key range; per-row overlap bars.
//   error_map:     SDPA, O rows x heads relative error and LSE error, the O buffer's layout above it
//                  on the same axis; NaN/Inf, unwritten rows and written (clobbered) pad slots marked.
//   gradient_maps: pass=bwd, each gradient's rows x heads err/gate as its comparator judged it
//                  (Verdict::cell_maps): the Q buffer's (dQ; the indexer's dW) and the K/V buffer's
//                  (dK, dV), each under its buffer's layout, marked as the error map is.
#pragma once
#include <string>

#include "attn_oracle/pipeline/run_case.h"

namespace ao {

// `id` makes pattern ids unique within the page.
std::string svg_layout_strip(const Layout& l, const std::string& id);
std::string svg_selection_map(const CaseArtifacts& a, const std::string& id);
std::string svg_error_map(const CaseArtifacts& a, const std::string& id);
std::string svg_gradient_maps(const CaseArtifacts& a, const std::string& id);

}  // namespace ao
