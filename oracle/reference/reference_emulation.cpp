// The SDPA answers the tolerances are derived from, on the checked valid rows only (tolerance.h):
//  * exact: fp64 throughout (scores, softmax, P.V, LSE): the ground truth a kernel is judged against;
//  * emulation: what a flash kernel computes in the case dtype: inputs in the dtype (they already are),
//    scores and row sums accumulated in fp32, P = exp(s - max) rounded to the dtype before P.V (as
//    FlashAttention-2 and cuDNN feed P to the tensor cores), P.V accumulated in fp32, O = (P.V)/sum
//    rounded to the dtype. For fp32 the rounding steps are identities: plain fp32.
// Row blocks of one segment share the union of their key ranges (as in reference_sdpa.cpp); the
// products go through reference_gemm.h: fp64 GEMMs for the exact answer, fp32 GEMMs (fp32 accumulation
// in BLAS's order) for the emulation. The magnitudes the floors scale with (SdpaRowTruth's score_abs,
// v_abs, v_rms: sums of non-negative terms, so without cancellation) take fp32 GEMMs of the exact weights
// too, relative error at most n u_32, where a chunk's inputs keep their squares and products inside fp32's
// normal range (every nonzero |x| in [2^-40, 2^40]); a chunk with others takes fp64 GEMMs for them.
// Scores, weights and K/V in fp64 are held for one chunk of keys at a time, so the scratch is
// O(stacked rows x kKeyChunk) whatever the document.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attn_oracle/reference/emulation.h"
#include "reference_gemm.h"
#include "reference_rows.h"
#include "reference_runtime.h"
#include "reference_softmax.h"

namespace ao {

namespace {
constexpr size_t kBlockRows = 32;
constexpr int64_t kKeyChunk = 4096;
// The query heads of one K/V head go through the products together, up to this many stacked rows: the
// GEMMs get taller (BLAS packs each K/V chunk once for all of them) and each K/V chunk is converted to
// fp64 once per K/V head rather than once per query head. Per-thread scratch: 128 x 4096 keys x 20 bytes
// of scores and weights (10 MiB) plus a chunk's K/V in fp64.
constexpr int64_t kStackRows = 128;

// True when every nonzero |x[i * ld + e]| (i < rows, e < width) is in [2^-40, 2^40]: products of two
// such values, and their sums over a chunk, stay normal fp32 numbers.
bool fp32_magnitudes_safe(const float* x, int64_t rows, int64_t ld, int width) {
  // On the bits, so that the loop vectorises: |x| as an integer orders as |x| does (NaN and inf above 2^40).
  constexpr uint32_t lo = 0x2b800000u, hi = 0x53800000u;  // 2^-40, 2^40
  uint32_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int e = 0; e < width; ++e) {
      uint32_t a;
      std::memcpy(&a, x + i * ld + e, 4);
      a &= 0x7fffffffu;
      bad |= uint32_t(a != 0) & (uint32_t(a < lo) | uint32_t(a > hi));
    }
  return bad == 0;
}
}  // namespace

