// The memory budget of a run (--max-mem): the layout stage estimates its own parts (tensors, row and
// document metadata, failure artifacts) and the process baseline; the stages above add their per-thread
// scratch (reference_scratch_bytes, compare_scratch_bytes). with_stage_memory gives the layout those, so
// make_layout refuses a case over the budget before anything of its size exists.
#pragma once
#include "attn_oracle/layout/layout.h"

namespace ao {

// lim with the stages' scratch and, where lim.threads is 0, the threads of this machine (the larger of
// the hardware's and the OpenMP teams' count). A scratch already set is kept.
LayoutLimits with_stage_memory(LayoutLimits lim);

}  // namespace ao
