// SDPA comparator on checked valid rows (every query head), against the exact fp64 answer that it
// recomputes on those rows (sdpa_truth; the reference's outputs are not the yardstick: a fp32
// reference is not exact, and its rounding is what the gates must allow for):
//  * max_abs_err: max |O - exact| (informational; inf when a valid element is NaN/Inf);
//  * tol_violations: (row, head) pairs whose max |O - exact| exceeds the derived gate
//    c * (emulation's error) + floor (tolerance.cpp), gate 0; gate_ratio = worst row's error / gate;
//  * rel_l2_err: ||O - exact|| / ||exact||, gated at c * the emulation's rel_l2 + floor;
//  * lse_max_err: max |LSE - exact|, each row within its derived fp32 gate (a row with no allowed key
//    must give -inf exactly, +inf under empty_rows=posinf);
//  * nonfinite_valid: NaN/Inf in valid O/LSE that is not the sentinel (contamination, gate 0)
//  * unwritten_rows: (row, head) pairs still holding the sentinel (gate 0)
//  * clobbered_pad_slots: O/stats rows outside valid rows that were written (gate 0, pad_writes=forbid)
// The rows judged (sdpa_truth's: the checked rows of valid tokens) and the pad slots are the judged
// region's (judged_region.h).
// Case keys atol/rtol (element within atol + rtol*|exact|) and lse_tol (absolute) replace the derived
// gates; a missing one of atol/rtol takes the peers' per-dtype default (bf16 2e-2, fp16 5e-3, fp32 1e-4).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "prepared.h"
#include "attn_oracle/compare/judged_region.h"

namespace ao {

SdpaTolerance sdpa_tolerance(const Case& c) {
  double t = c.dtype == DType::BF16 ? 2e-2 : c.dtype == DType::F16 ? 5e-3 : 1e-4;
  return {c.atol >= 0 ? c.atol : t, c.rtol >= 0 ? c.rtol : t, c.lse_tol >= 0 ? c.lse_tol : t};
}

namespace {

// The prepared half: the exact answer and the emulation on the checked rows (sdpa_truth), their gates.
class SdpaJudgement final : public PreparedJudgement {
 public:
  SdpaJudgement(const Layout& l, const Inputs& in) : l_(l), truth_(sdpa_truth(l, in)), region_(l) {
    const Case& c = l.c;
    gates_.reserve(truth_.rh.size());
    for (const SdpaRowTruth& t : truth_.rh) gates_.push_back(sdpa_row_gate(c, t));
    exact_ = make_sentinel_outputs(l);
    const size_t Hq = size_t(c.hq), Dv = size_t(c.dim_v);
    for (size_t ri = 0; ri < truth_.rows.size(); ++ri) {
      const int64_t r = truth_.rows[ri];
      const auto& seg = l.seg_of(r);
      const size_t orow = size_t(seg.o_row0 + (r - seg.row0)), srow = size_t(seg.stats_row0 + (r - seg.row0));
      for (size_t h = 0; h < Hq; ++h) {
        const size_t th = ri * Hq + h;
        for (size_t k = 0; k < Dv; ++k) exact_.o[(orow * Hq + h) * Dv + k] = float(truth_.o_exact[th * Dv + k]);
        const SdpaRowTruth& t = truth_.rh[th];
        exact_.lse[srow * Hq + h] = t.keys == 0 ? (c.empty_rows == EmptyRows::NegInf ? -INFINITY : INFINITY)
                                                : float(t.lse);
      }
    }
  }
  Verdict judge(const Outputs& got) const override;
  const Outputs& exact() const override { return exact_; }

