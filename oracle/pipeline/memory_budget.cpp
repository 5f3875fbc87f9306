#include "attn_oracle/pipeline/memory_budget.h"

#include <algorithm>
#include <thread>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/internal/omp_threads.h"
#include "attn_oracle/reference/reference_scratch.h"

namespace ao {

LayoutLimits with_stage_memory(LayoutLimits lim) {
  if (lim.threads <= 0) lim.threads = std::max(int(std::max(1u, std::thread::hardware_concurrency())), omp_team_size());
  if (!lim.scratch)
    lim.scratch = [](const Layout& l) {
      std::vector<ScratchBytes> v = reference_scratch_bytes(l);
      for (auto& x : compare_scratch_bytes(l)) v.push_back(std::move(x));
      return v;
    };
  return lim;
}

}  // namespace ao
