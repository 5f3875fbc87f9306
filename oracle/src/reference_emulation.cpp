// The SDPA answers the tolerances are derived from, on the checked valid rows only (tolerance.h):
//  * exact: fp64 throughout (scores, softmax, P.V, LSE): the ground truth a kernel is judged against;
//  * emulation: what a flash kernel computes in the case dtype: inputs in the dtype (they already are),
//    scores and row sums accumulated in fp32, P = exp(s - max) rounded to the dtype before P.V (as
//    FlashAttention-2 and cuDNN feed P to the tensor cores), P.V accumulated in fp32, O = (P.V)/sum
//    rounded to the dtype. For fp32 the rounding steps are identities: plain fp32.
// Cost per (row, head): 2 x keys x (dim + dim_v) multiply-adds, rows in parallel.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attn_oracle/tolerance.h"
#include "reference_plan.h"

namespace ao {

SdpaTruth sdpa_truth(const Layout& l, const Inputs& in) {
  const Case& c = l.c;
  const int Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = l.group();
  SdpaTruth t;
  for (int64_t r : l.check_rows)
    if (l.valid_row(r)) t.rows.push_back(r);
  const int64_t R = int64_t(t.rows.size());
  t.rh.resize(size_t(R * Hq));
  t.o_exact.assign(size_t(R * Hq * Dv), 0.0);
  t.o_emul.assign(size_t(R * Hq * Dv), 0.f);
  const double scale = l.scale;
  const float scale32 = float(l.scale);

#pragma omp parallel num_threads(detail::reference_threads())
  {
    std::vector<int64_t> key_rows;
    std::vector<double> s, sabs;
    std::vector<float> s32;
    std::vector<double> m_abs(static_cast<size_t>(Dv)), m_sq(static_cast<size_t>(Dv));
    std::vector<float> acc32(static_cast<size_t>(Dv));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < R * Hq; ++i) {
      const int64_t r = t.rows[size_t(i / Hq)];
      const int h = int(i % Hq), kvh = h / G;
      SdpaRowTruth& x = t.rh[size_t(i)];
      double* X = t.o_exact.data() + i * Dv;
      float* E = t.o_emul.data() + i * Dv;
      key_rows.clear();
      for (const auto& kr : detail::row_key_ranges(l, r, Quirks{}))
        for (int64_t k = kr.lo; k < kr.hi; ++k) key_rows.push_back(kr.base + k);
      const int64_t n = int64_t(key_rows.size());
      x.keys = n;
      if (n == 0) {
        x.lse = -std::numeric_limits<double>::infinity();
        continue;  // O = 0 exactly, in both answers
      }
      const float* q = in.q.data() + (r * Hq + h) * D;
      s.resize(size_t(n));
      sabs.resize(size_t(n));
      s32.resize(size_t(n));
      double mx = -INFINITY;
      float mx32 = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const float* k = in.k.data() + (key_rows[size_t(j)] * Hkv + kvh) * D;
        double dot = 0, dabs = 0;
        float dot32 = 0.f;
        for (int d = 0; d < D; ++d) {
          const double p = double(q[d]) * double(k[d]);
          dot += p;
          dabs += std::fabs(p);
          dot32 += q[d] * k[d];
        }
        s[size_t(j)] = scale * dot;
        sabs[size_t(j)] = scale * dabs;
        s32[size_t(j)] = dot32 * scale32;
        mx = std::max(mx, s[size_t(j)]);
        mx32 = std::max(mx32, s32[size_t(j)]);
      }
      double sum = 0;
      float sum32 = 0.f;
      std::fill(m_abs.begin(), m_abs.end(), 0.0);
      std::fill(m_sq.begin(), m_sq.end(), 0.0);
      std::fill(acc32.begin(), acc32.end(), 0.f);
      double score_abs = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double p = std::exp(s[size_t(j)] - mx);
        const float p32 = std::exp(s32[size_t(j)] - mx32);
        sum += p;
        sum32 += p32;
        score_abs += p * sabs[size_t(j)];
        const float pd = round_to(c.dtype, p32);  // P in the dtype, as it enters P.V
        const float* v = in.v.data() + (key_rows[size_t(j)] * Hkv + kvh) * Dv;
        for (int e = 0; e < Dv; ++e) {
          const double pv = p * double(v[e]);
          X[e] += pv;
          m_abs[size_t(e)] += std::fabs(pv);
          m_sq[size_t(e)] += pv * pv;
          acc32[size_t(e)] += pd * v[e];
        }
      }
      x.lse = mx + std::log(sum);
      x.score_abs = score_abs / sum;
      for (int e = 0; e < Dv; ++e) {
        X[e] /= sum;
        E[e] = round_to(c.dtype, acc32[size_t(e)] / sum32);
        x.v_abs = std::max(x.v_abs, m_abs[size_t(e)] / sum);
        x.v_rms = std::max(x.v_rms, std::sqrt(m_sq[size_t(e)]) / sum);
        x.emul_err = std::max(x.emul_err, std::fabs(double(E[e]) - X[e]));
        x.o_max = std::max(x.o_max, std::fabs(X[e]));
      }
    }
  }
  return t;
}

}  // namespace ao
