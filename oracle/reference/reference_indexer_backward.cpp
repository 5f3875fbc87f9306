// The indexer backward's exact reference, its inputs and its gates (indexer_backward.h).
// Pass 1, per valid row (in parallel): the row's slot keys, loss term and logit gradients dz, then
// d_weights and d_index_q of the row. Pass 2, per KV row (in parallel): d_index_k from the slots that
// selected the key, in row order (an index key -> slots built between the passes). Every sum runs in a
// fixed order, so the result is bitwise the same for any thread count.
#include "attn_oracle/reference/indexer_backward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attn_oracle/internal/rng.h"
#include "attn_oracle/reference/emulation.h"
#include "attn_oracle/reference/reference.h"
#include "reference_runtime.h"

namespace ao {

double exact_loss_denominator(const Case& c, const LossCounts& n) {
  switch (c.loss_mean) {
    case LossMean::Rows: return double(std::max<int64_t>(n.buffer_rows, 1));
    case LossMean::Valid: return double(std::max<int64_t>(n.valid_rows, 1));
    case LossMean::Keyed: return double(std::max<int64_t>(n.keyed_rows, 1));
    case LossMean::Sum: return 1.0;
  }
  return 1.0;
}

void IndexerBackwardSeams::slot_keys(const Layout& l, int64_t, const int32_t* topk, int64_t* keys) const {
  for (int e = 0; e < l.c.topk; ++e) keys[e] = topk[e] < 0 ? -1 : topk[e];
}
void IndexerBackwardSeams::target_slots(const Layout&, int64_t, const int32_t*, std::vector<int>& order) const {
  std::iota(order.begin(), order.end(), 0);
}
double IndexerBackwardSeams::logit_grad_scale(const Layout& l) const { return l.scale; }
double IndexerBackwardSeams::loss_denominator(const Layout& l, const LossCounts& n) const {
  return exact_loss_denominator(l.c, n);
}

const IndexerBackwardSeams& exact_indexer_backward_seams() {
  static const IndexerBackwardSeams s;
  return s;
}

namespace {

float to_float(double x) { return float(x); }

// Valid Q rows of the layout's segments, in segment order (the backward covers every one of them: the
// loss and d_index_k sum over all rows, so no row sampling applies).
std::vector<int64_t> valid_q_rows(const Layout& l) {
  std::vector<int64_t> rows;
  for_each_valid_row(l, RowBuffer::Q, [&](int64_t r, int64_t) { rows.push_back(r); });
  return rows;
}

// Hash of two token ids: the key of a generated value that belongs to a (query, key) pair.
inline uint64_t pair_index(int64_t q_tok, int64_t k_tok) {
  return splitmix64(uint64_t(q_tok) * 0x9E3779B97F4A7C15ull) ^ uint64_t(k_tok);
}

// One row's target over its valid slots (keys = the slots' key token ids, -1 for a -1 slot), from the
// seed and the token ids only. Three shapes, one per row by its token: a smooth distribution, a near-one-hot
// one whose other slots hold tiny masses on both sides of e^-100 and exact zeros (the clip at -100
// and the log of 0), and a wide one whose small entries underflow fp32 to 0.
void target_row(uint64_t seed, int64_t q_tok, const std::vector<int64_t>& keys, float* out) {
  const size_t K = keys.size();
  std::vector<double> p(K, 0.0);
  const uint64_t shape = counter_hash(seed, kTensorTarget, uint64_t(q_tok) * 2 + 1) % 3;
  double sum = 0;
  size_t best = K;
  double best_u = -2;
  for (size_t e = 0; e < K; ++e) {
    if (keys[e] < 0) continue;
    const double u = double(uniform_pm1(counter_hash(seed, kTensorTarget, pair_index(q_tok, keys[e]))));
    if (shape == 0) p[e] = std::exp(3 * u);
    else if (shape == 2) p[e] = std::exp(60 * u);
    else {
      // u in [-1, 1): a quarter exact zeros, the rest e^-(85..115) (the clip at -100 in the middle).
      p[e] = u < -0.5 ? 0.0 : std::exp(-100 + 20 * u);
      if (u > best_u) best_u = u, best = e;
    }
    sum += p[e];
  }
  if (shape == 1 && best < K) {  // the near-one-hot slot takes the rest of the mass
    sum -= p[best];
    p[best] = 1.0 - sum;
    sum = 1.0;
  }
  for (size_t e = 0; e < K; ++e) out[e] = keys[e] < 0 ? out[e] : float(sum > 0 ? p[e] / sum : 0.0);
}

// A bound on how far an fp32 sum of the products q_d * k_d (exact in fp32 for inputs in a 16-bit dtype)
// may lie from the exact dot a, in any order (fp32 inputs: each product rounds too): 0 when every partial sum is a multiple of the products'
// lowest bit below 2^24 of it (integer-like inputs: the sum is exact, a kernel's ReLU sees a's sign);
// else lambda * sqrt(D) * u * sum |q_d k_d|.
double dot_error(const float* q, const float* k, int D, double gamma, bool exact_products) {
  double a_abs = 0;
  int lsb = std::numeric_limits<int>::max();
  for (int d = 0; d < D; ++d) {
    const double p = double(q[d]) * double(k[d]);
    if (p == 0) continue;
    a_abs += std::fabs(p);
    int e;
    const double m = std::frexp(std::fabs(p), &e);
    lsb = std::min(lsb, e - 53 + __builtin_ctzll(uint64_t(std::ldexp(m, 53))));
  }
  if (a_abs == 0 || (exact_products && a_abs < std::ldexp(1.0, lsb + 24))) return 0;
  return (gamma + (exact_products ? 0.0 : std::ldexp(1.0, -24))) * a_abs;
}

inline double clip_log(double x, double floor) {
  // NaN stays NaN (a poison read); the floor -inf leaves log 0 = -inf as is.
  return x < floor ? floor : x > 0 ? 0.0 : x;
}

// The part of a row that pass 2 and the gates share: its slots' keys and logit gradients.
struct RowSlots {
  std::vector<int64_t> keys;  // KV buffer row per slot, -1: nothing
  std::vector<double> dz;     // dL/dlogit per slot, times the chain's scale (0 for -1 slots)
  std::vector<double> dz_err, dz_mag;  // gates only: the fp32 error bound and magnitude of dz
};

struct Common {
  int H, D, K;
  double cs;  // the logit gradient's scale
  std::vector<int64_t> rows;
  LossCounts counts;
  double denom, gscale;
};

Common common(const Layout& l, const Inputs& in, const IndexerBackwardSeams& s) {
  Common c;
  c.H = l.c.heads, c.D = l.c.dim, c.K = l.c.topk;
  c.cs = s.logit_grad_scale(l);
  c.rows = valid_q_rows(l);
  c.counts.buffer_rows = l.q_rows;
  c.counts.valid_rows = int64_t(c.rows.size());
  for (int64_t r : c.rows) {
    const int32_t* t = in.topk.data() + size_t(r) * size_t(c.K);
    c.counts.keyed_rows += std::any_of(t, t + c.K, [](int32_t v) { return v >= 0; });
  }
  c.denom = s.loss_denominator(l, c.counts);
  c.gscale = double(in.grad_loss.at(0)) / c.denom;
  return c;
}

// One row's slots, loss term (and with gates, its fp32 error bound and magnitude).
template <bool Gates>
double row_slots(const Layout& l, const Inputs& in, const IndexerBackwardSeams& s, const Common& c, int64_t r,
                 RowSlots& rs, double* loss_err, double* loss_mag) {
  const size_t K = size_t(c.K);
  const int32_t* t = in.topk.data() + size_t(r) * K;
  rs.keys.assign(K, -1);
  s.slot_keys(l, r, t, rs.keys.data());
  for (auto& k : rs.keys)
    if (k >= l.kv_rows) k = -1;
  std::vector<int> order(K);
  std::iota(order.begin(), order.end(), 0);
  if (s.permutes_targets(l)) s.target_slots(l, r, t, order);
  const double floor = s.log_floor(), u = std::ldexp(1.0, -24);
  const float* tg = in.target.data() + size_t(r) * K;
  const float* pr = in.predict.data() + size_t(r) * K;
  std::vector<double> g(K, 0.0), eg(K, 0.0);
  double loss = 0, S = 0, S_abs = 0, eS = 0;
  size_t n = 0;
  for (size_t e = 0; e < K; ++e) {
    if (rs.keys[e] < 0) continue;
    ++n;
    const double lp_raw = std::log(double(pr[e]));
    const double lt = clip_log(std::log(double(tg[size_t(order[e])])), floor), lp = clip_log(lp_raw, floor);
    const double et = std::exp(lt);
    loss += et * (lt - lp);
    g[e] = lp_raw >= floor ? -et : 0.0;
    S += g[e];
    if constexpr (Gates) {
      // fp32 log then exp: exp(lt) off by a relative 2u(|lt| + 3); lt - lp off by u(|lt| + |lp| + 2).
      eg[e] = std::fabs(g[e]) * 2 * u * (std::fabs(lt) + 3);
      S_abs += std::fabs(g[e]);
      eS += eg[e];
      *loss_err += et * (2 * u * (std::fabs(lt) + 3) * std::fabs(lt - lp) + u * (std::fabs(lt) + std::fabs(lp) + 2)) +
                   kUnderflow32 * (std::fabs(lt - lp) + 1);  // exp(lt) below 2^-126: flushed or subnormal
      *loss_mag += std::fabs(et * (lt - lp));
    }
  }
  rs.dz.assign(K, 0.0);
  if constexpr (Gates) {
    eS += kLambda * std::sqrt(double(std::max<size_t>(n, 1))) * u * S_abs;
    rs.dz_err.assign(K, 0.0);
    rs.dz_mag.assign(K, 0.0);
  }
  const double f = c.gscale * c.cs;
  for (size_t e = 0; e < K; ++e) {
    if (rs.keys[e] < 0) continue;
    const double p = double(pr[e]);
    rs.dz[e] = (g[e] - p * S) * f;
    if constexpr (Gates) {
      const double m = std::fabs(g[e]) + std::fabs(p) * S_abs;
      rs.dz_mag[e] = m * std::fabs(f);
      rs.dz_err[e] = (eg[e] + std::fabs(p) * eS + 2 * u * m) * std::fabs(f);
    }
  }
  return loss;
}

// Key -> the (row index, slot) pairs that read it, in row order: CSR over the KV buffer.
struct KeyIndex {
  std::vector<int64_t> start;  // kv_rows + 1
  std::vector<int64_t> slot;   // row index * K + slot
};

KeyIndex key_index(const Layout& l, const std::vector<int64_t>& keys, size_t n_rows, size_t K) {
  KeyIndex x;
  x.start.assign(size_t(l.kv_rows) + 1, 0);
  for (int64_t k : keys)
    if (k >= 0) ++x.start[size_t(k) + 1];
  std::partial_sum(x.start.begin(), x.start.end(), x.start.begin());
  x.slot.resize(size_t(x.start.back()));
  std::vector<int64_t> fill(x.start.begin(), x.start.end() - 1);
  for (size_t i = 0; i < n_rows * K; ++i)
    if (keys[i] >= 0) x.slot[size_t(fill[size_t(keys[i])]++)] = int64_t(i);
  return x;
}

template <bool Gates>
void run(const Layout& l, const Inputs& in, const IndexerBackwardSeams& s, Outputs* out, IndexerBackwardGates* gates) {
  const Common c = common(l, in, s);
  const int H = c.H, D = c.D;
  const size_t K = size_t(c.K), R = c.rows.size();
  const double relu0 = s.relu_grad_at_zero(l), u = std::ldexp(1.0, -24);
  const double dot_gamma = kLambda * std::sqrt(double(D)) * u;
  const bool exact_products = l.c.dtype != DType::F32;  // 8- or 11-bit significands: products exact in fp32
  std::vector<int64_t> keys(R * K, -1);
  std::vector<double> dz(R * K, 0.0), dz_err(Gates ? R * K : 0), dz_mag(Gates ? R * K : 0);
  std::vector<double> row_loss(R, 0.0), row_loss_err(R, 0.0), row_loss_mag(R, 0.0);
  const auto relu_grad = [&](double a) { return a > 0 ? 1.0 : a == 0 ? relu0 : 0.0; };

#pragma omp parallel num_threads(detail::reference_threads())
  {
    RowSlots rs;
    const size_t HD = size_t(H) * size_t(D), Hs = size_t(H);
    std::vector<double> dq(HD), dw(Hs), gq(Gates ? HD : 0), mq(gq.size()), tq(gq.size()), fq(gq.size()),
        gw(Gates ? Hs : 0), mw(gw.size()), fw(gw.size());
#pragma omp for schedule(dynamic, 16)
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = c.rows[i];
      row_loss[i] = row_slots<Gates>(l, in, s, c, r, rs, &row_loss_err[i], &row_loss_mag[i]);
      std::copy(rs.keys.begin(), rs.keys.end(), keys.begin() + long(i * K));
      std::copy(rs.dz.begin(), rs.dz.end(), dz.begin() + long(i * K));
      if constexpr (Gates) {
        std::copy(rs.dz_err.begin(), rs.dz_err.end(), dz_err.begin() + long(i * K));
        std::copy(rs.dz_mag.begin(), rs.dz_mag.end(), dz_mag.begin() + long(i * K));
        std::fill(gq.begin(), gq.end(), 0.0), std::fill(mq.begin(), mq.end(), 0.0), std::fill(tq.begin(), tq.end(), 0.0),
            std::fill(fq.begin(), fq.end(), 0.0);
        std::fill(gw.begin(), gw.end(), 0.0), std::fill(mw.begin(), mw.end(), 0.0), std::fill(fw.begin(), fw.end(), 0.0);
      }
      std::fill(dq.begin(), dq.end(), 0.0), std::fill(dw.begin(), dw.end(), 0.0);
      const float* q = in.q.data() + size_t(r) * size_t(H * D);
      const float* w = in.w.data() + size_t(r) * size_t(H);
      size_t n = 0;
      for (size_t e = 0; e < K; ++e) {
        const int64_t key = rs.keys[e];
        if (key < 0) continue;
        ++n;
        const float* k = in.k.data() + size_t(key) * size_t(D);
        for (int h = 0; h < H; ++h) {
          double a = 0;
          for (int d = 0; d < D; ++d) a += double(q[h * D + d]) * double(k[d]);
          const double rg = relu_grad(a), wh = double(w[h]);
          dw[size_t(h)] += rs.dz[e] * std::max(a, 0.0);
          const double cq = rs.dz[e] * wh * rg;
          if (cq != 0)
            for (int d = 0; d < D; ++d) dq[size_t(h * D + d)] += cq * double(k[d]);
          if constexpr (Gates) {
            const double ea = dot_error(q + h * D, k, D, dot_gamma, exact_products);
            const bool flip = std::fabs(a) <= ea && ea > 0;  // the kernel's ReLU may go either way
            gw[size_t(h)] += rs.dz_err[e] * std::max(a, 0.0) + rs.dz_mag[e] * ea;
            mw[size_t(h)] += rs.dz_mag[e] * (std::max(a, 0.0) + ea);
            fw[size_t(h)] += 1 + std::max(a, 0.0) + ea;
            const double eq = rs.dz_err[e] * std::fabs(wh) * rg + (flip ? rs.dz_mag[e] * std::fabs(wh) : 0.0);
            const double m = rs.dz_mag[e] * std::fabs(wh) * (flip ? 1.0 : rg);
            for (int d = 0; d < D; ++d) {
              const double kd = std::fabs(double(k[d]));
              gq[size_t(h * D + d)] += eq * kd;
              mq[size_t(h * D + d)] += m * kd;
              if (rg != 0 || flip) {
                tq[size_t(h * D + d)] += std::fabs(cq) * kd;
                fq[size_t(h * D + d)] += (1 + std::fabs(wh)) * (1 + kd);
              }
            }
          }
        }
      }
      if (out) {
        float* oq = out->dq.data() + size_t(r) * size_t(H * D);
        float* ow = out->dw.data() + size_t(r) * size_t(H);
        for (size_t x = 0; x < dq.size(); ++x) oq[x] = float(dq[x]);
        for (size_t x = 0; x < dw.size(); ++x) ow[x] = float(dw[x]);
      }
      if constexpr (Gates) {
        const double sq = kLambda * std::sqrt(double(std::max<size_t>(n, 1)) + 2) * u;
        float* oq = gates->dq.data() + size_t(r) * size_t(H * D);
        float* ow = gates->dw.data() + size_t(r) * size_t(H);
        for (size_t x = 0; x < gq.size(); ++x)
          oq[x] = float(kEmulationFactor * (gq[x] + sq * mq[x]) + u * std::fabs(dq[x]));
        if (!gates->dq_ds_abs.empty())  // 16-bit cases only
          std::transform(tq.begin(), tq.end(), gates->dq_ds_abs.begin() + long(size_t(r) * HD), to_float);
        std::transform(fq.begin(), fq.end(), gates->dq_ds_floor.begin() + long(size_t(r) * HD), to_float);
        std::transform(fw.begin(), fw.end(), gates->dw_floor.begin() + long(size_t(r) * Hs), to_float);
        for (size_t x = 0; x < gw.size(); ++x)
          ow[x] = float(kEmulationFactor * (gw[x] + sq * mw[x]) + u * std::fabs(dw[x]));
      }
    }
  }

