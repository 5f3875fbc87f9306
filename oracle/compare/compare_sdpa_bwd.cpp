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
//    exactly, dK = 0, and a kernel's differently ordered dP and D leave ~u_32 of it). And P itself
//    (docs/tolerances.md, "P's rounding"): a kernel's exponent of P = exp(s - lse) carries the fp32 rounding of
//    the scaled logit, of lse (or lse log2 e) and of their difference, |theta_ij| <= u_32 T_i with
//    T_i = 4 (S_i + |lse_i|) + 4, S_i >= |s_ij| (Hoelder over the keys' element maxima or
//    Cauchy-Schwarz); the error theta_ij P_ij of P moves dS_ij by theta_ij dS_ij, so it reaches
//    dQ_i as u_32 T_i scale sum_j |dS_ij| |k_j|_inf, dK_j as u_32 scale sum_i T_i |dS_ij| max |q_i| and
//    dV_j as u_32 sum_i T_i P_ij max |dO_i|: it scales with the gradient's own terms, not with the logits
//    times the norm bounds (at values=extreme that floor, lambda u_32 2 L ~ 1 times |dO| (max |v| + |O|),
//    exceeded the gradients and passed an all-zero dQ). In a 16-bit dtype dQ also holds dS rounded to it
//    at another point, seen through the keys' shared part k-bar (their mean), which dQ itself does not
//    show (sum_j dS_ij = 0): lambda u_d scale |k-bar|_inf (sum_j dS_ij^2)^1/2. The sums over i are
//    column sums of P and |dS|, weighted, and the sums over j row sums over dS, all taken beside the exact
//    backward from its own P and dS (reference_sdpa_bwd_with_sums: P^T W, |dS|^T W2, DsSums);
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
#include <functional>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "prepared.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/reference/bwd_sums.h"
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
  // Per document and K/V head: the largest |v_j| (2-norm), |k_j,e| and |k_j| (2-norm) of its keys, per
  // element e the largest |k_j,e| (kmax_e) and the keys' mean's largest element (|k-bar|_inf).
  const size_t n_dk = l.docs.size() * size_t(c.hkv), D = size_t(c.dim);
  std::vector<double> max_v(n_dk, 0), max_k(n_dk, 0), max_k2(n_dk, 0), kmax_e(n_dk * D, 0), kbar(n_dk, 0);
  {
    std::vector<double> ksum(n_dk * D, 0);
    for (size_t d = 0; d < l.docs.size(); ++d)
      for (int64_t j = l.docs[d].kv_off; j < l.docs[d].kv_off + l.docs[d].kv_len; ++j)
        for (int kh = 0; kh < c.hkv; ++kh) {
          const float* v = in.v.data() + (size_t(j) * size_t(c.hkv) + size_t(kh)) * size_t(c.dim_v);
          const float* k = in.k.data() + (size_t(j) * size_t(c.hkv) + size_t(kh)) * D;
          const size_t at = d * size_t(c.hkv) + size_t(kh);
          double km = 0;
          for (size_t e = 0; e < D; ++e) {
            const double x = std::fabs(double(k[e]));
            km = std::max(km, x);
            kmax_e[at * D + e] = std::max(kmax_e[at * D + e], x);
            ksum[at * D + e] += double(k[e]);
          }
          max_v[at] = std::max(max_v[at], norm(v, c.dim_v));
          max_k[at] = std::max(max_k[at], km);
          max_k2[at] = std::max(max_k2[at], norm(k, c.dim));
        }
    for (size_t d = 0; d < l.docs.size(); ++d)
      for (size_t kh = 0; kh < size_t(c.hkv); ++kh)
        for (size_t e = 0; e < D && l.docs[d].kv_len > 0; ++e) {
          const size_t at = d * size_t(c.hkv) + kh;
          kbar[at] = std::max(kbar[at], std::fabs(ksum[at * D + e]) / double(l.docs[d].kv_len));
        }
  }
  const int group = c.hq / c.hkv;
  // Per (row, head) of every valid row (each one reaches dK and dV, also the rows that rows=N leaves out
  // of dQ's judged rows): dQ's dP - D floor, the bound T of P's relative exponent error (in units of
  // u_32), and the weights of dK's and dV's floors.
  std::vector<int64_t> all_rows;
  for (const auto& seg : l.segments)
    for (int64_t i = 0; i < seg.valid; ++i) all_rows.push_back(seg.row0 + i);
  const size_t n_qh = size_t(l.q_rows) * size_t(c.hq);
  std::vector<double> dq_floor(n_qh, 0), t_p(n_qh, 0), w_dk(n_qh, 0), w_dk_p(n_qh, 0), w_dv(n_qh, 0);
  double dk_max = 0, dk_p_max = 0, dv_max = 0;
  for (int64_t r : all_rows)
    for (int h = 0; h < c.hq; ++h) {
      const auto& seg = l.seg_of(r);
      const size_t dv = size_t(c.dim_v), at_kv = size_t(seg.doc) * size_t(c.hkv) + size_t(h / group);
      const size_t qi = size_t(r) * size_t(c.hq) + size_t(h);
      const float* q = in.q.data() + qi * D;
      const float* dout = in.dout.data() + qi * dv;
      double qm = 0, dom = 0, holder = 0;
      for (size_t e = 0; e < D; ++e) {
        qm = std::max(qm, std::fabs(double(q[e])));
        holder += std::fabs(double(q[e])) * kmax_e[at_kv * D + e];
      }
      for (int e = 0; e < c.dim_v; ++e) dom = std::max(dom, std::fabs(double(dout[e])));
      const double lse = in.lse[size_t(seg.stats_row0 + (r - seg.row0)) * size_t(c.hq) + size_t(h)];
      // |s_ij| <= S: Hoelder over the elements' key maxima, or Cauchy-Schwarz, whichever is smaller.
      const double S = l.scale * std::min(holder, norm(q, c.dim) * max_k2[at_kv]);
      const double n_o = norm(in.o.data() + (size_t(seg.o_row0 + (r - seg.row0)) * size_t(c.hq) + size_t(h)) * dv, c.dim_v);
      const double cancel = norm(dout, c.dim_v) * (max_v[at_kv] + n_o) * std::sqrt(double(c.dim_v));
      dq_floor[qi] = kLambda * kU32 * l.scale * cancel * max_k[at_kv];
      t_p[qi] = std::isfinite(lse) ? 4 * (S + std::fabs(lse)) + 4 : 0.0;  // a row without keys has no P
      w_dk[qi] = cancel * qm;
      w_dk_p[qi] = t_p[qi] * qm;
      w_dv[qi] = t_p[qi] * dom;
      if (std::isfinite(w_dk[qi])) dk_max = std::max(dk_max, w_dk[qi]);
      if (std::isfinite(w_dk_p[qi])) dk_p_max = std::max(dk_p_max, w_dk_p[qi]);
      if (std::isfinite(w_dv[qi])) dv_max = std::max(dv_max, w_dv[qi]);
    }
  // Column sums sum_i P_ij w_i and sum_i |dS_ij| w_i per (key, K/V head) of weight sets packed into the
  // first elements of dO (as many sets as d_v holds), each scaled by its maximum so that no weight
  // overflows; and the row sums over dS: all from the exact backward's own P and dS
  // (reference_sdpa_bwd_with_sums), a P set beyond d_v from dV alone.
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
  const auto unpacked = [&](const std::vector<float>& cols, int width, const Sets& sets) {
    std::vector<std::vector<double>> out(sets.size(), std::vector<double>(size_t(l.kv_rows) * size_t(c.hkv), 0));
    for (int64_t j : kvrows)
      for (int kh = 0; kh < c.hkv; ++kh)
        for (size_t k = 0; k < sets.size(); ++k) {
          const size_t at = size_t(j) * size_t(c.hkv) + size_t(kh);
          const float v = cols[at * size_t(width) + k];
          out[k][at] = std::isfinite(v) ? std::fabs(double(v)) * sets[k].second : 0.0;
        }
    return out;
  };
  const Sets both = {{&w_dk, dk_max}, {&w_dv, dv_max}};
  const Sets with_exact = c.dim_v >= 2 ? both : Sets{both[0]};
  const Sets on_ds = {{&w_dk_p, dk_p_max}};
  // The column sums land in dv (of P) and dk (of |dS|) alone: dq's buffer is not needed (nor allocated).
  const auto dv_alone = [&] {
    Outputs o;
    o.dv.assign(size_t(l.kv_rows) * size_t(c.hkv) * size_t(c.dim_v), sentinel_float());
    return o;
  };
  Outputs cols = dv_alone();
  cols.dk.assign(size_t(l.kv_rows) * size_t(c.hkv) * D, sentinel_float());
  const std::vector<float> ds_weights = packed(on_ds);
  DsSums ds;
  ds.weights = &ds_weights;
  ds.cols = 1;
  reference_sdpa_bwd_with_sums(lx, in, exact, packed(with_exact), int(with_exact.size()), cols, ds);
  std::vector<std::vector<double>> sums = unpacked(cols.dv, c.dim_v, with_exact);
  if (c.dim_v < 2) {
    Outputs rest = dv_alone();
    reference_sdpa_bwd_dv(lx, in, packed({both[1]}), 1, rest);
    sums.push_back(unpacked(rest.dv, c.dim_v, {both[1]})[0]);
  }
  const std::vector<double> ds_cols = unpacked(cols.dk, c.dim, on_ds)[0];
  std::vector<double> dk_floor(size_t(l.kv_rows) * size_t(c.hkv), 0), dv_floor(dk_floor.size(), 0);
  for (size_t at = 0; at < dk_floor.size(); ++at) {
    dk_floor[at] = kLambda * kU32 * l.scale * sums[0][at] + kU32 * l.scale * ds_cols[at];
    dv_floor[at] = kU32 * sums[1][at];
  }
  // A cell whose exact value is fp64's leftover of a cancellation is zero: the exact backward leaves about
  // u_64 times the terms of dP - D (a row with one key: dP = D, dS = 0, dQ = 0 and its key's dK = 0), and
  // holds 0 where a cell is below 2^-36 of them (2^17 above that unit): the exact answer is zero there, so
  // a zero answer is right (the discrimination check's exact_zero), not weak.
  const auto zero_leftovers = [&](std::vector<float>& x, const std::vector<int64_t>& rows, int heads, int width,
                                  const std::function<double(int64_t, int)>& terms) {
    for (int64_t r : rows)
      for (int h = 0; h < heads; ++h) {
        float* cell = x.data() + (size_t(r) * size_t(heads) + size_t(h)) * size_t(width);
        double m = 0;
        for (int e = 0; e < width; ++e) m = std::max(m, std::fabs(double(cell[e])));
        if (m > 0 && m <= 0x1p-36 * terms(r, h)) std::fill(cell, cell + width, 0.f);
      }
  };
  zero_leftovers(exact.dq, qrows, c.hq, c.dim, [&](int64_t r, int h) {
    return dq_floor[size_t(r) * size_t(c.hq) + size_t(h)] / (kLambda * kU32);  // scale |dO| (max|v| + |O|) sqrt(d_v) max|k|
  });
  zero_leftovers(exact.dk, kvrows, c.hkv, c.dim, [&](int64_t r, int h) {
    return l.scale * sums[0][size_t(r) * size_t(c.hkv) + size_t(h)];  // its rows' terms, weighted by P
  });
  // dQ: P's rounding through every key the row attends (u_32 T scale sum_j |dS_ij| |k_j|_inf), and, in a
  // 16-bit dtype, dS rounded to it at another point through the keys' shared part k-bar, which the
  // gradient itself does not show (sum_j dS_ij = 0: dQ = scale sum_j dS_ij (k_j - k-bar)).
  for (int64_t r : all_rows)
    for (int h = 0; h < c.hq; ++h) {
      const size_t qi = size_t(r) * size_t(c.hq) + size_t(h);
      const size_t at_kv = size_t(l.seg_of(r).doc) * size_t(c.hkv) + size_t(h / group);
      dq_floor[qi] += kU32 * t_p[qi] * l.scale * ds.rows[2 * qi] +
                      kLambda * u_d * l.scale * kbar[at_kv] * std::sqrt(ds.rows[2 * qi + 1]);
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
