// explain (explain.h): score every bug model by the wrong units of a backend it reproduces.
#include "attn_oracle/pipeline/explain.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"

namespace ao {

ExplainMatch resolve_explain_match(ExplainMatch m, const std::string& backend_name) {
  if (m != ExplainMatch::Auto) return m;
  const bool cpu = backend_name == "cpu-ref" || backend_name.rfind("cpu-bug:", 0) == 0;
  return cpu ? ExplainMatch::Bitwise : ExplainMatch::Kernel;
}

ValueMatch value_match(ExplainMatch m) { return m == ExplainMatch::Kernel ? ValueMatch::Kernel : ValueMatch::Bitwise; }

std::string explain_match_rule(ValueMatch m) {
  if (m == ValueMatch::Kernel)
    return "kernel tolerance: indexer rows as exact index sets with the same -1 fills (in order under ties=strict); SDPA O elements within "
           "4*u_d*(|x| + 1/16) (u_d the dtype's unit roundoff, at least 2^-16), LSE within 2^-10*(1 + |LSE|), "
           "NaN = NaN (the unwritten sentinel equals only itself), infinities exact";
  return "bitwise: indexer rows as exact index sets with the same -1 fills (in order under ties=strict); SDPA O and LSE bit-equal, NaN = NaN (the unwritten sentinel equals only itself)";
}

std::vector<std::string> Explanation::best() const {
  std::vector<std::string> v;
  for (size_t i = 0; i < n_best; ++i) v.push_back(ranked[i].label());
  return v;
}

std::string Explanation::headline() const {
  if (outcome == NothingToExplain) {
    // Under the kernel tolerance "nothing" is not equality: a gate finer than that tolerance (a backward
    // gradient's, on a row of tiny values) can fail where explain sees no difference to explain.
    if (match_rule.rfind("kernel tolerance", 0) == 0)
      return fmt::format("nothing to explain within the kernel tolerance: {}'s outputs are within it of the "
                         "reference's on every checked row and pad slot (a gate finer than it may still fail)",
                         backend);
    return fmt::format("nothing to explain: {}'s outputs equal the reference's on every checked row and pad slot",
                       backend);
  }
  if (ranked.empty() || ranked[0].reproduced + ranked[0].pad_reproduced == 0)
    return fmt::format("no known defect reproduces this (no model reproduces any of the {} wrong rows{})", wrong_rows,
                       wrong_pad_slots ? fmt::format(" and {} clobbered pad slots", wrong_pad_slots) : "");
  const ModelScore& b = ranked[0];
  std::string names = b.label();
  for (size_t i = 1; i < n_best; ++i) names += " = " + ranked[i].label();
  if (n_best > 1) names += " (output-equivalent here)";
  std::string what = fmt::format("{}/{} wrong rows", b.reproduced, wrong_rows);
  if (wrong_pad_slots || b.pad_broken)
    what += fmt::format(" and {}/{} clobbered pad slots", b.pad_reproduced, wrong_pad_slots);
  const std::string how = match_rule.rfind("bitwise", 0) == 0 ? "bitwise" : "within the kernel tolerance";
  const std::string breaks = fmt::format("{} rows{} it breaks that {} gets right", b.broken,
                                         b.pad_broken ? fmt::format(" and {} pad slots", b.pad_broken) : "", backend);
  if (outcome == Explained) return fmt::format("best explanation: {} — reproduces {} {} ({})", names, what, how, breaks);
  return fmt::format("no known defect reproduces this (best: {}, {}; {})", names, what, breaks);
}

Explanation explain_outputs(const JudgedRegion& region, const Outputs& got, const Outputs& ref,
                            const std::vector<ModelOutputs>& models, std::vector<char> got_diff) {
  Explanation e;
  e.match_rule = explain_match_rule(region.match());
  if (got_diff.empty()) got_diff = region.differs(got, ref);
  const bool sdpa = region.layout().c.op == Op::Sdpa && region.layout().c.pass == Pass::Fwd;  // its O and LSE
  std::vector<char> o_wrong(region.size(), 0), lse_wrong(region.size(), 0);  // SDPA rows: which part B got wrong
  for (size_t u = 0; u < region.size(); ++u) {
    (region.is_pad(u) ? e.pad_slots : e.rows) += 1;
    if (!got_diff[u]) continue;
    (region.is_pad(u) ? e.wrong_pad_slots : e.wrong_rows) += 1;
    if (sdpa && !region.is_pad(u)) {
      o_wrong[u] = !region.equal(u, got, ref, 0);
      lse_wrong[u] = !region.equal(u, got, ref, 1);
      e.wrong_o_rows += o_wrong[u];
      e.wrong_lse_rows += lse_wrong[u];
    }
  }
  for (const auto& m : models) {
    ModelScore s{m.model, m.catalog};
    std::vector<char> own;
    const std::vector<char>* d = &m.diff;
    if (d->empty()) {
      own = m.out ? region.differs(*m.out, ref) : std::vector<char>(region.size(), 0);
      d = &own;
    }
    for (size_t u = 0; m.out && u < region.size(); ++u) {
      if (!(*d)[u]) continue;  // the model equals the reference here: reproduces nothing, breaks nothing
      const bool pad = region.is_pad(u);
      if (!got_diff[u]) {
        ++(pad ? s.pad_broken : s.broken);
      } else if (region.equal(u, *m.out, got)) {
        ++(pad ? s.pad_reproduced : s.reproduced);
        s.o_reproduced += o_wrong[u];
        s.lse_reproduced += lse_wrong[u];
      } else if (sdpa && !pad) {
        s.o_reproduced += o_wrong[u] && region.equal(u, *m.out, got, 0);
        s.lse_reproduced += lse_wrong[u] && region.equal(u, *m.out, got, 1);
      }
    }
    e.ranked.push_back(std::move(s));
  }
  std::stable_sort(e.ranked.begin(), e.ranked.end(), [](const ModelScore& a, const ModelScore& b) {
    if (a.score() != b.score()) return a.score() > b.score();
    if (a.reproduced + a.pad_reproduced != b.reproduced + b.pad_reproduced)
      return a.reproduced + a.pad_reproduced > b.reproduced + b.pad_reproduced;
    return a.broken + a.pad_broken < b.broken + b.pad_broken;
  });
  const int64_t wrong = e.wrong_rows + e.wrong_pad_slots;
  if (wrong == 0) {
    e.outcome = Explanation::NothingToExplain;
    return e;
  }
  if (!e.ranked.empty() && e.ranked[0].score() > 0) {
    const ModelScore& t = e.ranked[0];
    e.n_best = 1;
    while (e.n_best < e.ranked.size()) {
      const ModelScore& c = e.ranked[e.n_best];
      if (c.reproduced != t.reproduced || c.broken != t.broken || c.pad_reproduced != t.pad_reproduced ||
          c.pad_broken != t.pad_broken)
        break;
      ++e.n_best;
    }
  }
  e.outcome = e.n_best > 0 && double(e.ranked[0].score()) >= kExplainThreshold * double(wrong)
                  ? Explanation::Explained
                  : Explanation::NotExplained;
  return e;
}

Explanation explain_trial(Trial& t, const TrialRun& got, const TrialRun& ref, ExplainMatch m) {
  return explain_trial(t, got, ref, m, bug_models());
}

Explanation explain_trial(Trial& t, const TrialRun& got, const TrialRun& ref, ExplainMatch m,
                          const std::vector<BugModel>& candidates) {
  const JudgedRegion region(t.layout(), value_match(resolve_explain_match(m, got.backend)));
  std::vector<TrialRun> runs;
  std::vector<std::string> skipped;
  runs.reserve(candidates.size());
  std::vector<ModelOutputs> models;
  for (const auto& bm : candidates) {
    // Building, asking and running a model are all guarded: run_backend turns a throw during the run
    // into an error status; whatever else throws skips this model only.
    std::string why;
    try {
      auto be = make_bug_model_backend(bm);
      why = be->declines(t.layout());
      if (why.empty()) {
        TrialRun r = t.run(*be);
        if (r.ok())
          runs.push_back(std::move(r));
        else
          why = r.status.reason.empty() ? "did not run" : r.status.reason;
      }
    } catch (const std::exception& e) {
      why = fmt::format("threw: {}", e.what());
    } catch (...) {
      why = "threw an exception that is not a std::exception";
    }
    if (!why.empty()) {
      skipped.push_back(fmt::format("{}: {}", bm.name, why));
      continue;
    }
    models.push_back({bm.name, bm.catalog, &runs.back().out, {}});
  }
  Explanation e = explain_outputs(region, got.out, ref.out, models);
  e.backend = got.backend;
  e.skipped = std::move(skipped);
  return e;
}

std::string format_explanation(const Explanation& e, size_t top) {
  std::string s = e.headline() + "\n";
  if (e.outcome == Explanation::NothingToExplain) return s;
  s += fmt::format("  match: {}\n", e.match_rule);
  const bool sdpa = e.wrong_o_rows + e.wrong_lse_rows > 0;
  s += fmt::format("  {} checked rows ({} wrong{}), {} pad slot rows ({} clobbered); {} models scored, {} skipped\n",
                   e.rows, e.wrong_rows,
                   sdpa ? fmt::format(": O in {}, LSE in {}", e.wrong_o_rows, e.wrong_lse_rows) : "", e.pad_slots,
                   e.wrong_pad_slots, e.ranked.size(), e.skipped.size());
  size_t shown = 0;
  for (const auto& m : e.ranked) {
    if (shown == top) break;
    if (m.reproduced + m.pad_reproduced == 0 && shown > 0) break;  // the rest reproduce nothing
    if (shown == 0) s += "  ranked (reproduced/wrong rows, rows broken, reproduced/clobbered pad slots, pad broken):\n";
    s += fmt::format("  {:>3}. {:<40} rows {}/{}  broken {}  pad {}/{}  pad broken {}{}\n", ++shown, m.label(), m.reproduced,
                     e.wrong_rows, m.broken, m.pad_reproduced, e.wrong_pad_slots, m.pad_broken,
                     sdpa ? fmt::format("  (O {}/{}, LSE {}/{})", m.o_reproduced, e.wrong_o_rows, m.lse_reproduced,
                                        e.wrong_lse_rows)
                          : "");
  }
  return s;
}

}  // namespace ao
