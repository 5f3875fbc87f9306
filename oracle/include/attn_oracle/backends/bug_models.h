// The CPU bug models: each names a real defect class and re-creates it either as Quirks on the
// reference path (the defect changes what is computed) or as an output transform applied after the
// reference run (the defect changes what is stored: unwritten tiles, pad-slot writes, merge bugs).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include "attn_oracle/backends/backend.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

// Rewrites a backend's outputs after the reference computed them (bug_transforms.cpp).
using OutputTransform = std::function<void(const Layout&, const Inputs&, Outputs&)>;

// The defect classes of docs/defect-catalog.md (five frequent ones, two smaller ones)
// plus `generic` for the models invented here that re-create no single public report.
enum class DefectClass { BoundaryMetadata, EmptyRows, WindowAlignment, PadLanes, TopkBuffers, SplitKv, Generic };
const char* defect_class_name(DefectClass k);

struct BugModel {
  std::string name, what;
  bool indexer, sdpa;  // ops the defect is defined for
  Quirks quirks;
  OutputTransform transform;  // empty = none
  // Where the defect was seen: the catalog id ("[20]", "" for a model invented here) and the public
  // report(s) ("FlashAttention #895"; "" for generic models), the class, and the gated metrics that
  // must catch it (each claim is tested against corpus/catalog/<name>.case).
  std::string catalog = {}, source = {};
  DefectClass klass = DefectClass::Generic;
  std::vector<std::string> catches = {};
};

// Every bug model: the Quirks ones (cpu_backends.cpp), then the output-transform ones.
const std::vector<BugModel>& bug_models();
// The backend that runs one model (`cpu-bug:<name>` for the listed ones): the reference path with its
// Quirks, then its transform.
std::unique_ptr<Backend> make_bug_model_backend(const BugModel& m);
std::vector<BugModel> transform_bug_models();
// issue 15 (win): the window, alignment, CP and offset models of the catalog (catalog_window_models.cpp).
std::vector<BugModel> catalog_window_models();

// A catalog entry (docs/defect-catalog.md) that no bug model re-creates yet, with the
// extension of the case model (or of the oracle) it would need (unmodelled_catalog.cpp). partly: a model
// re-creates part of the entry (it carries the same catalog id); `needs` is what it lacks.
struct UnmodelledEntry {
  std::string catalog, source, needs;
  bool partly = false;
};
const std::vector<UnmodelledEntry>& unmodelled_catalog_entries();
// The catalog's split-KV, empty-row and LSE entries (catalog_split_models.cpp).
std::vector<BugModel> catalog_split_models();
std::vector<BugModel> catalog_indexer_models();  // issue 15 (idx): catalog section A

}  // namespace ao
