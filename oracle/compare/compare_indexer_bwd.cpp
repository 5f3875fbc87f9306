// Indexer backward comparator (op=indexer pass=bwd), against the exact answer and its per-element gates
// (indexer_backward_gates: a running-error bound of an fp32 kernel's arithmetic, atomics in any order).
// Every gate also allows underflow, times the emulation factor: the underflow unit (fp32 and bf16:
// 2^-126, a value flushed to zero as a fast-math kernel does, or subnormal; fp16's dS: 2^-25, half its
// subnormal spacing) per term, (1 + |w|)(1 + |k_d|) for dz, dS and their product (targets near the clip,
// e^-100 ~ 2^-144, put dz there: without it an honest fp32 numpy backward failed gates rounded to 0),
// 1 + |score| for dw. Under a 16-bit dtype a gate also allows what a tensor-core kernel does in that
// dtype: dS = dz w rounded to it before the dQ/dK products, u_d sum |terms| (no sqrt(n): equal values
// round alike, so the roundings can all go one way); and the gradients stored in it (one ulp_d of the
// exact element):
//  * dq_err_over_gate, dw_err_over_gate, dk_err_over_gate: max over the valid rows' elements of
//    |got - exact| / gate (gate 1; an element off by more than its bound fails, NaN/Inf counts as inf);
//  * loss_err_over_gate: the same for the loss (gated when the backend reports one; cuDNN's backward
//    returns gradients only, so an unreported loss, the sentinel, is loss_reported = 0, not a failure);
//  * nonfinite: NaN/Inf (not the sentinel) in a judged element or the loss (gate 0);
//  * dk_unselected_written: valid K rows that no slot of this rank's rows selected (their gradient is
//    exactly 0) holding anything else: a gradient into a -1 slot's stand-in or another document's keys
//    (gate 0);
//  * unwritten_rows: valid Q rows of dq/dw and valid K rows of dk still holding the sentinel (gate 0);
//  * clobbered_pad_slots: rows outside the judged ones written, per the judged region (gate 0 under
//    pad_writes=forbid);
// and each gradient's cells (dq, dw: row x head; dk: row) with their err/gate as Verdict::cell_maps.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "prepared.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/compare/tolerance.h"
#include "attn_oracle/reference/emulation.h"
#include "attn_oracle/reference/indexer_backward.h"

namespace ao {

namespace {

// |x - exact| / gate, inf for a non-finite x or an error where the gate is 0.
double err_ratio(float x, float exact, float gate) {
  if (!std::isfinite(x)) return INFINITY;
  const double d = std::fabs(double(x) - double(exact));
  if (d == 0) return 0;
  return gate > 0 ? d / double(gate) : INFINITY;
}

struct TensorJudge {
  double worst = 0;
  int64_t nonfinite = 0, unwritten = 0;
};

// One row of a float tensor, `cells` cells of w elements each (the heads of dq and dw, dk's one cell):
// into t its worst ratio, non-finite elements and whether it holds the sentinel, into map each cell's
// state and ratio. Returns the row's worst ratio, inf for an unwritten row.
double judge_row(const float* x, const float* e, const float* gate, int cells, size_t w, TensorJudge& t,
                 CellMap& map, int64_t row) {
  double row_worst = 0;
  bool row_unwritten = false;
  for (int h = 0; h < cells; ++h) {
    double worst = 0;
    bool unwritten = false, nonfinite = false;
    for (size_t i = size_t(h) * w; i < size_t(h + 1) * w; ++i) {
      if (is_sentinel(x[i])) { unwritten = true; continue; }
      if (!std::isfinite(x[i])) { ++t.nonfinite; nonfinite = true; }
      worst = std::max(worst, err_ratio(x[i], e[i], gate[i]));
    }
    map.judged(row, h, nonfinite ? CellMap::NonFinite : unwritten ? CellMap::Unwritten : CellMap::Judged, worst);
    row_worst = std::max(row_worst, worst);
    row_unwritten |= unwritten;
  }
  t.unwritten += row_unwritten;
  t.worst = std::max(t.worst, row_worst);
  return row_unwritten ? INFINITY : row_worst;
}

// The prepared half: the exact backward and its per-element gates, widened (see the top of the file).
class IndexerBwdJudgement final : public PreparedJudgement {
 public:
  IndexerBwdJudgement(const Layout& l, const Inputs& in);
  Verdict judge(const Outputs& got) const override;
  const Outputs& exact() const override { return g_.exact; }

