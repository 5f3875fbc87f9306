// Naive fp64 reference: see naive_reference.h. Everything is re-derived from the Case fields with
// plain loops; nothing here calls into layout.cpp / reference_*.cpp.
#include "naive_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace naive {

using ao::Case;

namespace {

// Offsets of one tensor: explicit (B entries, or B+1 with the capacity last), or prefix sums of
// length + gap (one gap for all documents, or one per document); the capacity is the explicit
// capacity key, else the last offset entry / the end of the last gap, plus `tail`.
void resolve(const Case& c, const std::vector<int64_t>& offsets, const std::vector<int64_t>& gaps,
             const std::vector<int64_t>& lens, int64_t capacity, std::vector<int64_t>& off, int64_t& cap) {
  const size_t B = lens.size();
  off.clear();
  if (!offsets.empty()) {
    for (size_t b = 0; b < B; ++b) off.push_back(offsets[b]);
    if (capacity >= 0)
      cap = capacity;
    else if (offsets.size() == B + 1)
      cap = offsets[B] + c.tail;
    else
      cap = off[B - 1] + lens[B - 1] + c.tail;
    return;
  }
  int64_t at = 0;
  for (size_t b = 0; b < B; ++b) {
    off.push_back(at);
    const int64_t gap = gaps.empty() ? 0 : gaps.size() == 1 ? gaps[0] : gaps[b];
    at += lens[b] + gap;
  }
  cap = capacity >= 0 ? capacity : at + c.tail;
}

// Per-key mask predicate (document coordinates), written independently of the [lo, hi) form.
bool key_allowed(const Case& c, int64_t kv_len, int64_t p, int64_t s) {
  if (s < 0 || s >= kv_len) return false;
  if (c.mask == ao::MaskKind::None) return true;
  if (c.op == ao::Op::Indexer) return (s + 1) * int64_t(c.ratio) <= p + 1;  // s < floor((p+1)/ratio)
  if (c.window_right >= 0 && s > p + c.window_right) return false;  // right bound (0 = causal)
  if (c.window == -1) return true;                                     // left bound: unbounded
  if (c.window_convention == ao::WindowConvention::Fa) return s >= p - c.window;
  return c.window == 0 || s > p - c.window;
}

}  // namespace

double scale_of(const Case& c) {
  if (c.scale > 0) return c.scale;
  return c.op == ao::Op::Indexer ? 1.0 : 1.0 / std::sqrt(double(c.dim));
}

NaiveLayout derive(const Case& c) {
  NaiveLayout nl;
  const size_t B = c.q_lens.size();
  nl.q_len = c.q_lens;
  nl.kv_len = c.kv_lens;
  resolve(c, c.q_offsets, c.q_pad, c.q_lens, c.q_capacity, nl.q_off, nl.q_cap);
  resolve(c, c.kv_offsets, c.kv_pad, c.kv_lens, c.kv_capacity, nl.kv_off, nl.kv_cap);
  nl.o_off = nl.q_off;
  nl.stats_off = nl.q_off;
  if (!c.o_offsets.empty()) nl.o_off.assign(c.o_offsets.begin(), c.o_offsets.begin() + long(B));
  if (!c.stats_offsets.empty()) nl.stats_off.assign(c.stats_offsets.begin(), c.stats_offsets.begin() + long(B));

  nl.kv_owner.assign(size_t(nl.kv_cap), -1);
  for (size_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < nl.kv_len[b]; ++s) nl.kv_owner[size_t(nl.kv_off[b] + s)] = int(b);

  const int cp = c.cp;
  nl.q_rows = cp > 1 ? nl.q_cap / cp : nl.q_cap;
  for (size_t b = 0; b < B; ++b) {
    // Bottom-right: the q_len queries are the last positions of the document's kv_len * ratio tokens.
    int64_t shift = c.mask == ao::MaskKind::BottomRight ? nl.kv_len[b] * c.ratio - nl.q_len[b] : 0;
    if (c.start_pos >= 0) shift = c.start_pos;  // chunked prefill: the first query's position
    if (cp == 1) {
      Segment s;
      s.doc = int(b);
      s.row0 = nl.q_off[b];
      s.rows = s.valid = nl.q_len[b];
      s.pos0 = shift;
      nl.segs.push_back(s);
      continue;
    }
    // Padded length of the document in the global Q buffer: up to the next offset / the capacity.
    const int64_t padded = (b + 1 < B ? nl.q_off[b + 1] : nl.q_cap) - nl.q_off[b];
    const int64_t local0 = nl.q_off[b] / cp;
    std::vector<int> chunks;
    int64_t chunk_len;
    if (c.cp_scheme == ao::CpScheme::Zigzag) {
      chunk_len = padded / (2 * cp);
      chunks = {c.rank, 2 * cp - 1 - c.rank};
    } else {
      chunk_len = padded / cp;
      chunks = {c.rank};
    }
    for (size_t j = 0; j < chunks.size(); ++j) {
      Segment s;
      s.doc = int(b);
      s.chunk = chunks[j];
      s.row0 = local0 + int64_t(j) * chunk_len;
      s.rows = chunk_len;
      s.tok0 = int64_t(chunks[j]) * chunk_len;
      s.pos0 = shift + s.tok0;
      s.valid = 0;
      for (int64_t i = 0; i < chunk_len; ++i) s.valid += s.tok0 + i < nl.q_len[b];
      nl.segs.push_back(s);
    }
  }
  nl.row_owner.assign(size_t(nl.q_rows), -1);
  for (size_t si = 0; si < nl.segs.size(); ++si) {
    const Segment& s = nl.segs[si];
    for (int64_t i = 0; i < s.rows; ++i) {
      QRow r;
      r.row = s.row0 + i;
      r.doc = s.doc;
      r.seg = int(si);
      r.tok = s.tok0 + i;
      r.pos = s.pos0 + i;
      r.valid = i < s.valid;  // not pos < q_len: bottom-right rows sit at positions >= q_len
      // Outputs follow the bound O/stats offsets without CP, the local Q row under CP.
      r.o_row = cp > 1 ? r.row : nl.o_off[size_t(s.doc)] + i;
      r.stats_row = cp > 1 ? r.row : nl.stats_off[size_t(s.doc)] + i;
      nl.row_owner[size_t(r.row)] = int(nl.rows.size());
      nl.rows.push_back(r);
    }
  }
  return nl;
}