  double loss = 0, loss_err = 0, loss_mag = 0;
  for (size_t i = 0; i < R; ++i) loss += row_loss[i], loss_err += row_loss_err[i], loss_mag += row_loss_mag[i];
  loss /= c.denom;
  if (out) out->loss.assign(1, float(loss));
  if constexpr (Gates) {
    const double N = double(std::max<size_t>(R * K, 1));
    gates->loss = kEmulationFactor * (loss_err + kLambda * std::sqrt(N) * u * loss_mag) / c.denom + u * std::fabs(loss);
  }

  // Pass 2: d_index_k per KV row, from the slots that read it, in row order.
  const KeyIndex idx = key_index(l, keys, R, K);
  if constexpr (Gates) {
    gates->dk_selected.assign(size_t(l.kv_rows), 0);
    for (int64_t j = 0; j < l.kv_rows; ++j) gates->dk_selected[size_t(j)] = idx.start[size_t(j) + 1] > idx.start[size_t(j)];
  }
  std::vector<char> kv_valid = valid_rows(l, RowBuffer::KV);
  const bool overwrite = s.dk_overwrites(l);
#pragma omp parallel num_threads(detail::reference_threads())
  {
    const size_t Ds = size_t(D);
    std::vector<double> dk(Ds), gk(Gates ? Ds : 0), mk(gk.size()), tk(gk.size()), fk(gk.size()), part(Ds);
#pragma omp for schedule(dynamic, 64)
    for (int64_t j = 0; j < l.kv_rows; ++j) {
      const int64_t b = idx.start[size_t(j)], en = idx.start[size_t(j) + 1];
      if (en == b && !kv_valid[size_t(j)]) continue;  // a pad KV row no slot read: untouched
      std::fill(dk.begin(), dk.end(), 0.0);
      if constexpr (Gates)
        std::fill(gk.begin(), gk.end(), 0.0), std::fill(mk.begin(), mk.end(), 0.0), std::fill(tk.begin(), tk.end(), 0.0),
            std::fill(fk.begin(), fk.end(), 0.0);
      const float* k = in.k.data() + size_t(j) * size_t(D);
      for (int64_t x = b; x < en; ++x) {
        const size_t i = size_t(idx.slot[size_t(x)]) / K;
        const double dzv = dz[size_t(idx.slot[size_t(x)])];
        const int64_t r = c.rows[i];
        const float* q = in.q.data() + size_t(r) * size_t(H * D);
        const float* w = in.w.data() + size_t(r) * size_t(H);
        std::fill(part.begin(), part.end(), 0.0);
        for (int h = 0; h < H; ++h) {
          double a = 0;
          for (int d = 0; d < D; ++d) a += double(q[h * D + d]) * double(k[d]);
          const double rg = relu_grad(a), wh = double(w[h]);
          const double ck = dzv * wh * rg;
          if (ck != 0)
            for (int d = 0; d < D; ++d) part[size_t(d)] += ck * double(q[h * D + d]);
          if constexpr (Gates) {
            const size_t si = size_t(idx.slot[size_t(x)]);
            const double ea = dot_error(q + h * D, k, D, dot_gamma, exact_products);
            const bool flip = std::fabs(a) <= ea && ea > 0;
            const double ek = dz_err[si] * std::fabs(wh) * rg + (flip ? dz_mag[si] * std::fabs(wh) : 0.0);
            const double m = dz_mag[si] * std::fabs(wh) * (flip ? 1.0 : rg);
            for (int d = 0; d < D; ++d) {
              const double qd = std::fabs(double(q[h * D + d]));
              gk[size_t(d)] += ek * qd;
              mk[size_t(d)] += m * qd;
              if (rg != 0 || flip) {
                tk[size_t(d)] += std::fabs(ck) * qd;
                fk[size_t(d)] += (1 + std::fabs(wh)) * (1 + qd);
              }
            }
          }
        }
        if (overwrite)
          dk = part;
        else
          for (int d = 0; d < D; ++d) dk[size_t(d)] += part[size_t(d)];
      }
      if (out) {
        float* ok = out->dk.data() + size_t(j) * size_t(D);
        for (int d = 0; d < D; ++d) ok[d] = float(dk[size_t(d)]);
      }
      if constexpr (Gates) {
        const double sq = kLambda * std::sqrt(double(std::max<int64_t>((en - b) * H, 1)) + 2) * u;
        float* ok = gates->dk.data() + size_t(j) * size_t(D);
        for (int d = 0; d < D; ++d)
          ok[d] = float(kEmulationFactor * (gk[size_t(d)] + sq * mk[size_t(d)]) + u * std::fabs(dk[size_t(d)]));
        if (!gates->dk_ds_abs.empty())  // 16-bit cases only
          std::transform(tk.begin(), tk.end(), gates->dk_ds_abs.begin() + long(size_t(j) * Ds), to_float);
        std::transform(fk.begin(), fk.end(), gates->dk_ds_floor.begin() + long(size_t(j) * Ds), to_float);
      }
    }
  }
}

}  // namespace