 private:
  const Layout& l_;
  IndexerBackwardGates g_;
  const JudgedRegion region_;
};

IndexerBwdJudgement::IndexerBwdJudgement(const Layout& l, const Inputs& in)
    : l_(l), g_(indexer_backward_gates(l, in)), region_(l) {
  const Case& c = l.c;
  IndexerBackwardGates& g = g_;
  {  // underflow, and the 16-bit kernel's roundings (see the top of the file)
    const bool f32 = c.dtype == DType::F32;
    const double ds = f32 ? 0.0 : kEmulationFactor * unit_roundoff(c.dtype);
    const double floor = kEmulationFactor * underflow_unit(c.dtype);
    auto widen = [&](std::vector<float>& gate, const std::vector<float>& exact, const std::vector<float>& under,
                     const std::vector<float>* abs) {
      for (size_t x = 0; x < gate.size(); ++x)
        if (std::isfinite(exact[x]))  // the rows outside the judged ones hold the sentinel
          gate[x] = float(double(gate[x]) + floor * double(under[x]) + (abs ? ds * double((*abs)[x]) : 0.0) +
                          (f32 ? 0.0 : dtype_ulp(c.dtype, std::fabs(double(exact[x])))));
    };
    widen(g.dq, g.exact.dq, g.dq_ds_floor, f32 ? nullptr : &g.dq_ds_abs);
    widen(g.dw, g.exact.dw, g.dw_floor, nullptr);
    widen(g.dk, g.exact.dk, g.dk_ds_floor, f32 ? nullptr : &g.dk_ds_abs);
  }
}

Verdict IndexerBwdJudgement::judge(const Outputs& got) const {
  const Layout& l = l_;
  const Case& c = l.c;
  const IndexerBackwardGates& g = g_;
  const size_t H = size_t(c.heads), D = size_t(c.dim);
  std::vector<RowNote> notes;
  auto maps = std::make_shared<std::vector<CellMap>>();
  maps->reserve(3);  // the references below stay valid
  CellMap& mq = maps->emplace_back("dq", false, l.q_rows, c.heads);
  CellMap& mw = maps->emplace_back("dw", false, l.q_rows, c.heads);
  CellMap& mk = maps->emplace_back("dk", true, l.kv_rows, 1);
  TensorJudge tq, tw, tk;
  int64_t rows = 0;
  for_each_valid_row(l, RowBuffer::Q, [&](int64_t r, int64_t) {
    ++rows;
    const double a = judge_row(got.dq.data() + size_t(r) * H * D, g.exact.dq.data() + size_t(r) * H * D,
                               g.dq.data() + size_t(r) * H * D, c.heads, D, tq, mq, r);
    const double b = judge_row(got.dw.data() + size_t(r) * H, g.exact.dw.data() + size_t(r) * H,
                               g.dw.data() + size_t(r) * H, c.heads, 1, tw, mw, r);
    if (std::max(a, b) > 1) {
      const auto& seg = l.seg_of(r);
      notes.push_back({r, seg.doc, seg.chunk, l.pos_of(r), std::max(a, b)});
    }
  });
  const std::vector<char> kv = valid_rows(l, RowBuffer::KV);
  int64_t unselected_written = 0;
  for (size_t j = 0; j < kv.size(); ++j) {
    if (!kv[j]) continue;
    const float* x = got.dk.data() + j * D;
    judge_row(x, g.exact.dk.data() + j * D, g.dk.data() + j * D, 1, D, tk, mk, int64_t(j));
    if (!g.dk_selected[j] && std::any_of(x, x + D, [](float v) { return !is_sentinel(v) && v != 0.f; }))
      ++unselected_written;
  }
  const JudgedRegion& region = region_;
  region.mark_pad_rows(mq, region.output_of(&Outputs::dq), got);
  region.mark_pad_rows(mw, region.output_of(&Outputs::dw), got);
  region.mark_pad_rows(mk, region.output_of(&Outputs::dk), got);
  const bool loss_reported = !got.loss.empty() && !is_sentinel(got.loss[0]);
  double loss_ratio = 0;
  int64_t nonfinite = tq.nonfinite + tw.nonfinite + tk.nonfinite;
  if (loss_reported) {
    nonfinite += !std::isfinite(got.loss[0]);
    loss_ratio = err_ratio(got.loss[0], g.exact.loss[0], float(g.loss));
  }
  const int64_t pad_written = region.clobbered_pad_slots(got);
  const bool forbid_pad = c.pad_writes == PadWrites::Forbid;
  auto ratio_metric = [](const char* name, double v, Headline h = Headline::No) {
    return gated_metric(name, v, "<= 1", !(v <= 1), h, -1, v);
  };
  std::vector<Metric> metrics = {
      info_metric("rows_checked", double(rows)),
      info_metric("loss_reported", loss_reported ? 1 : 0),
      ratio_metric("loss_err_over_gate", loss_ratio, Headline::Yes),
      ratio_metric("dq_err_over_gate", tq.worst, Headline::Yes),
      ratio_metric("dw_err_over_gate", tw.worst),
      ratio_metric("dk_err_over_gate", tk.worst, Headline::Yes),
      gated_metric("nonfinite", double(nonfinite), "== 0", nonfinite > 0),
      gated_metric("dk_unselected_written", double(unselected_written), "== 0", unselected_written > 0),
      gated_metric("unwritten_rows", double(tq.unwritten + tw.unwritten + tk.unwritten), "== 0",
                   tq.unwritten + tw.unwritten + tk.unwritten > 0),
      gated_metric("clobbered_pad_slots", double(pad_written), forbid_pad ? "== 0" : "", pad_written > 0),
  };
  Verdict v = build_verdict(std::move(metrics), std::move(notes), WorseIs::Highest);
  v.cell_maps = std::move(maps);
  return v;
}

}  // namespace

std::unique_ptr<PreparedJudgement> prepare_indexer_bwd_judgement(const Layout& l, const Inputs& in) {
  return std::make_unique<IndexerBwdJudgement>(l, in);
}

Verdict compare_indexer_bwd(const Layout& l, const Inputs& in, const Outputs& got, const Outputs&) {
  return IndexerBwdJudgement(l, in).judge(got);
}

}  // namespace ao