void allowed(const Case& c, const NaiveLayout& nl, int doc, int64_t p, int64_t& lo, int64_t& hi) {
  const int64_t kv = nl.kv_len[size_t(doc)];
  lo = -1;
  hi = -1;
  for (int64_t s = 0; s < kv; ++s)
    if (key_allowed(c, kv, p, s)) {
      if (lo < 0) lo = s;
      hi = s + 1;
    }
  if (lo < 0) lo = hi = 0;
}

double indexer_score(const Case& c, const ao::Inputs& in, int64_t q_row, int64_t kv_row) {
  const int64_t H = c.heads, D = c.dim;
  double acc = 0;
  for (int64_t h = 0; h < H; ++h) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d)
      dot += double(in.q[size_t((q_row * H + h) * D + d)]) * double(in.k[size_t(kv_row * D + d)]);
    if (dot > 0) acc += double(in.w[size_t(q_row * H + h)]) * dot;
  }
  return scale_of(c) * acc;
}

double indexer_magnitude(const Case& c, const ao::Inputs& in, int64_t q_row, int64_t kv_row) {
  const int64_t H = c.heads, D = c.dim;
  double acc = 0;
  for (int64_t h = 0; h < H; ++h) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d)
      dot += std::fabs(double(in.q[size_t((q_row * H + h) * D + d)]) * double(in.k[size_t(kv_row * D + d)]));
    acc += std::fabs(double(in.w[size_t(q_row * H + h)])) * dot;
  }
  return scale_of(c) * acc;
}

TopK indexer_row(const Case& c, const NaiveLayout& nl, const ao::Inputs& in, const QRow& r) {
  TopK t;
  const size_t K = size_t(c.topk);
  std::vector<std::pair<double, int32_t>> all;  // (score, KV buffer row)
  if (r.valid) {
    const int64_t kv = nl.kv_len[size_t(r.doc)];
    for (int64_t s = 0; s < kv; ++s)
      if (key_allowed(c, kv, r.pos, s)) {
        const int64_t kr = nl.kv_off[size_t(r.doc)] + s;
        all.push_back({indexer_score(c, in, r.row, kr), int32_t(kr)});
      }
  }
  t.allowed = int64_t(all.size());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  for (size_t e = 0; e < K; ++e) {
    if (e < all.size()) {
      t.idx.push_back(all[e].second);
      t.score.push_back(all[e].first);
    } else {
      t.idx.push_back(-1);
      t.score.push_back(-std::numeric_limits<double>::infinity());
    }
  }
  if (!all.empty()) t.kth = all[std::min(K, all.size()) - 1].first;
  return t;
}

