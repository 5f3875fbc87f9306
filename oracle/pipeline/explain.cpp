// explain (explain.h): score every bug model by the wrong units of a backend it reproduces.
#include "attn_oracle/pipeline/explain.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/compare/tolerance.h"

namespace ao {

ExplainMatch resolve_explain_match(ExplainMatch m, const std::string& backend_name) {
  if (m != ExplainMatch::Auto) return m;
  const bool cpu = backend_name == "cpu-ref" || backend_name.rfind("cpu-bug:", 0) == 0;
  return cpu ? ExplainMatch::Bitwise : ExplainMatch::Kernel;
}

std::string explain_match_rule(ExplainMatch m) {
  if (m == ExplainMatch::Kernel)
    return "kernel tolerance: indexer rows as exact index sets with the same -1 fills (in order under ties=strict); SDPA O elements within "
           "4*u_d*(|x| + 1/16) (u_d the dtype's unit roundoff, at least 2^-16), LSE within 2^-10*(1 + |LSE|), "
           "NaN = NaN (the unwritten sentinel equals only itself), infinities exact";
  return "bitwise: indexer rows as exact index sets with the same -1 fills (in order under ties=strict); SDPA O and LSE bit-equal, NaN = NaN (the unwritten sentinel equals only itself)";
}

ExplainRegion::ExplainRegion(const Layout& l, ExplainMatch m) : l_(l), m_(m) {
  if (m_ == ExplainMatch::Auto) m_ = ExplainMatch::Bitwise;
  if (m_ == ExplainMatch::Kernel) {
    const double u = std::max(unit_roundoff(l.c.dtype), std::ldexp(1.0, -16));
    o_rtol_ = 4 * u;
    o_atol_ = 4 * u / 16;
    lse_rtol_ = std::ldexp(1.0, -10);
  }
  const bool pads = l.c.pad_writes == PadWrites::Forbid;
  if (l.c.op == Op::Indexer) {
    for (int64_t r : l.check_rows) units_.push_back({Row, r, 0});
    if (pads)
      for (int64_t r = 0; r < l.q_rows; ++r)
        if (l.row_segment[size_t(r)] < 0) units_.push_back({PadQ, r, 0});
    return;
  }
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const auto& s = l.seg_of(r);
    units_.push_back({Row, s.o_row0 + (r - s.row0), s.stats_row0 + (r - s.row0)});
  }
  if (pads) {
    const std::vector<char> o_valid = valid_rows(l, RowBuffer::O), s_valid = valid_rows(l, RowBuffer::Stats);
    for (int64_t r = 0; r < l.o_rows; ++r)
      if (!o_valid[size_t(r)]) units_.push_back({PadO, r, 0});
    for (int64_t r = 0; r < l.stats_rows; ++r)
      if (!s_valid[size_t(r)]) units_.push_back({PadStats, r, 0});
  }
}

bool ExplainRegion::elem_equal(float x, float y, bool lse) const {
  if (f32_bits(x) == f32_bits(y)) return true;
  // The output sentinel is a NaN with its own payload: an unwritten element never equals a written one,
  // not even a computed NaN (whose payload is the arithmetic's, and equals any other computed NaN).
  if (is_sentinel(x) || is_sentinel(y)) return false;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (m_ != ExplainMatch::Kernel || std::isinf(x) || std::isinf(y)) return false;
  const double d = std::fabs(double(x) - double(y)), mag = std::max(std::fabs(double(x)), std::fabs(double(y)));
  return lse ? d <= lse_rtol_ * (1 + mag) : d <= o_rtol_ * mag + o_atol_;
}

bool ExplainRegion::equal(size_t ui, const Outputs& a, const Outputs& b, Part part) const {
  const Unit& u = units_[ui];
  if (l_.c.op == Op::Indexer) {
    const size_t K = size_t(l_.c.topk);
    const int32_t *ra = a.topk.data() + size_t(u.a) * K, *rb = b.topk.data() + size_t(u.a) * K;
    if (std::equal(ra, ra + K, rb)) return true;  // the common case, without sorting
    std::vector<int32_t> x(a.topk.begin() + long(size_t(u.a) * K), a.topk.begin() + long(size_t(u.a + 1) * K));
    std::vector<int32_t> y(b.topk.begin() + long(size_t(u.a) * K), b.topk.begin() + long(size_t(u.a + 1) * K));
    if (u.kind == PadQ)  // -1 in a Q pad row is not a write (compare_indexer)
      for (auto* v : {&x, &y}) std::replace(v->begin(), v->end(), int32_t(-1), kSentinelIndex);
    if (l_.c.ties == Ties::Strict && u.kind != PadQ) return x == y;  // strict: the order is judged too
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    return x == y;
  }
  const size_t Hq = size_t(l_.c.hq), W = Hq * size_t(l_.c.dim_v);
  auto span_equal = [&](const std::vector<float>& va, const std::vector<float>& vb, size_t off, size_t n, bool lse) {
    for (size_t i = off; i < off + n; ++i)
      if (!elem_equal(va[i], vb[i], lse)) return false;
    return true;
  };
  switch (u.kind) {
    case Row:
      return (part == Lse || span_equal(a.o, b.o, size_t(u.a) * W, W, false)) &&
             (part == O || span_equal(a.lse, b.lse, size_t(u.b) * Hq, Hq, true));
    case PadO: return span_equal(a.o, b.o, size_t(u.a) * W, W, false);
    default: return span_equal(a.lse, b.lse, size_t(u.a) * Hq, Hq, true);
  }
}

std::vector<char> ExplainRegion::differs(const Outputs& x, const Outputs& ref) const {
  std::vector<char> d(units_.size());
  for (size_t u = 0; u < units_.size(); ++u) d[u] = !equal(u, x, ref);
  return d;
}

std::vector<std::string> Explanation::best() const {
  std::vector<std::string> v;
  for (size_t i = 0; i < n_best; ++i) v.push_back(ranked[i].label());
  return v;
}

std::string Explanation::headline() const {
  if (outcome == NothingToExplain)
    return fmt::format("nothing to explain: {}'s outputs equal the reference's on every checked row and pad slot",
                       backend);
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

Explanation explain_outputs(const ExplainRegion& region, const Outputs& got, const Outputs& ref,
                            const std::vector<ModelOutputs>& models, std::vector<char> got_diff) {
  Explanation e;
  e.match_rule = explain_match_rule(region.match());
  if (got_diff.empty()) got_diff = region.differs(got, ref);
  const bool sdpa = region.layout().c.op == Op::Sdpa;
  std::vector<char> o_wrong(region.size(), 0), lse_wrong(region.size(), 0);  // SDPA rows: which part B got wrong
  for (size_t u = 0; u < region.size(); ++u) {
    (region.is_pad(u) ? e.pad_slots : e.rows) += 1;
    if (!got_diff[u]) continue;
    (region.is_pad(u) ? e.wrong_pad_slots : e.wrong_rows) += 1;
    if (sdpa && !region.is_pad(u)) {
      o_wrong[u] = !region.equal(u, got, ref, ExplainRegion::O);
      lse_wrong[u] = !region.equal(u, got, ref, ExplainRegion::Lse);
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
        s.o_reproduced += o_wrong[u] && region.equal(u, *m.out, got, ExplainRegion::O);
        s.lse_reproduced += lse_wrong[u] && region.equal(u, *m.out, got, ExplainRegion::Lse);
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
  const ExplainRegion region(t.layout(), resolve_explain_match(m, got.backend));
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