 private:
  const Layout& l_;
  const SdpaTruth truth_;
  const JudgedRegion region_;
  std::vector<SdpaRowGate> gates_;
  Outputs exact_;
};

Verdict SdpaJudgement::judge(const Outputs& got) const {
  const Layout& l = l_;
  const Case& c = l.c;
  const int Hq = c.hq, Dv = c.dim_v;
  const bool fixed_o = c.atol >= 0 || c.rtol >= 0, fixed_lse = c.lse_tol >= 0;
  const auto tol = sdpa_tolerance(c);
  const SdpaTruth& truth = truth_;
  double max_abs = 0, diff2 = 0, ref2 = 0, emul2 = 0, floor2 = 0, lse_err = 0;
  double o_ratio = 0, o_gate_at = 0, lse_ratio = 0, lse_gate_at = 0;
  int64_t violations = 0, nonfinite = 0, unwritten = 0, elems = 0;
  std::vector<RowNote> notes;

  for (size_t ri = 0; ri < truth.rows.size(); ++ri) {
    const int64_t r = truth.rows[ri];
    const auto& seg = l.seg_of(r);
    const int64_t orow = seg.o_row0 + (r - seg.row0), srow = seg.stats_row0 + (r - seg.row0);
    double row_ratio = 0;
    for (int h = 0; h < Hq; ++h) {
      const size_t th = ri * size_t(Hq) + size_t(h);
      const SdpaRowTruth& t = truth.rh[th];
      const SdpaRowGate& gate = gates_[th];
      const float* g = got.o.data() + (orow * Hq + h) * Dv;
      const double* x = truth.o_exact.data() + th * size_t(Dv);
      const float* e = truth.o_emul.data() + th * size_t(Dv);
      bool unw = false, over = false;
      double err = 0;
      for (int k = 0; k < Dv; ++k) {
        emul2 += (double(e[k]) - x[k]) * (double(e[k]) - x[k]);
        ref2 += x[k] * x[k];
        ++elems;
        if (is_sentinel(g[k])) { unw = true; continue; }
        if (!std::isfinite(g[k])) {  // contamination: reported by nonfinite_valid, and the error is unbounded
          ++nonfinite;
          err = max_abs = diff2 = INFINITY;
          continue;
        }
        const double d = std::fabs(double(g[k]) - x[k]);
        err = std::max(err, d);
        diff2 += d * d;
        if (fixed_o && d > tol.atol + tol.rtol * std::fabs(x[k])) over = true;
      }
      max_abs = std::max(max_abs, err);
      floor2 += double(Dv) * gate.o_floor * gate.o_floor;
      const double o_gate = fixed_o ? tol.atol + tol.rtol * t.o_max : gate.o_gate;
      const double ratio = o_gate > 0 ? err / o_gate : (err > 0 ? INFINITY : 0);
      if (!fixed_o) over = !(err <= o_gate);
      violations += over;
      row_ratio = std::max(row_ratio, ratio);
      if (!(ratio <= o_ratio)) { o_ratio = ratio; o_gate_at = o_gate; }

      const float gl = got.lse[size_t(srow * Hq + h)];
      const double lse_gate = fixed_lse ? tol.lse_tol : gate.lse_gate;
      double le = 0;
      if (is_sentinel(gl)) {
        unw = true;
      } else if (t.keys == 0) {
        if (!(std::isinf(gl) && (gl < 0) == (c.empty_rows == EmptyRows::NegInf))) le = INFINITY;
      } else if (std::isnan(gl) || std::isinf(gl)) {
        ++nonfinite;
        le = INFINITY;
      } else {
        le = std::fabs(double(gl) - t.lse);
      }
      lse_err = std::max(lse_err, le);
      const double lr = lse_gate > 0 ? le / lse_gate : (le > 0 ? INFINITY : 0);
      if (!(lr <= lse_ratio)) { lse_ratio = lr; lse_gate_at = lse_gate; }
      row_ratio = std::max(row_ratio, lr);
      unwritten += unw;
    }
    if (row_ratio > 1) notes.push_back({r, seg.doc, seg.chunk, l.pos_of(r), row_ratio});
  }
  const int64_t clobbered = region_.clobbered_pad_slots(got);

  const double rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  const double rel_gate = fixed_o ? INFINITY : sdpa_rel_l2_gate(emul2, ref2, floor2, elems);
  const std::string o_how =
      fixed_o ? fmt::format("atol {:g} rtol {:g}", tol.atol, tol.rtol) : "per row: 2 x emulation's err + floor";
  return build_verdict(
      {
          info_metric("rows_checked", double(truth.rows.size())),
          info_metric("max_abs_err", max_abs, Headline::Yes),
          gated_metric("rel_l2_err", rel_l2,
                       fixed_o ? "" : fmt::format("<= {:.3g} (2 x emulation's {:.3g} + floor; ratio {:.3g})", rel_gate,
                                                  std::sqrt(emul2 / (ref2 > 0 ? ref2 : 1.0)), rel_l2 / rel_gate),
                       !fixed_o && !(rel_l2 <= rel_gate), Headline::No, fixed_o ? -1 : rel_gate,
                       fixed_o ? -1 : rel_l2 / rel_gate),
          gated_metric("tol_violations", double(violations),
                       fmt::format("== 0 ({}; worst row err/gate {:.3g}, gate {:.3g})", o_how, o_ratio, o_gate_at),
                       violations > 0, Headline::No, o_gate_at, o_ratio),
          gated_metric("lse_max_err", lse_err,
                       fmt::format("per row <= {} (worst row err/gate {:.3g}, gate {:.3g})",
                                   fixed_lse ? fmt::format("{:g}", tol.lse_tol) : std::string("derived fp32 gate"),
                                   lse_ratio, lse_gate_at),
                       !(lse_ratio <= 1), Headline::No, lse_gate_at, lse_ratio),
          gated_metric("nonfinite_valid", double(nonfinite), "== 0", nonfinite > 0, Headline::Yes),
          gated_metric("unwritten_rows", double(unwritten), "== 0", unwritten > 0),
          gated_metric("clobbered_pad_slots", double(clobbered), c.pad_writes == PadWrites::Forbid ? "== 0" : "",
                       clobbered > 0),
      },
      std::move(notes), WorseIs::Highest);
}

}  // namespace

std::unique_ptr<PreparedJudgement> prepare_sdpa_judgement(const Layout& l, const Inputs& in) {
  return std::make_unique<SdpaJudgement>(l, in);
}

Verdict compare_sdpa(const Layout& l, const Inputs& in, const Outputs& got, const Outputs&) {
  return SdpaJudgement(l, in).judge(got);
}

}  // namespace ao