SdpaRow sdpa_row(const Case& c, const NaiveLayout& nl, const ao::Inputs& in, const QRow& r) {
  const int64_t Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = Hq / Hkv;
  const double scale = scale_of(c);
  const int64_t kv = nl.kv_len[size_t(r.doc)], base = nl.kv_off[size_t(r.doc)];
  SdpaRow out;
  out.o.assign(size_t(Hq * Dv), 0.0);
  out.lse.assign(size_t(Hq), (c.empty_rows == ao::EmptyRows::PosInf ? 1 : -1) * std::numeric_limits<double>::infinity());
  out.score_abs.assign(size_t(Hq), 0.0);
  out.v_abs.assign(size_t(Hq), 0.0);
  out.v_rms.assign(size_t(Hq), 0.0);
  std::vector<int64_t> keys;
  for (int64_t s = 0; s < kv; ++s)
    if (key_allowed(c, kv, r.pos, s)) keys.push_back(base + s);
  out.allowed = int64_t(keys.size());
  if (keys.empty()) return out;
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t g = h / G;
    std::vector<double> logit;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t kr : keys) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += double(in.q[size_t((r.row * Hq + h) * D + d)]) * double(in.k[size_t((kr * Hkv + g) * D + d)]);
      logit.push_back(scale * dot);
      mx = std::max(mx, scale * dot);
    }
    double sum = 0;
    for (double& x : logit) {
      x = std::exp(x - mx);
      sum += x;
    }
    for (size_t j = 0; j < keys.size(); ++j)
      for (int64_t e = 0; e < Dv; ++e)
        out.o[size_t(h * Dv + e)] += logit[j] / sum * double(in.v[size_t((keys[j] * Hkv + g) * Dv + e)]);
    out.lse[size_t(h)] = mx + std::log(sum);
    for (size_t j = 0; j < keys.size(); ++j) {
      double qk = 0;
      for (int64_t d = 0; d < D; ++d)
        qk += std::fabs(double(in.q[size_t((r.row * Hq + h) * D + d)]) * double(in.k[size_t((keys[j] * Hkv + g) * D + d)]));
      out.score_abs[size_t(h)] += logit[j] / sum * scale * qk;
    }
    for (int64_t e = 0; e < Dv; ++e) {
      double va = 0, v2 = 0;
      for (size_t j = 0; j < keys.size(); ++j) {
        const double p = logit[j] / sum, v = in.v[size_t((keys[j] * Hkv + g) * Dv + e)];
        va += p * std::fabs(v);
        v2 += p * p * v * v;
      }
      out.v_abs[size_t(h)] = std::max(out.v_abs[size_t(h)], va);
      out.v_rms[size_t(h)] = std::max(out.v_rms[size_t(h)], std::sqrt(v2));
    }
  }
  return out;
}

SdpaGrads sdpa_bwd(const Case& c, const NaiveLayout& nl, const ao::Inputs& in) {
  const int64_t Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = Hq / Hkv;
  const double scale = scale_of(c);
  const int64_t kv_rows = nl.kv_cap;  // the all-gathered K/V buffer
  SdpaGrads g;
  g.dq.assign(size_t(nl.q_rows * Hq * D), 0), g.dq_mag = g.dq;
  g.dk.assign(size_t(kv_rows * Hkv * D), 0), g.dk_mag = g.dk;
  g.dv.assign(size_t(kv_rows * Hkv * Dv), 0), g.dv_mag = g.dv;
  for (const QRow& r : nl.rows) {
    if (!r.valid) continue;
    const int64_t kv = nl.kv_len[size_t(r.doc)], base = nl.kv_off[size_t(r.doc)];
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / G;
      const double lse = in.lse[size_t(r.stats_row * Hq + h)];
      const float* dout = in.dout.data() + size_t((r.row * Hq + h) * Dv);
      const float* q = in.q.data() + size_t((r.row * Hq + h) * D);
      double dsum = 0;
      for (int64_t e = 0; e < Dv; ++e) dsum += double(dout[e]) * double(in.o[size_t((r.o_row * Hq + h) * Dv + e)]);
      for (int64_t s = 0; s < kv; ++s) {
        if (!key_allowed(c, kv, r.pos, s)) continue;
        const int64_t kr = base + s;
        const float* k = in.k.data() + size_t((kr * Hkv + kh) * D);
        const float* v = in.v.data() + size_t((kr * Hkv + kh) * Dv);
        double dot = 0, dp = 0;
        for (int64_t e = 0; e < D; ++e) dot += double(q[e]) * double(k[e]);
        for (int64_t e = 0; e < Dv; ++e) dp += double(dout[e]) * double(v[e]);
        const double p = std::exp(scale * dot - lse), ds = p * (dp - dsum);
        for (int64_t e = 0; e < Dv; ++e) {
          const double t = p * double(dout[e]);
          g.dv[size_t((kr * Hkv + kh) * Dv + e)] += t;
          g.dv_mag[size_t((kr * Hkv + kh) * Dv + e)] += std::fabs(t);
        }
        // dS's own magnitude: p (|dP| + |D|), the terms its rounding is relative to.
        const double ds_mag = p * (std::fabs(dp) + std::fabs(dsum));
        for (int64_t e = 0; e < D; ++e) {
          g.dq[size_t((r.row * Hq + h) * D + e)] += scale * ds * double(k[e]);
          g.dq_mag[size_t((r.row * Hq + h) * D + e)] += std::fabs(scale * ds_mag * double(k[e]));
          g.dk[size_t((kr * Hkv + kh) * D + e)] += scale * ds * double(q[e]);
          g.dk_mag[size_t((kr * Hkv + kh) * D + e)] += std::fabs(scale * ds_mag * double(q[e]));
        }
      }
    }
  }
  return g;
}

