// The defect catalog's entries that no bug model re-creates, each with what the model would need.
// `attn-oracle catalog` lists them under the table of the models; an entry leaves this list when its
// model is added to bug_models() (a test checks that an id listed here without `partly` has no model).
#include "attn_oracle/backends/bug_models.h"

namespace ao {

const std::vector<UnmodelledEntry>& unmodelled_catalog_entries() {
  static const std::vector<UnmodelledEntry> v = {
      {"[11]", "DeepGEMM #433 (also #379, #434, #392)",
       "fp8 inputs (a dtype=fp8 key): the head-dim-dependent 128-byte swizzled read is modelled, fp8 is not",
       true},
      {"[33]", "FlashAttention #1647",
       "the mechanism: num_splits 16/32 disagree on GQA decode, cause not identified (an acceptance case, not a model)"},
      {"[35]", "pytorch #187227", "an attention-bias input and S > 65536 rows of bias (a uint32 row offset that wraps)"},
      {"[36]", "vllm #50427", "paged K/V block tables and buffers of more than 2^31 elements (int32 offsets)"},
  };
  return v;
}

}  // namespace ao
