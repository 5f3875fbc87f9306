// The one list of bug models (bug_models.h): every family's models, in a fixed order (the selftest's
// matrices, `backends` and `catalog` list them in it).
#include "models.h"

namespace ao {

const char* defect_class_name(DefectClass k) {
  switch (k) {
    case DefectClass::BoundaryMetadata: return "boundary-metadata";
    case DefectClass::EmptyRows: return "empty-rows";
    case DefectClass::WindowAlignment: return "window-alignment";
    case DefectClass::PadLanes: return "pad-lanes";
    case DefectClass::TopkBuffers: return "topk-buffers";
    case DefectClass::SplitKv: return "split-kv";
    default: return "generic";
  }
}

const std::vector<BugModel>& bug_models() {
  static const std::vector<BugModel> m = [] {
    std::vector<BugModel> v;
    for (auto* family : {models::offset_mask_models, models::tile_store_models, models::window_models,
                         models::split_kv_models, models::indexer_catalog_models, models::backward_models,
                         models::indexer_backward_models})
      for (auto& x : family()) v.push_back(std::move(x));
    return v;
  }();
  return m;
}

}  // namespace ao
