// Per-segment verdicts of one run: the same comparator restricted to each query segment's checked
// rows, so a report can say which CP chunk is wrong (the seed's bug is right on rank 0's front chunk
// and wrong on every other one). Used by ao_gpu_tests and ao-gpu-campaign.
#pragma once
#include <string>
#include <vector>

#include "attn_oracle/pipeline/trial.h"

namespace ao::gpu {

struct SegmentVerdict {
  int doc = 0, chunk = -1;
  int64_t pos0 = 0, rows_checked = 0;
  Verdict verdict;
};

std::vector<SegmentVerdict> segment_verdicts(const Trial& t, const TrialRun& got, const TrialRun& ref);

}  // namespace ao::gpu