void make_indexer_backward_inputs(const Layout& l, Inputs& in) {
  const Case& c = l.c;
  const size_t K = size_t(c.topk);
  // The exact forward on every segment row (the backward's slots are the reference's selection).
  // (The layout refuses row sampling for pass=bwd, so its check rows are every segment row.)
  Outputs f;
  f.topk.assign(size_t(l.q_rows) * K, -1);
  f.scores.assign(size_t(l.q_rows) * K, 0.f);
  reference_indexer(l, in, f);
  in.topk.assign(size_t(l.q_rows) * K, -1);
  // poison=none: a finite stand-in, as the inputs' pad slots get finite data.
  const float poison = c.poison == Poison::None ? 0.25f : poison_value(c.poison, c.dtype);
  in.target.assign(size_t(l.q_rows) * K, poison);
  in.predict.assign(size_t(l.q_rows) * K, poison);
  std::vector<int64_t> kv_token(size_t(l.kv_rows), -1);
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) kv_token[size_t(d.kv_off + s)] = d.packed_kv_off + s;
  const std::vector<int64_t> rows = valid_q_rows(l);
#pragma omp parallel for schedule(dynamic, 16) num_threads(detail::reference_threads())
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    int32_t* t = in.topk.data() + size_t(r) * K;
    std::copy_n(f.topk.data() + size_t(r) * K, K, t);
    std::vector<int64_t> keys(K, -1);
    std::vector<double> logit(K, -INFINITY);
    double mx = -INFINITY;
    for (size_t e = 0; e < K; ++e) {
      if (t[e] < 0) continue;
      keys[e] = kv_token[size_t(t[e])];
      logit[e] = exact_indexer_score(l, in, r, t[e]);
      mx = std::max(mx, logit[e]);
    }
    target_row(c.seed, q_token_id(l, r), keys, in.target.data() + size_t(r) * K);
    double sum = 0;
    for (size_t e = 0; e < K; ++e)
      if (t[e] >= 0) sum += std::exp(logit[e] - mx);
    float* p = in.predict.data() + size_t(r) * K;
    for (size_t e = 0; e < K; ++e)
      if (t[e] >= 0) p[e] = float(std::exp(logit[e] - mx) / sum);
  }
  // grad_loss in [0.5, 1.5): a factor every gradient carries.
  in.grad_loss.assign(1, 1.0f + 0.5f * uniform_pm1(counter_hash(c.seed, kTensorGradLoss, 0)));
}

