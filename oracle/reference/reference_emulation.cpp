// The SDPA answers the tolerances are derived from, on the checked valid rows only (tolerance.h):
//  * exact: fp64 throughout (scores, softmax, P.V, LSE): the ground truth a kernel is judged against;
//  * emulation: what a flash kernel computes in the case dtype: inputs in the dtype (they already are),
//    scores and row sums accumulated in fp32, P = exp(s - max) rounded to the dtype before P.V (as
//    FlashAttention-2 and cuDNN feed P to the tensor cores), P.V accumulated in fp32, O = (P.V)/sum
//    rounded to the dtype. For fp32 the rounding steps are identities: plain fp32.
// Row blocks of one segment share the union of their key ranges (as in reference_sdpa.cpp); the
// products go through reference_gemm.h: fp64 GEMMs for the exact answer and the magnitudes, fp32
// GEMMs (fp32 accumulation in BLAS's order) for the emulation. K/V are converted to fp64 in chunks of
// keys, so memory stays O(block rows x keys).
#include <algorithm>
#include <cmath>
#include <limits>

#include "attn_oracle/reference/emulation.h"
#include "reference_gemm.h"
#include "reference_rows.h"
#include "reference_runtime.h"

namespace ao {

namespace {
constexpr size_t kBlockRows = 32;
constexpr int64_t kKeyChunk = 4096;
// The query heads of one K/V head go through the products together, up to this many stacked rows: the
// GEMMs get taller (BLAS packs each K/V chunk once for all of them) and each K/V chunk is converted to
// fp64 once per K/V head rather than once per query head. Per-thread scratch stays below the
// reference's (rows x keys x 20 bytes against its 128 x keys x 4 + keys x (D + Dv) x 8).
constexpr int64_t kStackRows = 128;
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
    std::vector<float> Qf, S32, E;
    std::vector<double> sum;
    std::vector<float> sum32;
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
      const int64_t ldS = n;
      Qd.resize(size_t(SR * D)); Qa.resize(size_t(SR * D)); Qf.resize(size_t(SR * D));
      S.resize(size_t(SR * ldS)); P2.resize(size_t(SR * ldS)); S32.resize(size_t(SR * ldS));
      X.resize(size_t(SR * Dv)); M.resize(size_t(SR * Dv)); Q2.resize(size_t(SR * Dv)); E.resize(size_t(SR * Dv));
      sum.resize(size_t(SR));
      sum32.resize(size_t(SR));
      for (int64_t j = 0; j < SR; ++j)
        for (int d = 0; d < D; ++d) {
          const float q = in.q[size_t((rows[size_t(j % R)] * Hq + h0 + j / R) * D + d)];
          Qf[size_t(j * D + d)] = q;
          Qd[size_t(j * D + d)] = q;
          Qa[size_t(j * D + d)] = std::fabs(double(q));
        }
      // Scores: exact (fp64), emulated (fp32 GEMM, then the scale), and |q|.|k| (P2 holds it for now).
      for (int64_t c0 = 0; c0 < n; c0 += kKeyChunk) {
        const int64_t cn = std::min(kKeyChunk, n - c0);
        const float* kp = in.k.data() + ((base + lo + c0) * Hkv + kvh) * D;
        Kd.resize(size_t(cn * D));
        Ka.resize(size_t(cn * D));
        for (int64_t s = 0; s < cn; ++s)
          for (int d = 0; d < D; ++d) {
            Kd[size_t(s * D + d)] = kp[s * Hkv * D + d];
            Ka[size_t(s * D + d)] = std::fabs(double(kp[s * Hkv * D + d]));
          }
        detail::gemm_abt<double>(SR, cn, D, scale, Qd.data(), D, Kd.data(), D, 0.0, S.data() + c0, ldS);
        detail::gemm_abt<double>(SR, cn, D, scale, Qa.data(), D, Ka.data(), D, 0.0, P2.data() + c0, ldS);
        detail::gemm_abt<float>(SR, cn, D, 1.f, Qf.data(), D, kp, int64_t(Hkv) * D, 0.f, S32.data() + c0, ldS);
      }
      // Softmax per row over its own range; outside it the weights are 0.
      for (int64_t j = 0; j < SR; ++j) {
        double* s = S.data() + j * ldS;
        double* p2 = P2.data() + j * ldS;
        float* s32 = S32.data() + j * ldS;
        const int64_t a = kr[size_t(j % R)].lo - lo, b = kr[size_t(j % R)].hi - lo;
        double m = -INFINITY, tot = 0, score_abs = 0;
        float m32 = -INFINITY, tot32 = 0.f;
        for (int64_t k = a; k < b; ++k) {
          s32[k] *= scale32;
          m = std::max(m, s[k]);
          m32 = std::max(m32, s32[k]);
        }
        for (int64_t k = 0; k < n; ++k) {
          if (k < a || k >= b) { s[k] = p2[k] = 0; s32[k] = 0.f; continue; }
          const double p = std::exp(s[k] - m);
          const float p32 = std::exp(s32[k] - m32);
          tot += p;
          tot32 += p32;
          score_abs += p * p2[k];
          s[k] = p;
          p2[k] = p * p;
          s32[k] = round_to(c.dtype, p32);  // P in the dtype, as it enters P.V
        }
        sum[size_t(j)] = tot;
        sum32[size_t(j)] = tot32;
        if (b > a) {
          SdpaRowTruth& x = truth_of(j);
          x.lse = m + std::log(tot);
          x.score_abs = score_abs / tot;
        }
      }
      // P.V: exact, emulated (fp32), and the magnitudes sum p|v|, sum p^2 v^2.
      for (int64_t c0 = 0; c0 < n; c0 += kKeyChunk) {
        const int64_t cn = std::min(kKeyChunk, n - c0);
        const float* vp = in.v.data() + ((base + lo + c0) * Hkv + kvh) * Dv;
        Vd.resize(size_t(cn * Dv)); Va.resize(size_t(cn * Dv)); V2.resize(size_t(cn * Dv));
        for (int64_t s = 0; s < cn; ++s)
          for (int e = 0; e < Dv; ++e) {
            const double v = vp[s * Hkv * Dv + e];
            Vd[size_t(s * Dv + e)] = v;
            Va[size_t(s * Dv + e)] = std::fabs(v);
            V2[size_t(s * Dv + e)] = v * v;
          }
        const double beta = c0 == 0 ? 0.0 : 1.0;
        detail::gemm_ab<double>(SR, Dv, cn, 1.0, S.data() + c0, ldS, Vd.data(), Dv, beta, X.data(), Dv);
        detail::gemm_ab<double>(SR, Dv, cn, 1.0, S.data() + c0, ldS, Va.data(), Dv, beta, M.data(), Dv);
        detail::gemm_ab<double>(SR, Dv, cn, 1.0, P2.data() + c0, ldS, V2.data(), Dv, beta, Q2.data(), Dv);
        detail::gemm_ab<float>(SR, Dv, cn, 1.f, S32.data() + c0, ldS, vp, int64_t(Hkv) * Dv, float(beta), E.data(), Dv);
      }
      for (int64_t j = 0; j < SR; ++j) {
        if (kr[size_t(j % R)].hi <= kr[size_t(j % R)].lo) continue;
        const int64_t ti = index_of[size_t(rows[size_t(j % R)])] * Hq + h0 + j / R;
        SdpaRowTruth& x = t.rh[size_t(ti)];
        double* xo = t.o_exact.data() + ti * Dv;
        float* eo = t.o_emul.data() + ti * Dv;
        const double tot = sum[size_t(j)];
        for (int e = 0; e < Dv; ++e) {
          xo[e] = X[size_t(j * Dv + e)] / tot;
          eo[e] = round_to(c.dtype, E[size_t(j * Dv + e)] / sum32[size_t(j)]);
          x.v_abs = std::max(x.v_abs, M[size_t(j * Dv + e)] / tot);
          x.v_rms = std::max(x.v_rms, std::sqrt(Q2[size_t(j * Dv + e)]) / tot);
          x.emul_err = std::max(x.emul_err, std::fabs(double(eo[e]) - xo[e]));
          x.o_max = std::max(x.o_max, std::fabs(xo[e]));
        }
      }
    }
  }
  return t;
}

}  // namespace ao
