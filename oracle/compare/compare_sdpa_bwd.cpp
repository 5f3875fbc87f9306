// SDPA backward comparator (pass=bwd): dQ on the checked valid rows, dK and dV on every valid K/V row
// (the judged region's value rows), against the exact answer it recomputes (the backward reference in
// fp64 on the same inputs), an emulation of a flash backward (fp32 accumulation, P and scale * dS
// rounded to the dtype before their products, each GQA head's dK/dV rounded before the group's sum:
// reference.h emulate_sdpa_bwd) and the reference in fp32 (the error
// of an honest fp32 backward: cancellation in dP - D); a row's emulation error is the larger of the
// two. Per gradient:
//  * <g>_violations: (row, head) pairs whose max |g - exact| exceeds the gate 2 x (the emulation's error
//    on that row, head) + floor (gate 0); the floor: ulp_d of the row's largest exact element (the final
//    rounding can land on the other neighbour), lambda * u_d * the row's rms (P and dS rounded at another
//    point), lambda * sqrt(n) * u_32 * the gradient's rms over the judged rows (fp32 accumulation of n
//    terms in another order; n the longest document's keys); for dQ also the fp32 rounding of dP - D
//    itself, which can cancel to almost nothing (a row with one key: O is that key's V in the dtype):
//    per key u_32 lambda sqrt(d_v) (|dP| + |D|) <= u_32 lambda sqrt(d_v) |dO| (max_j |v_j| + |O|), times
//    scale max |k| summed with weights P that sum to 1 (maxima over the row's document, its K/V head);
//    for dK the same rounding reaches key j through every row that attends it: scale u_32 lambda
//    sqrt(d_v) sum_i P_ij |dO_i| (max_j |v_j| + |O_i|) max |q_i| (a row's one key: dP - D cancels
//    exactly, dK = 0, and a kernel's differently ordered dP and D leave ~u_32 of it). And P itself:
//    exp(s - lse) of logits and an LSE of magnitude L_i = scale |q_i| max |k_j| + |lse_i| carries a
//    relative error ~2 u_32 L_i from their fp32 rounding (exp2 of a scaled logit in a flash kernel,
//    another order in the emulation; L_i reaches 1e5 under values=extreme), which adds 2 L_i to
//    sqrt(d_v) above for dQ and dK, and to dV sum_i P_ij 2 L_i max |dO_i|. The sums over i are column
//    sums of P, weighted, taken beside the exact backward from its own P (reference_sdpa_bwd_with_columns:
//    P^T W, W carrying the weights in its first two elements);
//  * <g>_rel_l2: ||g - exact|| / ||exact|| (informational);
//  * <g>_nonfinite_valid: NaN/Inf (not the sentinel) in a judged row (gate 0);
//  * <g>_clobbered_pad_slots: rows of the gradient's buffer outside its value rows that were written
//    (gate 0 under pad_writes=forbid; grad_pad=zero lets a pad row hold zeros);
//  * each gradient's cells (row, head) with their err/gate as Verdict::cell_maps (report.html);
// and over all three: unwritten_rows (judged (row, head) pairs still holding the sentinel) and
// dkv_unreached_nonzero (K/V rows no query may reach, exact dK = dV = 0, holding anything but zeros: a
// gradient leaked into keys outside every row's band, another document's).
#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "prepared.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

namespace {

constexpr double kU32 = 0x1p-24;

struct Grad {
  const char* name;
  std::vector<float> Outputs::*t;
  int heads;
  int width;
  bool kv;  // over K/V rows (dK, dV), else Q rows (dQ)
};

std::array<Grad, 3> grads(const Case& c) {
  return {Grad{"dq", &Outputs::dq, c.hq, c.dim, false}, Grad{"dk", &Outputs::dk, c.hkv, c.dim, true},
          Grad{"dv", &Outputs::dv, c.hkv, c.dim_v, true}};
}

// The prepared half: the exact backward, and per judged (row, head) cell of each gradient its gate.
class SdpaBwdJudgement final : public PreparedJudgement {
 public:
  SdpaBwdJudgement(const Layout& l, const Inputs& in);
  Verdict judge(const Outputs& got) const override;
  const Outputs& exact() const override { return exact_; }

