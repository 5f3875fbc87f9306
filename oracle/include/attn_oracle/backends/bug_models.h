// The CPU bug models: each names a real defect class and re-creates it either as Quirks on the
// reference path (the defect changes what is computed) or as an output transform applied after the
// reference run (the defect changes what is stored: unwritten tiles, pad-slot writes, merge bugs).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include "attn_oracle/reference/reference.h"

namespace ao {

// Rewrites a backend's outputs after the reference computed them (bug_transforms.cpp).
using OutputTransform = std::function<void(const Layout&, const Inputs&, Outputs&)>;

struct BugModel {
  std::string name, what;
  bool indexer, sdpa;  // ops the defect is defined for
  Quirks quirks;
  OutputTransform transform;  // empty = none
};

// Every bug model: the Quirks ones (cpu_backends.cpp), then the output-transform ones.
const std::vector<BugModel>& bug_models();
std::vector<BugModel> transform_bug_models();

}  // namespace ao
