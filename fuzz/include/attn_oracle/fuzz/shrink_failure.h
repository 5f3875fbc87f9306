// The shrinking step of a fuzz campaign: a failing generated case goes through the choice shrinker
// (choice_shrink.h) first; when more than 3 documents are left after it stopped at a minimum or on its
// run budget, the structural shrinker (shrink.h) continues on the case itself (documents by ddmin,
// lengths, pads, dims), since the generator's families cannot always lower the document count (one huge
// document plus tiny ones). Each shrinker has its own run budget (ShrinkOptions::max_runs); the deadline
// is shared. A structurally shrunk case no longer replays from the choices, so they are dropped.
#pragma once
#include <optional>

#include "attn_oracle/fuzz/choice_shrink.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/fuzz/shrink.h"

namespace ao {

struct ShrunkFailure {
  Case minimal;
  std::optional<Choices> choices;  // minimal's choice sequence; empty when the structural shrinker changed it
  int steps = 0, runs = 0;         // of both shrinkers
  ShrinkStop stop = ShrinkStop::Minimum;  // why the last shrinker that ran stopped
};

ShrunkFailure shrink_failure(const GeneratedCase& failing, const GenOptions& gen, const StillFails& still_fails,
                             const ShrinkOptions& opt);

}  // namespace ao
