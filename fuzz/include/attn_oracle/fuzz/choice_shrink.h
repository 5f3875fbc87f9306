// Shrinking a generated case through its choice sequence (as Hypothesis does): candidates are edits
// of the sequence (delete spans, zero or lower choices, lower one and delete what follows it, sort
// neighbours), each replayed through the generator (generator.h), so every candidate is a valid case
// and anything the generator makes can shrink. Candidates are shortlex-smaller edits (shorter, then
// lexicographically smaller; choices.h); one is taken when its case has fewer valid q+kv tokens, or as
// many and a shortlex-smaller played sequence: a well-founded order, so it always terminates; a candidate that gives a case already tried costs no run, and one that gives
// the current case is taken without a run. The run budget, deadline and interrupt behave as in
// shrink_case (shrink.h); hand-written lines (no choices) still go through shrink_case.
#pragma once
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/fuzz/shrink.h"

namespace ao {

struct ChoiceShrinkResult : ShrinkResult {
  Choices choices;  // the minimal case's sequence (canonical): replay_choices(choices, gen) == minimal
  int replays = 0;  // candidate sequences played through the generator
};

// `failing` must be canonical and replay to a case the predicate fails.
ChoiceShrinkResult shrink_choices(const Choices& failing, const GenOptions& gen, const StillFails& still_fails,
                                  const ShrinkOptions& opt = {});

}  // namespace ao
