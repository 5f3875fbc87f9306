// probe=edges. Scheme (docs/tolerances.md, "Mask-probe inputs"):
//  * Key s of a document gets a position code in the first 2F dims: for frequency j < F the pair
//    (cos, sin)(2*pi*s / 2^(j+1)), times sqrt(amp_j / scale) with amp_j = 0.3 * 1.5^j.
//  * A query row whose allowed keys are [lo, hi) gets the same code of its newest allowed key hi-1
//    (plus, under a sliding window, of its oldest one lo), times sqrt(amp_j / scale). Its score against
//    key s is then sum_j amp_j cos(2*pi*(t-s)/2^(j+1)): maximal at s = t, one key away ~1.4 lower, and
//    growing like |t-s|^0.58 beyond. Measured (bf16): the newest key takes ~2/3 of the weight, its
//    neighbour ~1/6, keys 9+ away < 1%, on rows of 300 and 4096 keys alike.
//  * V[s] = (-1)^s * (1 + u/2), u the generator's value in [-1, 1): neighbours have opposite signs.
//    So key hi (off by one) enters with about the weight of key hi-2 and flips part of O (~40% of |O|);
//    a missing key hi-1 changes O by more than |O|.
//  * The remaining dims of Q and K keep the generator's values (the seed's noise: scores +- ~0.3).
// F = min(dim/2, ceil(log2(longest kv_len))): periodic codes alias only when dim is too small for the
// documents. The largest score is sum_j amp_j < 0.6 * 1.5^F (~600 at 65536 keys), finite in fp32; the
// factors sqrt(amp_j / scale) are capped at a quarter of the dtype's largest value.
#include "attn_oracle/inputs/probe_inputs.h"

#include <algorithm>
#include <cmath>

#include "attn_oracle/internal/rng.h"

namespace ao {

namespace {

// (cos, sin) of 2*pi*s / 2^(j+1), reduced exactly modulo the period first.
void code(int64_t s, int j, double& cs, double& sn) {
  const int64_t period = int64_t(1) << (j + 1);
  const double a = 2.0 * M_PI * double(((s % period) + period) % period) / double(period);
  cs = std::cos(a);
  sn = std::sin(a);
}

}  // namespace

void apply_edge_probe(const Layout& l, Inputs& in) {
  const Case& c = l.c;
  if (c.op != Op::Sdpa) return;
  int64_t longest = 1;
  for (const auto& d : l.docs) longest = std::max(longest, d.kv_len);
  int F = 0;
  while (F < c.dim / 2 && (int64_t(1) << F) < longest) ++F;
  const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.dim));
  const double cap = 0.25 * double(poison_value(Poison::Large, c.dtype));
  std::vector<double> f(static_cast<size_t>(F));
  for (int j = 0; j < F; ++j) f[size_t(j)] = std::min(cap, std::sqrt(0.3 * std::pow(1.5, j) / scale));

  const int64_t kw = int64_t(c.hkv) * c.dim, vw = int64_t(c.hkv) * c.dim_v, qw = int64_t(c.hq) * c.dim;
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) {
      const int64_t row = d.kv_off + s, tok = d.packed_kv_off + s;
      for (int h = 0; h < c.hkv; ++h) {
        float* k = in.k.data() + row * kw + h * c.dim;
        for (int j = 0; j < F; ++j) {
          double cs, sn;
          code(s, j, cs, sn);
          k[j] = round_to(c.dtype, float(f[size_t(j)] * cs));
          k[F + j] = round_to(c.dtype, float(f[size_t(j)] * sn));
        }
        float* v = in.v.data() + row * vw + h * c.dim_v;
        for (int e = 0; e < c.dim_v; ++e) {
          const float u = generated_value(c.seed, kTensorV, uint64_t(tok * vw + h * c.dim_v + e), 0);
          v[e] = round_to(c.dtype, (s % 2 == 0 ? 1.f : -1.f) * (1.f + 0.5f * u));
        }
      }
    }
  for (int64_t r = 0; r < l.q_rows; ++r) {
    if (!l.valid_row(r)) continue;
    int64_t lo, hi;
    l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
    std::vector<float> probe(size_t(2 * F), 0.f);
    for (int j = 0; j < F && hi > lo; ++j) {
      double cs, sn, c0 = 0, s0 = 0;
      code(hi - 1, j, cs, sn);
      if (c.window > 0 && lo < hi - 1) code(lo, j, c0, s0);
      probe[size_t(j)] = round_to(c.dtype, float(f[size_t(j)] * (cs + c0)));
      probe[size_t(F + j)] = round_to(c.dtype, float(f[size_t(j)] * (sn + s0)));
    }
    for (int h = 0; h < c.hq; ++h) std::copy(probe.begin(), probe.end(), in.q.data() + r * qw + h * c.dim);
  }
}

}  // namespace ao