SdpaTruth sdpa_truth(const Layout& l, const Inputs& in) {
  const Case& c = l.c;
  const int Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = l.group();
  SdpaTruth t;
  std::vector<int64_t> index_of(size_t(l.q_rows), -1);
  for (int64_t r : l.check_rows)
    if (l.valid_row(r)) {
      index_of[size_t(r)] = int64_t(t.rows.size());
      t.rows.push_back(r);
    }
  const int64_t NR = int64_t(t.rows.size());
  t.rh.resize(size_t(NR * Hq));
  t.o_exact.assign(size_t(NR * Hq * Dv), 0.0);
  t.o_emul.assign(size_t(NR * Hq * Dv), 0.f);
  const double scale = l.scale;
  const float scale32 = float(l.scale);
  const auto blocks = detail::row_blocks(l, kBlockRows);
  // One task per (row block, K/V head, group of its query heads): the tasks write disjoint (row, head)s.
  const int gh = int(std::clamp<int64_t>(kStackRows / int64_t(kBlockRows), 1, G));
  const int groups = (G + gh - 1) / gh;
  const int64_t tasks = int64_t(blocks.size()) * Hkv * groups;
  detail::BlasSingleThread blas_in_caller;

#pragma omp parallel num_threads(detail::reference_threads())
  {
    std::vector<double> Qd, Qa, S, P2, Kd, Ka, Vd, Va, V2, X, M, Q2;
    std::vector<float> Qf, S32, E, Qa32, A32, Pf, P2f, Ka32, Va32, V2f, Mf, Q2f;
    std::vector<double> sum, mx, sabs, smin, smax, sq, vmax, key_vmax;
    std::vector<char> one_exact;  // per stacked row: q has at most one nonzero element, its products exact in fp32
    std::vector<float> sum32, mx32;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const auto& block = blocks[size_t(task / (int64_t(Hkv) * groups))];
      const int kvh = int(task / groups % Hkv), h0 = kvh * G + int(task % groups) * gh;
      const int hn = std::min(gh, kvh * G + G - h0);
      std::vector<int64_t> rows;
      std::vector<KeyRange> kr;
      for (int64_t r : block.rows)
        if (l.valid_row(r)) {
          rows.push_back(r);
          kr.push_back(detail::row_key_ranges(l, r, exact_seams()).front());  // the oracle: one range per row
        }
      const int64_t R = int64_t(rows.size()), SR = R * hn;  // stacked row j: row j % R, head h0 + j / R
      if (R == 0) continue;
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
      for (const auto& k : kr)
        if (k.hi > k.lo) { lo = std::min(lo, k.lo); hi = std::max(hi, k.hi); }
      const int64_t base = kr[0].base, n = std::max<int64_t>(hi - lo, 0);
      auto truth_of = [&](int64_t j) -> SdpaRowTruth& {
        return t.rh[size_t(index_of[size_t(rows[size_t(j % R)])] * Hq + h0 + j / R)];
      };
      for (int64_t j = 0; j < SR; ++j) {
        SdpaRowTruth& x = truth_of(j);
        x.keys = kr[size_t(j % R)].hi - kr[size_t(j % R)].lo;
        if (x.keys == 0) x.lse = -std::numeric_limits<double>::infinity();  // O = 0 in both answers
      }
      if (n == 0) continue;
      const int64_t kc = std::min(kKeyChunk, n);  // the chunks' scores: SR x kc, whatever the document
      Qd.resize(size_t(SR * D)); Qa.resize(size_t(SR * D)); Qf.resize(size_t(SR * D)); Qa32.resize(size_t(SR * D));
      S.resize(size_t(SR * kc)); P2.resize(size_t(SR * kc)); S32.resize(size_t(SR * kc));
      A32.resize(size_t(SR * kc)); Pf.resize(size_t(SR * kc)); P2f.resize(size_t(SR * kc));
      X.resize(size_t(SR * Dv)); E.resize(size_t(SR * Dv)); Mf.resize(size_t(SR * Dv)); Q2f.resize(size_t(SR * Dv));
      M.assign(size_t(SR * Dv), 0.0);  // the magnitudes' sums, chunk by chunk in fp64
      Q2.assign(size_t(SR * Dv), 0.0);
      sum.assign(size_t(SR), 0.0);
      sum32.assign(size_t(SR), 0.f);
      mx.assign(size_t(SR), -INFINITY);
      mx32.assign(size_t(SR), -INFINITY);
      sabs.assign(size_t(SR), 0.0);
      sq.assign(size_t(SR), 0.0);
      vmax.assign(size_t(SR), 0.0);
      smin.assign(size_t(SR), INFINITY);
      smax.assign(size_t(SR), -INFINITY);
      one_exact.assign(size_t(SR), 1);
      for (int64_t j = 0; j < SR; ++j)
        for (int d = 0; d < D; ++d) {
          const float q = in.q[size_t((rows[size_t(j % R)] * Hq + h0 + j / R) * D + d)];
          Qf[size_t(j * D + d)] = q;
          Qd[size_t(j * D + d)] = q;
          Qa[size_t(j * D + d)] = std::fabs(double(q));
          Qa32[size_t(j * D + d)] = std::fabs(q);
        }
      const bool q_safe = fp32_magnitudes_safe(Qf.data(), SR, D, D);
      bool mag32 = false;  // this chunk's magnitudes in fp32
      // Scores of keys [c0, c0 + cn): emulated (fp32 GEMM, then the scale; kept where fp32_held, as after a
      // pass over the same chunk) and, unless fp32_only, exact (fp64) and scale |q|.|k| (in A32 where mag32,
      // else in P2).
      auto scores = [&](int64_t c0, int64_t cn, bool fp32_only, bool fp32_held = false) {
        const float* kp = in.k.data() + ((base + lo + c0) * Hkv + kvh) * D;
        if (!fp32_held) {
          detail::gemm_abt<float>(SR, cn, D, 1.f, Qf.data(), D, kp, int64_t(Hkv) * D, 0.f, S32.data(), cn);
          for (int64_t x = 0; x < SR * cn; ++x) S32[size_t(x)] *= scale32;
        }
        if (fp32_only) return;
        const float* vp = in.v.data() + ((base + lo + c0) * Hkv + kvh) * Dv;
        mag32 = q_safe && fp32_magnitudes_safe(kp, cn, int64_t(Hkv) * D, D) &&
                fp32_magnitudes_safe(vp, cn, int64_t(Hkv) * Dv, Dv);
        Kd.resize(size_t(cn * D));
        for (int64_t s = 0; s < cn; ++s)
          for (int d = 0; d < D; ++d) Kd[size_t(s * D + d)] = kp[s * Hkv * D + d];
        detail::gemm_abt<double>(SR, cn, D, scale, Qd.data(), D, Kd.data(), D, 0.0, S.data(), cn);
        if (mag32) {
          Ka32.resize(size_t(cn * D));
          for (int64_t s = 0; s < cn; ++s)
            for (int d = 0; d < D; ++d) Ka32[size_t(s * D + d)] = std::fabs(kp[s * Hkv * D + d]);
          detail::gemm_abt<float>(SR, cn, D, scale32, Qa32.data(), D, Ka32.data(), D, 0.f, A32.data(), cn);
        } else {
          Ka.resize(size_t(cn * D));
          for (int64_t s = 0; s < cn; ++s)
            for (int d = 0; d < D; ++d) Ka[size_t(s * D + d)] = std::fabs(double(kp[s * Hkv * D + d]));
          detail::gemm_abt<double>(SR, cn, D, scale, Qa.data(), D, Ka.data(), D, 0.0, P2.data(), cn);
        }
      };
      // Each row's own keys [a, b) within the chunk [c0, c0 + cn), as chunk columns.
      auto own = [&](int64_t j, int64_t c0, int64_t cn) {
        const int64_t a = kr[size_t(j % R)].lo - lo - c0, b = kr[size_t(j % R)].hi - lo - c0;
        return std::pair<int64_t, int64_t>{std::clamp<int64_t>(a, 0, cn), std::clamp<int64_t>(b, 0, cn)};
      };
      // Two passes over key chunks, so the scratch stays SR x kKeyChunk: the rows' maxima of the fp32
      // scores (the emulation's), then the softmax weights (the scores recomputed unless the keys are one
      // chunk) and their products with V,
      // accumulated chunk by chunk in key order. The exact weights exp(s - m) take the fp32 maximum as m
      // (the softmax does not depend on the shift): s - m is then at most the fp32 scores' rounding, a few
      // units for |m| <= 2^20, far from exp's overflow. Where an fp32 score overflowed or is NaN, or the
      // scores are larger, the task takes the exact maxima from one more pass over the fp64 scores.
      bool exact_max_needed = false;
      auto row_maxima = [&](bool fp32_only) {
        for (int64_t c0 = 0; c0 < n; c0 += kKeyChunk) {
          const int64_t cn = std::min(kKeyChunk, n - c0);
          scores(c0, cn, fp32_only);
          for (int64_t j = 0; j < SR; ++j) {
            const auto [a, b] = own(j, c0, cn);
            for (int64_t k = a; k < b; ++k)
              if (fp32_only) {
                const float v = S32[size_t(j * cn + k)];
                exact_max_needed = exact_max_needed || std::isnan(v);
                mx32[size_t(j)] = std::max(mx32[size_t(j)], v);
              } else {
                mx[size_t(j)] = std::max(mx[size_t(j)], S[size_t(j * cn + k)]);
              }
          }
        }
      };
      row_maxima(true);
      for (int64_t j = 0; j < SR; ++j) {
        mx[size_t(j)] = double(mx32[size_t(j)]);
        exact_max_needed = exact_max_needed || (mx32[size_t(j)] != -INFINITY && !(std::fabs(mx32[size_t(j)]) <= 0x1p20f));
      }
      if (exact_max_needed) {
        mx.assign(size_t(SR), -INFINITY);
        row_maxima(false);
      }
      for (int64_t c0 = 0; c0 < n; c0 += kKeyChunk) {
        const int64_t cn = std::min(kKeyChunk, n - c0);
        scores(c0, cn, false, n <= kKeyChunk);  // one chunk: the maxima's pass left its fp32 scores
        {  // each key's max_e |v_e|, for the rows' v_spread
          const float* vk = in.v.data() + ((base + lo + c0) * Hkv + kvh) * Dv;
          key_vmax.assign(size_t(cn), 0.0);
          for (int64_t s = 0; s < cn; ++s)
            for (int e = 0; e < Dv; ++e)
              key_vmax[size_t(s)] = std::max(key_vmax[size_t(s)], std::fabs(double(vk[s * Hkv * Dv + e])));
        }
        // Softmax weights over the row's own range; outside it the weights are 0.
        for (int64_t j = 0; j < SR; ++j) {
          double* s = S.data() + j * cn;
          double* p2 = P2.data() + j * cn;
          float* s32 = S32.data() + j * cn;
          float* a32 = A32.data() + j * cn;
          float* pf = Pf.data() + j * cn;
          float* p2f = P2f.data() + j * cn;
          const auto [a, b] = own(j, c0, cn);
          const double m = mx[size_t(j)];
          const float m32 = mx32[size_t(j)];
          double tot = sum[size_t(j)], score_abs = sabs[size_t(j)];
          // The row's exact scores: their spread, and whether each is one product exact in fp32 (then a
          // kernel's fp32 score is that value in any order of its dot).
          for (int64_t k = a; k < b; ++k) {
            smin[size_t(j)] = std::min(smin[size_t(j)], s[k]);
            smax[size_t(j)] = std::max(smax[size_t(j)], s[k]);
          }
          if (b > a && one_exact[size_t(j)]) {
            int nz = 0;
            for (int d = 0; d < D; ++d)
              if (Qf[size_t(j * D + d)] != 0.f) {
                const double prod = double(Qf[size_t(j * D + d)]) * Kd[size_t(a * D + d)];
                one_exact[size_t(j)] = ++nz <= 1 && double(float(prod)) == prod;
              }
          }
          float tot32 = sum32[size_t(j)];
          for (double* x : {s, p2}) std::fill(x, x + a, 0.0), std::fill(x + b, x + cn, 0.0);
          for (float* x : {s32, pf, p2f}) std::fill(x, x + a, 0.f), std::fill(x + b, x + cn, 0.f);
          if (b > a) {
            tot += detail::exp_shift_sum(s + a, b - a, m);
            Eigen::Map<Eigen::ArrayXd> p(s + a, b - a), pp(p2 + a, b - a);
            sq[size_t(j)] += p.square().sum();
            for (int64_t k = a; k < b; ++k) vmax[size_t(j)] = std::max(vmax[size_t(j)], key_vmax[size_t(k)]);
            if (mag32) {
              score_abs += (p * Eigen::Map<const Eigen::ArrayXf>(a32 + a, b - a).cast<double>()).sum();
              Eigen::Map<Eigen::ArrayXf>(pf + a, b - a) = p.cast<float>();
              Eigen::Map<Eigen::ArrayXf>(p2f + a, b - a) = p.square().cast<float>();
            } else {
              score_abs += (p * pp).sum();
              pp = p.square();
            }
            tot32 += detail::exp_shift_sum(s32 + a, b - a, m32);
            for (int64_t k = a; k < b; ++k) s32[k] = round_to(c.dtype, s32[k]);  // P in the dtype, as it enters P.V
          }
          sum[size_t(j)] = tot;
          sum32[size_t(j)] = tot32;
          sabs[size_t(j)] = score_abs;
        }
        // P.V: exact, emulated (fp32), and the magnitudes sum p|v|, sum p^2 v^2 (fp32 where mag32, each
        // chunk's added to the fp64 sums).
        const float* vp = in.v.data() + ((base + lo + c0) * Hkv + kvh) * Dv;
        Vd.resize(size_t(cn * Dv));
        for (int64_t s = 0; s < cn; ++s)
          for (int e = 0; e < Dv; ++e) Vd[size_t(s * Dv + e)] = vp[s * Hkv * Dv + e];
        const double beta = c0 == 0 ? 0.0 : 1.0;
        detail::gemm_ab<double>(SR, Dv, cn, 1.0, S.data(), cn, Vd.data(), Dv, beta, X.data(), Dv);
        detail::gemm_ab<float>(SR, Dv, cn, 1.f, S32.data(), cn, vp, int64_t(Hkv) * Dv, float(beta), E.data(), Dv);
        // sum p|v| and sum p^2 v^2 of this chunk in T: into Mo, Q2o with beta.
        auto magnitudes = [&](const auto* p1, const auto* p2, auto& va, auto& v2, auto* Mo, auto* Q2o, auto beta_mag) {
          using T = std::decay_t<decltype(beta_mag)>;
          va.resize(size_t(cn * Dv));
          v2.resize(size_t(cn * Dv));
          for (int64_t s = 0; s < cn; ++s)
            for (int e = 0; e < Dv; ++e) {
              const T v = vp[s * Hkv * Dv + e];
              va[size_t(s * Dv + e)] = std::fabs(v);
              v2[size_t(s * Dv + e)] = v * v;
            }
          detail::gemm_ab<T>(SR, Dv, cn, T(1), p1, cn, va.data(), Dv, beta_mag, Mo, Dv);
          detail::gemm_ab<T>(SR, Dv, cn, T(1), p2, cn, v2.data(), Dv, beta_mag, Q2o, Dv);
        };
        if (mag32) {
          magnitudes(Pf.data(), P2f.data(), Va32, V2f, Mf.data(), Q2f.data(), 0.f);
          for (int64_t x = 0; x < SR * Dv; ++x) {
            M[size_t(x)] += Mf[size_t(x)];
            Q2[size_t(x)] += Q2f[size_t(x)];
          }
        } else {
          magnitudes(S.data(), P2.data(), Va, V2, M.data(), Q2.data(), 1.0);
        }
      }
      for (int64_t j = 0; j < SR; ++j) {
        if (kr[size_t(j % R)].hi <= kr[size_t(j % R)].lo) continue;
        SdpaRowTruth& x = truth_of(j);
        const size_t ti = size_t(&x - t.rh.data());
        double* xo = t.o_exact.data() + ti * size_t(Dv);
        float* eo = t.o_emul.data() + ti * size_t(Dv);
        const double tot = sum[size_t(j)];
        x.lse = mx[size_t(j)] + std::log(tot);
        x.score_abs = sabs[size_t(j)] / tot;
        // Every allowed key scores the same exact fp32 value (values=extreme's even rows, a row with one
        // key): a kernel's score rounding (the scale, log2 e, the maximum) is then the same for every key and
        // moves no weight (dO = sum_i dp_i (v_i - O), sum_i dp_i = 0), and its dot is exact: no score term
        // in O's floor or LSE's gate (tolerance.cpp; LSE keeps its rounding at |LSE|).
        if (one_exact[size_t(j)] && smin[size_t(j)] == smax[size_t(j)]) x.score_abs = 0;
        for (int e = 0; e < Dv; ++e) {
          xo[e] = X[size_t(j * Dv + e)] / tot;
          eo[e] = round_to(c.dtype, E[size_t(j * Dv + e)] / sum32[size_t(j)]);
          x.v_abs = std::max(x.v_abs, M[size_t(j * Dv + e)] / tot);
          x.v_rms = std::max(x.v_rms, std::sqrt(Q2[size_t(j * Dv + e)]) / tot);
          x.emul_err = std::max(x.emul_err, std::fabs(double(eo[e]) - xo[e]));
          x.o_max = std::max(x.o_max, std::fabs(xo[e]));
        }
        const double concentration = sq[size_t(j)] / (tot * tot);  // sum_i p_i^2: 1 for a one-key softmax
        x.v_spread = std::min(2 * x.v_abs, 2 * vmax[size_t(j)] * std::max(0.0, 1 - concentration));
      }
    }
  }
  return t;
}

}  // namespace ao
