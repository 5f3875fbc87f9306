// Shared by the bug models' files: each family's list (model_list.cpp joins them into bug_models()) and
// the small pieces several models build on.
#pragma once
#include <memory>

#include "attn_oracle/backends/bug_models.h"

namespace ao::models {

std::vector<BugModel> offset_mask_models();    // offsets_masks.cpp: offsets, masks, heads, stored values
std::vector<BugModel> tile_store_models();     // tile_stores.cpp: what tiled kernels store
std::vector<BugModel> window_models();         // window.cpp: windows, alignment, CP and offsets (catalog B, C, F)
std::vector<BugModel> split_kv_models();       // split_kv.cpp: split-KV, empty rows, LSE (catalog D, E)
std::vector<BugModel> backward_models();        // backward.cpp: the SDPA backward (pass=bwd)
std::vector<BugModel> indexer_catalog_models();  // indexer_catalog.cpp: DSA top-k indexers (catalog A)
std::vector<BugModel> indexer_backward_models();  // indexer_backward.cpp: the indexer's KL loss and gradients

// A model's seams: one instance of a ReferenceSeams subclass, shared by every backend made from it.
template <class S, class... A>
std::shared_ptr<const ReferenceSeams> seams(A&&... a) {
  return std::make_shared<const S>(std::forward<A>(a)...);
}

// Row r's exact allowed range (document key coordinates) and its document.
struct RowKeys {
  const QuerySegment& seg;
  const DocLayout& doc;
  int64_t lo, hi;
};
inline RowKeys exact_row_keys(const Layout& l, int64_t r, int64_t p) {
  const auto& seg = l.seg_of(r);
  int64_t lo, hi;
  l.allowed_range(seg.doc, p, lo, hi);
  return {seg, l.docs[size_t(seg.doc)], lo, hi};
}

}  // namespace ao::models
