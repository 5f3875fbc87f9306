// The CPU bug models: each names a real defect class and re-creates it either through the reference's
// seams (reference_seams.h: the defect changes what is computed, read or where it lands) or as an
// output transform applied after the exact run (the defect changes what is stored: unwritten tiles,
// pad-slot writes, merge bugs). Each model is its own unit under oracle/backends/models/, with the
// cases that prove its claims.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "attn_oracle/backends/backend.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

// Rewrites a backend's outputs after the reference computed them.
using OutputTransform = std::function<void(const Layout&, const Inputs&, Outputs&)>;

// The defect classes of docs/defect-catalog.md (five frequent ones, two smaller ones)
// plus `generic` for the models invented here that re-create no single public report.
enum class DefectClass { BoundaryMetadata, EmptyRows, WindowAlignment, PadLanes, TopkBuffers, SplitKv, Generic };
const char* defect_class_name(DefectClass k);

// Where a model case runs. Ordinary: BugModelClaims, on every seed of kModelCaseSeeds. Production: a case
// at a production kernel's scale (32 heads, dim 128, bf16, thousands of keys per row, CP 32) whose point is
// the GPU kernel's large-tile and many-chunk paths; the CPU reference needs minutes for it, so the GPU knob
// plan (scripts/device/catalog-plan.py) runs it on the first seed, on the device host, and the CPU claim
// test only checks its line and metrics.
enum class CaseScale { Ordinary, Production };
// A case line (without seed) on the model's trigger, and the gated metrics it must fail there (each
// among the model's `catches`), on every seed of kModelCaseSeeds, while cpu-ref passes.
struct TriggerCase {
  std::string line;
  std::vector<std::string> fails;
  CaseScale scale = CaseScale::Ordinary;
};
// A case line (without seed) outside the model's trigger: its judged outputs equal cpu-ref's bitwise.
struct OutsideCase {
  std::string line, why = {};
  CaseScale scale = CaseScale::Ordinary;
};
inline constexpr uint64_t kModelCaseSeeds[] = {3, 101, 977};

struct BugModel {
  std::string name, what;
  bool indexer, sdpa;  // ops the defect is defined for
  // The pass it is defined for (declined on the other); empty: both, for a defect in a seam both passes
  // share (which keys a row sees). Its transform rewrites this pass's outputs (empty: the forward's).
  std::optional<Pass> pass = {};
  std::shared_ptr<const ReferenceSeams> seams = {};  // null: the exact reference's
  OutputTransform transform = {};                      // empty = none
  // Where the defect was seen: the catalog id ("[20]", "" for a model invented here) and the public
  // report(s) ("FlashAttention #895"; "" for generic models), the class, and the gated metrics that
  // must catch it (each claim is tested against corpus/catalog/<name>.case).
  std::string catalog = {}, source = {};
  DefectClass defect_class = DefectClass::Generic;
  std::vector<std::string> catches = {};
  std::vector<TriggerCase> triggers = {};
  std::vector<OutsideCase> outside = {};
};

// Every bug model, in the order of oracle/backends/models/model_list.cpp.
const std::vector<BugModel>& bug_models();
// The backend that runs one model (`cpu-bug:<name>` for the listed ones): the reference through its
// seams, then its transform.
std::unique_ptr<Backend> make_bug_model_backend(const BugModel& m);

// A catalog entry (docs/defect-catalog.md) that no bug model re-creates yet, with the
// extension of the case model (or of the oracle) it would need (unmodelled_catalog.cpp). partly: a model
// re-creates part of the entry (it carries the same catalog id); `needs` is what it lacks.
struct UnmodelledEntry {
  std::string catalog, source, needs;
  bool partly = false;
};
const std::vector<UnmodelledEntry>& unmodelled_catalog_entries();

}  // namespace ao
