// explain: which known defect reproduces a failing backend's outputs. Every applicable bug model
// (bug_models(); those that decline the op are skipped) runs on the same case and inputs as the
// backend B, and each is scored on the judged region (compare/judged_region.h: the region that
// outputs_differ() and the comparators judge), unit by unit:
//  * units: every checked row (indexer: all check_rows; SDPA: the valid ones, O and LSE of every head
//    together) and, when pad writes are forbidden, every output pad slot row (indexer: Q pad rows, a -1
//    there counting as unwritten; SDPA: O pad rows and stats pad rows).
//  * a unit is *wrong* when B's differs from the reference's; a model *reproduces* a wrong unit when its
//    unit equals B's, and *breaks* a unit B gets right when its unit differs from the reference's.
//  * equality (the region's, under ExplainMatch): indexer rows as sorted index lists (the exact index set
//    plus the same number of -1 fills; order and scores ignored; in order under ties=strict). SDPA
//    elements bitwise (NaN equals NaN), or under the kernel tolerance for real GPU kernels
//    (explain_match_rule() spells both out).
// Score = reproduced - broken over rows and pad slots; ranked best first (ties: bug_models() order).
// SDPA rows are also scored per output (O, LSE), so a model that gets one of them right shows.
// Explained when the best score is at least kExplainThreshold of the wrong units; every model whose
// four counts equal the best's is named with it (output-equivalent on this case).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/pipeline/trial.h"

namespace ao {

// Auto: Bitwise for the CPU backends (cpu-ref, cpu-bug:*: same arithmetic as the models), Kernel for
// every other backend.
enum class ExplainMatch { Auto, Bitwise, Kernel };
ExplainMatch resolve_explain_match(ExplainMatch m, const std::string& backend_name);
ValueMatch value_match(ExplainMatch m);          // Auto (unresolved) as Bitwise
std::string explain_match_rule(ValueMatch m);    // one line, for reports

inline constexpr double kExplainThreshold = 0.9;

struct ModelScore {
  std::string model, catalog;  // bug model id, catalog id ("[20]" or "")
  int64_t reproduced = 0, broken = 0;          // checked rows
  int64_t pad_reproduced = 0, pad_broken = 0;  // output pad slot rows
  int64_t o_reproduced = 0, lse_reproduced = 0;  // SDPA: wrong O / LSE parts of checked rows it reproduces
  int64_t score() const { return reproduced + pad_reproduced - broken - pad_broken; }
  std::string label() const { return catalog.empty() ? model : catalog + " " + model; }
};

struct Explanation {
  enum Outcome { NothingToExplain, Explained, NotExplained } outcome = NothingToExplain;
  std::string backend, match_rule;
  int64_t rows = 0, wrong_rows = 0;            // checked rows compared; those where B != reference
  int64_t pad_slots = 0, wrong_pad_slots = 0;  // output pad slot rows; those B wrote (clobbered)
  int64_t wrong_o_rows = 0, wrong_lse_rows = 0;  // SDPA: checked rows whose O / whose LSE differs
  std::vector<ModelScore> ranked;              // every model that ran, best first
  size_t n_best = 0;                           // ranked[0, n_best): tied at the top (0: none scores > 0)
  std::vector<std::string> skipped;            // "model: why" (declines the op, errored)
  std::string headline() const;                // "best explanation: ..." / "no known defect ..." / "nothing ..."
  std::vector<std::string> best() const;       // labels of ranked[0, n_best)
};

// One candidate: a model's outputs on the case, or null when they equal the reference's on every unit
// (then diff is all 0). diff: region.differs(*out, ref), or empty to have it computed.
struct ModelOutputs {
  std::string model, catalog;
  const Outputs* out = nullptr;
  std::vector<char> diff;
};

// Scores every candidate against got (B's outputs) and ref. got_diff: region.differs(got, ref) or empty.
Explanation explain_outputs(const JudgedRegion& region, const Outputs& got, const Outputs& ref,
                            const std::vector<ModelOutputs>& models, std::vector<char> got_diff = {});

// Runs every applicable bug model through the trial (inputs generated once) and explains got against
// ref (runs of the same trial). got must have run (ok()).
// A model that throws (or errors) is listed in `skipped` with its reason and scored as explaining nothing:
// explain never ends the command that asked for it.
Explanation explain_trial(Trial& t, const TrialRun& got, const TrialRun& ref, ExplainMatch m = ExplainMatch::Auto);
// The same over the given candidates (bug_models() above).
Explanation explain_trial(Trial& t, const TrialRun& got, const TrialRun& ref, ExplainMatch m,
                          const std::vector<BugModel>& candidates);

// The headline, the match rule, and the top `top` ranked models that reproduce or break anything.
std::string format_explanation(const Explanation& e, size_t top = 5);

}  // namespace ao
