#include "attn_oracle/fuzz/shrink_failure.h"

namespace ao {

ShrunkFailure shrink_failure(const GeneratedCase& failing, const GenOptions& gen, const StillFails& still_fails,
                             const ShrinkOptions& opt) {
  const ChoiceShrinkResult sr = shrink_choices(failing.choices, gen, still_fails, opt);
  const bool more = sr.minimal.q_lens.size() > 3;
  const ShrinkResult st = more && (sr.stop == ShrinkStop::Minimum || sr.stop == ShrinkStop::RunBudget)
                              ? shrink_case(sr.minimal, still_fails, opt)
                              : ShrinkResult{sr.minimal, 0, 0, false, sr.stop};
  ShrunkFailure out;
  out.minimal = st.minimal;
  if (st.steps == 0) out.choices = sr.choices;
  out.steps = sr.steps + st.steps;
  out.runs = sr.runs + st.runs;
  out.stop = st.steps > 0 || st.runs > 0 ? st.stop : sr.stop;
  return out;
}

}  // namespace ao
