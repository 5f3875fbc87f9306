// The discrimination check: does this case's gate mean anything? For each output tensor of the case (one
// OutputSpec of output_specs(), judged_region.h), what answers that must fail score against the gates
// the comparator applies to this very case (GateCheck, verdict.h): an all-zero answer, a NaN answer, and
// the exact answer moved toward zero by kMovedGates times its gate. One mechanism for every op and pass:
// each synthetic answer is the exact answer (PreparedJudgement::exact()) with one output's valid judged
// rows replaced (pad slots as the harness wrote them, the other outputs exact), judged by the same
// prepared comparator. An output whose gates pass the zero answer while its exact value is not zero, or
// pass the NaN answer, is weak: compare() turns such a Pass into Verdict::Weak. A new op or output is
// covered by its OutputSpec alone. Cost: a few of the comparator's cheap judge() passes, none of its
// exact or emulated products.
#pragma once
#include <vector>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

std::vector<GateCheck> check_gates(const Layout& l, const PreparedJudgement& j);

}  // namespace ao
