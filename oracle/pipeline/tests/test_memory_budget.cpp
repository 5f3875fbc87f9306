// The memory budget is summed by the pipeline (memory_budget.h): the layout's own parts plus each
// stage's per-thread scratch (reference_scratch_bytes, compare_scratch_bytes) times the threads. A case
// at the estimate runs; one byte under it is refused, by make_layout with the stages' memory and by
// Trial, with the --max-mem text; the layout alone (no stage memory) admits cases the stages do not fit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/pipeline/memory_budget.h"
#include "attn_oracle/pipeline/trial.h"
#include "attn_oracle/reference/reference_scratch.h"

using namespace ao;

TEST(MemoryBudget, PipelineSumsEveryStagesScratchAndRefusesJustOver) {
  for (const char* line : {"op=indexer docs=300,200 heads=8 dim=32 topk=64", "op=indexer docs=1000 heads=1 dim=8 topk=2048",
                           "op=sdpa docs=700,90 hq=4 hkv=2 dim=32", "op=sdpa docs=2000 mask=none precision=fp64"}) {
    SCOPED_TRACE(line);
    const Case c = parse_case(line);
    LayoutLimits four;
    four.threads = 4;
    const Layout own = make_layout(c, four);
    const Layout all = make_layout(c, with_stage_memory(four));
    double per_thread = 0;
    for (const auto& x : reference_scratch_bytes(all)) per_thread += x.per_thread;
    for (const auto& x : compare_scratch_bytes(all)) per_thread += x.per_thread;
    EXPECT_GT(per_thread, 0);
    EXPECT_NEAR(double(all.mem_bytes - own.mem_bytes), 4 * per_thread, 1.0);

    // Just under / at the budget, through the pipeline (this machine's threads, as --max-mem counts them).
    const Layout here = make_layout(c, with_stage_memory({}));
    EXPECT_NO_THROW(Trial(c, LayoutLimits{here.mem_bytes}));
    for (bool via_trial : {false, true}) {
      try {
        if (via_trial) {
          const Trial t(c, LayoutLimits{here.mem_bytes - 1});
        } else {
          (void)make_layout(c, with_stage_memory(LayoutLimits{here.mem_bytes - 1}));
        }
        ADD_FAILURE() << "admitted one byte over the budget";
      } catch (const CaseError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(fmt::format("the case needs about {} bytes", here.mem_bytes)), std::string::npos) << what;
        EXPECT_NE(what.find("over the memory cap"), std::string::npos) << what;
        EXPECT_NE(what.find("--max-mem"), std::string::npos) << what;
      }
    }
    // The layout alone admits what the stages' scratch does not fit.
    EXPECT_NO_THROW(make_layout(c, LayoutLimits{own.mem_bytes}));
    EXPECT_THROW(Trial(c, LayoutLimits{own.mem_bytes}), CaseError);
  }
}