void reference_indexer_backward(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& s) {
  const auto* bs = dynamic_cast<const IndexerBackwardSeams*>(&s);
  run<false>(l, in, bs ? *bs : exact_indexer_backward_seams(), &out, nullptr);
}

IndexerBackwardGates indexer_backward_gates(const Layout& l, const Inputs& in) {
  IndexerBackwardGates g;
  const Case& c = l.c;
  g.dq.assign(size_t(l.q_rows) * size_t(c.heads) * size_t(c.dim), 0.f);
  g.dw.assign(size_t(l.q_rows) * size_t(c.heads), 0.f);
  g.dk.assign(size_t(l.kv_rows) * size_t(c.dim), 0.f);
  g.dq_ds_floor.assign(g.dq.size(), 0.f);
  g.dk_ds_floor.assign(g.dk.size(), 0.f);
  g.dw_floor.assign(g.dw.size(), 0.f);
  if (c.dtype != DType::F32) {  // the dS rounding terms only a 16-bit kernel's gate adds (compare_indexer_bwd.cpp)
    g.dq_ds_abs.assign(g.dq.size(), 0.f);
    g.dk_ds_abs.assign(g.dk.size(), 0.f);
  }
  g.exact = make_sentinel_outputs(l);
  run<true>(l, in, exact_indexer_backward_seams(), &g.exact, &g);
  return g;
}

}  // namespace ao
