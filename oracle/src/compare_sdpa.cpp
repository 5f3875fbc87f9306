// SDPA comparator on checked valid rows (every query head):
//  * max_abs_err and ||B-R|| / ||R|| of O (inf when a valid element is NaN/Inf);
//    tol_violations = elements with |B-R| > atol + rtol*|R| (gate 0)
//  * lse_max_err (gate <= lse_tol; a row with no allowed key must give -inf exactly)
//  * nonfinite_valid: NaN/Inf in valid O/LSE that is not the sentinel (contamination, gate 0)
//  * unwritten_rows: (row, head) pairs still holding the sentinel (gate 0)
//  * clobbered_pad_slots: O/stats rows outside valid rows that were written (gate 0, pad_writes=forbid)
// Default tolerances per dtype follow the peers (field-facts.md): bf16 2e-2 (cuDNN frontend tests,
// TE 1.5e-2..3.5e-2), fp16 5e-3 (TE 1e-3..5e-3), fp32 1e-4. Case keys atol/rtol/lse_tol override.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare.h"

namespace ao {

SdpaTolerance sdpa_tolerance(const Case& c) {
  double t = c.dtype == DType::BF16 ? 2e-2 : c.dtype == DType::F16 ? 5e-3 : 1e-4;
  return {c.atol >= 0 ? c.atol : t, c.rtol >= 0 ? c.rtol : t, c.lse_tol >= 0 ? c.lse_tol : t};
}

Verdict compare_sdpa(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref) {
  (void)in;
  const Case& c = l.c;
  const int Hq = c.hq, Dv = c.dim_v;
  const auto tol = sdpa_tolerance(c);
  double max_abs = 0, diff2 = 0, ref2 = 0, lse_err = 0;
  int64_t violations = 0, nonfinite = 0, unwritten = 0, clobbered = 0, rows = 0;
  std::vector<RowNote> notes;

  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const auto& seg = l.seg_of(r);
    const int64_t orow = seg.o_row0 + (r - seg.row0), srow = seg.stats_row0 + (r - seg.row0);
    ++rows;
    double row_err = 0;
    for (int h = 0; h < Hq; ++h) {
      const float* g = got.o.data() + (orow * Hq + h) * Dv;
      const float* x = ref.o.data() + (orow * Hq + h) * Dv;
      bool unw = false;
      for (int e = 0; e < Dv; ++e) {
        if (is_sentinel(g[e])) { unw = true; continue; }
        if (!std::isfinite(g[e])) {  // contamination: reported by nonfinite_valid, and the error is unbounded
          ++nonfinite;
          row_err = max_abs = diff2 = INFINITY;
          continue;
        }
        const double d = std::fabs(double(g[e]) - double(x[e]));
        max_abs = std::max(max_abs, d);
        row_err = std::max(row_err, d);
        diff2 += d * d;
        ref2 += double(x[e]) * double(x[e]);
        if (d > tol.atol + tol.rtol * std::fabs(double(x[e]))) ++violations;
      }
      const float gl = got.lse[size_t(srow * Hq + h)], xl = ref.lse[size_t(srow * Hq + h)];
      if (is_sentinel(gl)) {
        unw = true;
      } else if (std::isinf(xl) && xl < 0) {
        if (!(std::isinf(gl) && gl < 0)) lse_err = INFINITY;
      } else if (std::isnan(gl) || std::isinf(gl)) {
        ++nonfinite;
        lse_err = INFINITY;
      } else {
        lse_err = std::max(lse_err, std::fabs(double(gl) - double(xl)));
      }
      unwritten += unw;
    }
    if (row_err > tol.atol) notes.push_back({r, seg.doc, seg.chunk, l.pos_of(r), row_err});
  }
  if (c.pad_writes == PadWrites::Forbid) {
    std::vector<char> o_valid(size_t(l.o_rows), 0), s_valid(size_t(l.stats_rows), 0);
    for (const auto& s : l.segments)
      for (int64_t i = 0; i < s.valid; ++i) {
        o_valid[size_t(s.o_row0 + i)] = 1;
        s_valid[size_t(s.stats_row0 + i)] = 1;
      }
    for (int64_t r = 0; r < l.o_rows; ++r) {
      if (o_valid[size_t(r)]) continue;
      bool w = false;
      for (int64_t e = 0; e < int64_t(Hq) * Dv && !w; ++e) w = !is_sentinel(got.o[size_t(r * Hq * Dv + e)]);
      clobbered += w;
    }
    for (int64_t r = 0; r < l.stats_rows; ++r) {
      if (s_valid[size_t(r)]) continue;
      bool w = false;
      for (int h = 0; h < Hq && !w; ++h) w = !is_sentinel(got.lse[size_t(r * Hq + h)]);
      clobbered += w;
    }
  }

  Verdict v;
  auto add = [&](std::string name, double value, std::string rule, bool failed) {
    v.metrics.push_back({std::move(name), value, std::move(rule), failed});
  };
  add("rows_checked", double(rows), "", false);
  add("max_abs_err", max_abs, "", false);
  add("rel_l2_err", ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2), "", false);
  add("tol_violations", double(violations), fmt::format("== 0 (atol {:g} rtol {:g})", tol.atol, tol.rtol),
      violations > 0);
  add("lse_max_err", lse_err, fmt::format("<= {:g}", tol.lse_tol), !(lse_err <= tol.lse_tol));
  add("nonfinite_valid", double(nonfinite), "== 0", nonfinite > 0);
  add("unwritten_rows", double(unwritten), "== 0", unwritten > 0);
  add("clobbered_pad_slots", double(clobbered), c.pad_writes == PadWrites::Forbid ? "== 0" : "", clobbered > 0);
  std::stable_sort(notes.begin(), notes.end(), [](const RowNote& a, const RowNote& b) { return a.value > b.value; });
  if (notes.size() > 8) notes.resize(8);
  v.worst_rows = std::move(notes);
  for (const auto& m : v.metrics)
    if (m.failed) v.reason += (v.reason.empty() ? "" : ", ") + m.name;
  v.kind = v.reason.empty() ? Verdict::Pass : Verdict::Fail;
  return v;
}

}  // namespace ao
