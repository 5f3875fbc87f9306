// Comparators: one per op. They compare a backend's outputs with the reference outputs on
// layout.check_rows, recomputing exact (fp64) scores where a judgement needs them, and measure
// named metrics, each with its gate rule; the verdict stage (verdict/verdict.h) turns them into the
// verdict. Every gated metric has a bug model that makes it fail (test_bug_models.cpp, selftest).
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/compare/tolerance.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

// A comparator in two steps: prepare_judgement() computes what judging a case needs, once (the exact
// answer, the emulation, the gates: nearly all of a check's cost), and judge() compares one set of
// outputs against it (cheap, as often as needed: the discrimination check judges synthetic answers with
// it, discrimination.h). l, in and ref must outlive it.
class PreparedJudgement {
 public:
  virtual ~PreparedJudgement() = default;
  // The comparator's verdict on got, without the discrimination check.
  virtual Verdict judge(const Outputs& got) const = 0;
  // The same where only whether got fails matters (the discrimination check's NaN answers and index
  // answers): a comparator may stop at the first failing rows and measure its metrics over those.
  virtual Verdict judge_until_failure(const Outputs& got) const { return judge(got); }
  // The exact answer in the outputs' shapes: every judged value row of every output (the indexer's: the
  // reference's top-k), the sentinel elsewhere (pad slots as the harness writes them).
  virtual const Outputs& exact() const = 0;
};
std::unique_ptr<PreparedJudgement> prepare_judgement(const Layout& l, const Inputs& in, const Outputs& ref);

// Each op's comparator (the verdict of prepare_judgement(...)->judge(got), no discrimination check).
Verdict compare_indexer(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
// op=indexer pass=bwd: the gradients and the loss against the exact backward (compare_indexer_bwd.cpp).
Verdict compare_indexer_bwd(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
Verdict compare_sdpa(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
// pass=bwd: dQ, dK, dV against the fp64 backward within gates derived from a flash backward's emulation.
Verdict compare_sdpa_bwd(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
// The comparator's verdict with the discrimination check (discrimination.h): a Pass whose gates cannot
// reject an all-zero or NaN answer of an output is Weak.
Verdict compare(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref);
// Whether compare() reads the reference's outputs: the indexer's (its top-k is the yardstick); SDPA's
// comparators recompute the exact answer (and the fp32 backward) themselves and ignore them.
bool comparator_reads_reference(const Case& c);

// The comparators' working memory per thread, for the memory budget (layout.h: ScratchBytes).
std::vector<ScratchBytes> compare_scratch_bytes(const Layout& l);

// The fixed per-dtype tolerances of the peers, used when a case line overrides atol/rtol (an element
// passes within atol + rtol*|exact|) or lse_tol (absolute); the derived gates (tolerance.h) otherwise.
struct SdpaTolerance { double atol, rtol, lse_tol; };
SdpaTolerance sdpa_tolerance(const Case& c);

}  // namespace ao
