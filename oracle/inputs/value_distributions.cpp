#include "attn_oracle/inputs/value_distributions.h"

#include <cmath>

#include "attn_oracle/internal/rng.h"

namespace ao {

namespace {

// Calls f(buffer_row, token_id) for every valid K/V row.
template <class F>
void for_each_key(const Layout& l, F&& f) {
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) f(d.kv_off + s, d.packed_kv_off + s);
}
template <class F>
void for_each_query(const Layout& l, F&& f) {
  for (int64_t r = 0; r < l.q_rows; ++r)
    if (l.valid_row(r)) f(r, q_token_id(l, r));
}

// Smallest power of two C with C^2 > dim - 1 (exact in every dtype).
float plateau_level(int dim) {
  float c = 1;
  while (double(c) * c <= double(dim - 1)) c *= 2;
  return c;
}

}  // namespace

void apply_value_distribution(const Layout& l, Inputs& in) {
  const Case& c = l.c;
  if (c.values == Values::Normal) return;
  const int64_t D = c.dim;
  if (c.op == Op::Sdpa) {  // extreme (plateau / clustered are refused for sdpa by make_layout)
    const float A = 2048;
    const int64_t kw = int64_t(c.hkv) * D, qw = int64_t(c.hq) * D;
    for_each_key(l, [&](int64_t r, int64_t) {
      for (int h = 0; h < c.hkv; ++h) in.k[size_t(r * kw + h * D)] = A;
    });
    for_each_query(l, [&](int64_t r, int64_t t) {
      if (t % 2) return;
      for (int h = 0; h < c.hq; ++h) {
        float* q = in.q.data() + r * qw + h * D;
        q[0] = -A;
        for (int64_t e = 1; e < D; ++e) q[e] = 0.f;
      }
    });
    return;
  }
  const int H = c.heads;
  const int64_t qw = int64_t(H) * D;
  if (c.values == Values::Extreme) {
    for_each_key(l, [&](int64_t r, int64_t t) { in.k[size_t(r * D)] = t % 32 == 0 ? -64.f : 64.f; });
    for_each_query(l, [&](int64_t r, int64_t t) {
      if (t % 2) return;
      for (int h = 0; h < H; ++h) {
        in.w[size_t(r * H + h)] = -64.f;
        in.q[size_t(r * qw + h * D)] = 64.f;
      }
    });
  } else if (c.values == Values::Plateau) {
    const float C = plateau_level(c.dim);
    for_each_key(l, [&](int64_t r, int64_t t) { in.k[size_t(r * D)] = t % 32 == 0 ? C : -C; });
    for_each_query(l, [&](int64_t r, int64_t) {
      for (int h = 0; h < H; ++h) {
        in.w[size_t(r * H + h)] = std::fabs(in.w[size_t(r * H + h)]);
        in.q[size_t(r * qw + h * D)] = C;
      }
    });
  } else {  // clustered
    for_each_key(l, [&](int64_t r, int64_t t) {
      for (int64_t e = 0; e < D; ++e) {
        const float base = generated_value(c.seed, kTensorK | 0x20u, uint64_t(e), 0);
        const float spread = generated_value(c.seed, kTensorK, uint64_t(t * D + e), 0) / 256.f;
        in.k[size_t(r * D + e)] = round_to(c.dtype, base + spread);
      }
    });
    for_each_query(l, [&](int64_t r, int64_t) {
      for (int h = 0; h < H; ++h) in.w[size_t(r * H + h)] = std::fabs(in.w[size_t(r * H + h)]);
    });
  }
}

}  // namespace ao
