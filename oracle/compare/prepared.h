// The comparators' prepared halves (compare.h: PreparedJudgement), one per op and pass, each beside its
// comparator; prepare_judgement (compare_indexer.cpp) picks one.
#pragma once
#include <memory>

#include "attn_oracle/compare/compare.h"

namespace ao {

std::unique_ptr<PreparedJudgement> prepare_sdpa_judgement(const Layout& l, const Inputs& in);
std::unique_ptr<PreparedJudgement> prepare_sdpa_bwd_judgement(const Layout& l, const Inputs& in);
std::unique_ptr<PreparedJudgement> prepare_indexer_bwd_judgement(const Layout& l, const Inputs& in);

}  // namespace ao