IndexerGrads indexer_bwd(const Case& c, const NaiveLayout& nl, const ao::Inputs& in) {
  const int64_t H = c.heads, D = c.dim, K = c.topk;
  const double scale = scale_of(c);
  IndexerGrads n;
  n.dq.assign(size_t(nl.q_rows * H * D), 0), n.dq_mag = n.dq;
  n.dw.assign(size_t(nl.q_rows * H), 0), n.dw_mag = n.dw;
  n.dk.assign(size_t(nl.kv_cap * D), 0), n.dk_mag = n.dk;
  int64_t valid = 0, keyed = 0;
  for (const QRow& r : nl.rows) valid += r.valid;
  for (int64_t r = 0; r < nl.q_rows; ++r)
    for (int64_t e = 0; e < K; ++e)
      if (in.topk[size_t(r * K + e)] >= 0) {
        ++keyed;
        break;
      }
  double denom = 1;
  switch (c.loss_mean) {
    // A count of 0 (a CP rank without a valid row) counts as 1: the rank's loss is 0, not NaN.
    case ao::LossMean::Rows: denom = double(std::max<int64_t>(nl.q_rows, 1)); break;
    case ao::LossMean::Valid: denom = double(std::max<int64_t>(valid, 1)); break;
    case ao::LossMean::Keyed: denom = double(std::max<int64_t>(keyed, 1)); break;
    case ao::LossMean::Sum: denom = 1; break;
  }
  const double gs = double(in.grad_loss[0]) / denom * scale;
  for (const QRow& qr : nl.rows) {
    if (!qr.valid) continue;
    const int64_t r = qr.row;
    std::vector<double> g(size_t(K), 0);
    double sg = 0;
    for (int64_t e = 0; e < K; ++e) {
      if (in.topk[size_t(r * K + e)] < 0) continue;
      const double t = std::log(double(in.target[size_t(r * K + e)])),
                   p = std::log(double(in.predict[size_t(r * K + e)]));
      const double tc = std::min(0.0, std::max(-100.0, t)), pc = std::min(0.0, std::max(-100.0, p));
      n.loss += std::exp(tc) * (tc - pc);
      n.loss_mag += std::exp(tc) * (std::fabs(tc) + std::fabs(pc));
      g[size_t(e)] = p >= -100 ? -std::exp(tc) : 0;
      sg += g[size_t(e)];
    }
    for (int64_t e = 0; e < K; ++e) {
      const int32_t v = in.topk[size_t(r * K + e)];
      if (v < 0) continue;
      const double dz = (g[size_t(e)] - double(in.predict[size_t(r * K + e)]) * sg) * gs;
      for (int64_t h = 0; h < H; ++h) {
        double a = 0;
        for (int64_t d = 0; d < D; ++d) a += double(in.q[size_t((r * H + h) * D + d)]) * double(in.k[size_t(v * D + d)]);
        const double w = in.w[size_t(r * H + h)];
        n.dw[size_t(r * H + h)] += dz * std::max(a, 0.0);
        n.dw_mag[size_t(r * H + h)] += std::fabs(dz * a);
        for (int64_t d = 0; d < D; ++d) {
          const double tq = a > 0 ? dz * w * double(in.k[size_t(v * D + d)]) : 0.0;
          const double tk = a > 0 ? dz * w * double(in.q[size_t((r * H + h) * D + d)]) : 0.0;
          n.dq[size_t((r * H + h) * D + d)] += tq;
          n.dq_mag[size_t((r * H + h) * D + d)] += std::fabs(tq);
          n.dk[size_t(v * D + d)] += tk;
          n.dk_mag[size_t(v * D + d)] += std::fabs(tk);
        }
      }
    }
  }
  n.loss /= denom;
  n.loss_mag /= denom;
  return n;
}

}  // namespace naive
