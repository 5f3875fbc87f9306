// The CPU bug models: each names a real defect class and the Quirks that re-create it.
#pragma once
#include <string>
#include <vector>
#include "attn_oracle/reference.h"

namespace ao {

struct BugModel {
  std::string name, what;
  bool indexer, sdpa;  // ops the defect is defined for
  Quirks quirks;
};

const std::vector<BugModel>& bug_models();

}  // namespace ao