 private:
  const Layout& l_;
  const JudgedRegion region_;
  Outputs exact_;
  std::array<std::vector<double>, 3> gates_;  // per gradient: [buffer row][head]
  std::array<double, 3> sum2_{};              // per gradient: sum of exact^2 over the judged rows
};

SdpaBwdJudgement::SdpaBwdJudgement(const Layout& l, const Inputs& in) : l_(l), region_(l) {
  const Case& c = l.c;
  Layout lx = l;  // the exact answer: the reference in fp64
  lx.c.precision = Precision::F64;
  Outputs& exact = exact_;
  exact = make_sentinel_outputs(l);
  Outputs emul = make_sentinel_outputs(l), f32 = make_sentinel_outputs(l);
  // The emulation and an honest fp32 backward (its error: FlashAttention's "2x the fp32 reference's").
  reference_and_emulate_sdpa_bwd_f32(l, in, f32, emul);
  const JudgedRegion& region = region_;
  const std::vector<int64_t>& qrows = region.value_rows();
  const std::vector<int64_t>& kvrows = region.kv_value_rows();
  int64_t n_keys = 1;
  for (const auto& d : l.docs) n_keys = std::max(n_keys, d.kv_len);
  const double u_d = c.dtype == DType::F32 ? 0.0 : unit_roundoff(c.dtype);
  auto norm = [](const float* x, int n) {
    double s2 = 0;
    for (int e = 0; e < n; ++e) s2 += double(x[e]) * double(x[e]);
    return std::sqrt(s2);
  };
  // Per document and K/V head: the largest |v_j| (2-norm), |k_j,e| and |k_j| (2-norm) of its keys.
  std::vector<double> max_v(l.docs.size() * size_t(c.hkv), 0), max_k(max_v.size(), 0), max_k2(max_v.size(), 0);
  for (size_t d = 0; d < l.docs.size(); ++d)
    for (int64_t j = l.docs[d].kv_off; j < l.docs[d].kv_off + l.docs[d].kv_len; ++j)
      for (int kh = 0; kh < c.hkv; ++kh) {
        const float* v = in.v.data() + (size_t(j) * size_t(c.hkv) + size_t(kh)) * size_t(c.dim_v);
        const float* k = in.k.data() + (size_t(j) * size_t(c.hkv) + size_t(kh)) * size_t(c.dim);
        double km = 0;
        for (int e = 0; e < c.dim; ++e) km = std::max(km, std::fabs(double(k[e])));
        const size_t at = d * size_t(c.hkv) + size_t(kh);
        max_v[at] = std::max(max_v[at], norm(v, c.dim_v));
        max_k[at] = std::max(max_k[at], km);
        max_k2[at] = std::max(max_k2[at], norm(k, c.dim));
      }
  const int group = c.hq / c.hkv;
  // Per (row, head): dQ's floor (dP - D and P rounding) and the weights of dK's and dV's floors, whose
  // column sums of P come from dV[j][0..1] = (P^T dO)[j][0..1] with dO_i = (w_dk / max, w_dv / max, 0, ...)
  // (scaled so that no weight overflows the float input). Every valid row: each one reaches dK and dV,
  // also the rows that rows=N leaves out of dQ's judged rows.
  std::vector<int64_t> all_rows;
  for (const auto& seg : l.segments)
    for (int64_t i = 0; i < seg.valid; ++i) all_rows.push_back(seg.row0 + i);
  const size_t n_qh = size_t(l.q_rows) * size_t(c.hq);
  std::vector<double> dq_floor(n_qh, 0), w_dk(n_qh, 0), w_dv(n_qh, 0);
  double dk_max = 0, dv_max = 0;
  for (int64_t r : all_rows)
    for (int h = 0; h < c.hq; ++h) {
      const auto& seg = l.seg_of(r);
      const size_t dv = size_t(c.dim_v), at_kv = size_t(seg.doc) * size_t(c.hkv) + size_t(h / group);
      const size_t qi = size_t(r) * size_t(c.hq) + size_t(h);
      const float* q = in.q.data() + qi * size_t(c.dim);
      const float* dout = in.dout.data() + qi * dv;
      double qm = 0, dom = 0;
      for (int e = 0; e < c.dim; ++e) qm = std::max(qm, std::fabs(double(q[e])));
      for (int e = 0; e < c.dim_v; ++e) dom = std::max(dom, std::fabs(double(dout[e])));
      const double lse = in.lse[size_t(seg.stats_row0 + (r - seg.row0)) * size_t(c.hq) + size_t(h)];
      const double L = l.scale * norm(q, c.dim) * max_k2[at_kv] + (std::isfinite(lse) ? std::fabs(lse) : 0.0);
      const double n_o = norm(in.o.data() + (size_t(seg.o_row0 + (r - seg.row0)) * size_t(c.hq) + size_t(h)) * dv, c.dim_v);
      const double cancel = norm(dout, c.dim_v) * (max_v[at_kv] + n_o) * (std::sqrt(double(c.dim_v)) + 2 * L);
      dq_floor[qi] = kLambda * kU32 * l.scale * cancel * max_k[at_kv];
      w_dk[qi] = cancel * qm;
      w_dv[qi] = 2 * L * dom;
      if (std::isfinite(w_dk[qi])) dk_max = std::max(dk_max, w_dk[qi]);
      if (std::isfinite(w_dv[qi])) dv_max = std::max(dv_max, w_dv[qi]);
    }
  // Column sums sum_i P_ij w_i per (key, K/V head) of weight sets packed into the first elements of dO
  // (as many sets as d_v holds), each scaled by its maximum so that no weight overflows; taken from the exact
  // backward's own P (reference_sdpa_bwd_with_columns) where the sets fit, a set beyond d_v from dV alone.
  using Sets = std::vector<std::pair<const std::vector<double>*, double>>;
  const auto packed = [&](const Sets& sets) {
    std::vector<float> weighted(in.dout.size(), 0.0f);
    for (int64_t r : all_rows)
      for (int h = 0; h < c.hq; ++h) {
        const size_t qi = size_t(r) * size_t(c.hq) + size_t(h);
        for (size_t k = 0; k < sets.size(); ++k) {
          const double m = sets[k].second;
          weighted[qi * size_t(c.dim_v) + k] = m > 0 ? float(std::min((*sets[k].first)[qi] / m, 1.0)) : 0.0f;
        }
      }
    return weighted;
  };
  const auto unpacked = [&](const Outputs& cols, const Sets& sets) {
    std::vector<std::vector<double>> out(sets.size(), std::vector<double>(size_t(l.kv_rows) * size_t(c.hkv), 0));
    for (int64_t j : kvrows)
      for (int kh = 0; kh < c.hkv; ++kh)
        for (size_t k = 0; k < sets.size(); ++k) {
          const size_t at = size_t(j) * size_t(c.hkv) + size_t(kh);
          const float v = cols.dv[at * size_t(c.dim_v) + k];
          out[k][at] = std::isfinite(v) ? std::fabs(double(v)) * sets[k].second : 0.0;
        }
    return out;
  };
  std::vector<double> dk_floor(size_t(l.kv_rows) * size_t(c.hkv), 0), dv_floor(dk_floor.size(), 0);
  if (dk_max > 0 || dv_max > 0) {
    const Sets both = {{&w_dk, dk_max}, {&w_dv, dv_max}};
    const Sets with_exact = c.dim_v >= 2 ? both : Sets{both[0]};
    // The column sums land in dv alone: the other gradients' buffers are not needed (nor allocated).
    const auto dv_alone = [&] {
      Outputs o;
      o.dv.assign(size_t(l.kv_rows) * size_t(c.hkv) * size_t(c.dim_v), sentinel_float());
      return o;
    };
    Outputs cols = dv_alone();
    reference_sdpa_bwd_with_columns(lx, in, exact, packed(with_exact), int(with_exact.size()), cols);
    std::vector<std::vector<double>> sums = unpacked(cols, with_exact);
    if (c.dim_v < 2) {
      Outputs rest = dv_alone();
      reference_sdpa_bwd_dv(lx, in, packed({both[1]}), 1, rest);
      sums.push_back(unpacked(rest, {both[1]})[0]);
    }
    for (size_t at = 0; at < dk_floor.size(); ++at) {
      dk_floor[at] = kLambda * kU32 * l.scale * sums[0][at];
      dv_floor[at] = kLambda * kU32 * sums[1][at];
    }
  } else {
    reference_sdpa_bwd(lx, in, exact);
  }
  // Each judged cell's gate: 2 x the emulation's error (the larger of the emulation's and the fp32
  // backward's) + the floor (see the top of the file).
  for (size_t gi = 0; gi < 3; ++gi) {
    const Grad g = grads(c)[gi];
    const auto& rows = g.kv ? kvrows : qrows;
    const std::vector<float>&X = exact.*g.t, &E = emul.*g.t, &F = f32.*g.t;
    const size_t W = size_t(g.width), RW = size_t(g.heads) * W;
    // The gradient's rms over the judged rows: the scale of its fp32 accumulation floor.
    double sum2 = 0;
    int64_t elems = 0;
    for (int64_t r : rows)
      for (size_t e = 0; e < RW; ++e, ++elems) sum2 += double(X[size_t(r) * RW + e]) * double(X[size_t(r) * RW + e]);
    const double rms = elems > 0 ? std::sqrt(sum2 / double(elems)) : 0;
    sum2_[gi] = sum2;
    const double acc_floor = kLambda * std::sqrt(double(n_keys)) * kU32 * rms;
    std::vector<double>& gate = gates_[gi];
    gate.assign(size_t(g.kv ? l.kv_rows : l.q_rows) * size_t(g.heads), 0);
    for (int64_t r : rows)
      for (int h = 0; h < g.heads; ++h) {
        const size_t at = size_t(r) * RW + size_t(h) * W;
        double emul_err = 0, xmax = 0, x2 = 0;
        for (size_t e = 0; e < W; ++e) {
          const double x = X[at + e];
          xmax = std::max(xmax, std::fabs(x));
          x2 += x * x;
          emul_err = std::max({emul_err, std::fabs(double(E[at + e]) - x), std::fabs(double(F[at + e]) - x)});
        }
        double floor = dtype_ulp(c.dtype, xmax) + kLambda * u_d * std::sqrt(x2 / double(W)) + acc_floor;
        if (!g.kv) {  // dQ: the rounding of dP - D and of P (see the top of the file)
          floor += dq_floor[size_t(r) * size_t(c.hq) + size_t(h)];
        } else {  // dK, dV: the same roundings through every row that attends the key
          floor += (gi == 1 ? dk_floor : dv_floor)[size_t(r) * size_t(c.hkv) + size_t(h)];
        }
        gate[size_t(r) * size_t(g.heads) + size_t(h)] = kEmulationFactor * emul_err + floor;
      }
  }
}

Verdict SdpaBwdJudgement::judge(const Outputs& got) const {
  const Layout& l = l_;
  const Case& c = l.c;
  const JudgedRegion& region = region_;
  const std::vector<int64_t>& qrows = region.value_rows();
  const std::vector<int64_t>& kvrows = region.kv_value_rows();
  const Outputs& exact = exact_;
  std::vector<Metric> metrics;
  std::vector<RowNote> notes;
  int64_t unwritten = 0;
  metrics.push_back(info_metric("rows_checked", double(qrows.size())));
  metrics.push_back(info_metric("kv_rows_checked", double(kvrows.size())));
  double max_abs_all = 0;
  std::vector<Metric> per_grad;
  auto maps = std::make_shared<std::vector<CellMap>>();
  for (size_t gi = 0; gi < 3; ++gi) {
    const Grad g = grads(c)[gi];
    const auto& rows = g.kv ? kvrows : qrows;
    const std::vector<float>&G = got.*g.t, &X = exact.*g.t;
    const size_t W = size_t(g.width), RW = size_t(g.heads) * W;
    CellMap& map = maps->emplace_back(g.name, g.kv, g.kv ? l.kv_rows : l.q_rows, g.heads);
    const int out_index = region.output_of(g.t);
    region.mark_pad_rows(map, out_index, got);
    const double sum2 = sum2_[gi];
    int64_t violations = 0, nonfinite = 0;
    double worst = 0, worst_gate = 0, max_abs = 0, diff2 = 0;
    for (int64_t r : rows) {
      double row_ratio = 0;
      for (int h = 0; h < g.heads; ++h) {
        const size_t at = size_t(r) * RW + size_t(h) * W;
        double err = 0;
        bool unw = false, bad = false;
        for (size_t e = 0; e < W; ++e) {
          const double x = X[at + e];
          const float v = G[at + e];
          if (is_sentinel(v)) { unw = true; continue; }
          if (!std::isfinite(v)) { ++nonfinite; bad = true; err = INFINITY; continue; }
          const double d = std::fabs(double(v) - x);
          err = std::max(err, d);
          diff2 += d * d;
        }
        unwritten += unw;
        const double gate = gates_[gi][size_t(r) * size_t(g.heads) + size_t(h)];
        const double ratio = gate > 0 ? err / gate : (err > 0 ? INFINITY : 0);
        violations += !(err <= gate);
        max_abs = std::max(max_abs, err);
        if (!(ratio <= worst)) { worst = ratio; worst_gate = gate; }
        row_ratio = std::max(row_ratio, ratio);
        map.judged(r, h, bad ? CellMap::NonFinite : unw ? CellMap::Unwritten : CellMap::Judged, ratio);
      }
      if (row_ratio > 1 && !g.kv) {
        const auto& seg = l.seg_of(r);
        notes.push_back({r, seg.doc, seg.chunk, l.pos_of(r), row_ratio});
      }
    }
    max_abs_all = std::max(max_abs_all, max_abs);
    const double rel = sum2 > 0 ? std::sqrt(diff2 / sum2) : std::sqrt(diff2);
    const int64_t clobbered = out_index < 0 ? 0 : region.clobbered_pad_slots(got, out_index);
    per_grad.push_back(gated_metric(fmt::format("{}_violations", g.name), double(violations),
                                    fmt::format("== 0 (per row: 2 x emulation's err + floor; worst err/gate {:.3g}, "
                                                "gate {:.3g})",
                                                worst, worst_gate),
                                    violations > 0, Headline::No, worst_gate, worst));
    per_grad.push_back(info_metric(fmt::format("{}_rel_l2", g.name), rel));
    per_grad.push_back(gated_metric(fmt::format("{}_nonfinite_valid", g.name), double(nonfinite), "== 0",
                                    nonfinite > 0, Headline::Yes));
    per_grad.push_back(gated_metric(fmt::format("{}_clobbered_pad_slots", g.name), double(clobbered),
                                    c.pad_writes == PadWrites::Forbid ? "== 0" : "", clobbered > 0));
  }
  // K/V rows that no query reaches: the exact dK and dV rows are zero (every reached key has a
  // positive probability, so its dV is nonzero); anything else there leaked from another row's band.
  int64_t leaked = 0;
  {
    const size_t WK = size_t(c.hkv) * size_t(c.dim), WV = size_t(c.hkv) * size_t(c.dim_v);
    for (int64_t r : kvrows) {
      const float* xv = exact.dv.data() + size_t(r) * WV;
      if (std::any_of(xv, xv + WV, [](float x) { return x != 0.f; })) continue;
      const float* gk = got.dk.data() + size_t(r) * WK;
      const float* gv = got.dv.data() + size_t(r) * WV;
      auto stray = [](float x) { return x != 0.f && !is_sentinel(x); };
      leaked += std::any_of(gk, gk + WK, stray) || std::any_of(gv, gv + WV, stray);
    }
  }
  metrics.push_back(info_metric("max_abs_err", max_abs_all, Headline::Yes));
  for (auto& m : per_grad) metrics.push_back(std::move(m));
  metrics.push_back(gated_metric("dkv_unreached_nonzero", double(leaked), "== 0", leaked > 0));
  metrics.push_back(gated_metric("unwritten_rows", double(unwritten), "== 0", unwritten > 0));
  Verdict v = build_verdict(std::move(metrics), std::move(notes), WorseIs::Highest);
  v.cell_maps = std::move(maps);
  return v;
}

}  // namespace

std::unique_ptr<PreparedJudgement> prepare_sdpa_bwd_judgement(const Layout& l, const Inputs& in) {
  return std::make_unique<SdpaBwdJudgement>(l, in);
}

Verdict compare_sdpa_bwd(const Layout& l, const Inputs& in, const Outputs& got, const Outputs&) {
  return SdpaBwdJudgement(l, in).judge(got);
}

}  // namespace ao
