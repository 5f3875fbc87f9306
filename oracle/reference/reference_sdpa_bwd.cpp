// Reference SDPA backward over padded THD (pass=bwd). Given the forward's saved LSE and O (inputs, as
// a kernel's forward hands them over) and dO, for every valid row r of every segment and query head h:
//   P = exp(scale * q k^T - lse) over the row's allowed keys (0 elsewhere), D = rowsum(dO o O),
//   dP = dO V^T, dS = P o (dP - D), dQ = scale * dS K, dK = scale * dS^T Q, dV = P^T dO,
// dK/dV summed over a GQA group's query heads. A row whose LSE is infinite has no allowed key: it
// contributes nothing and its dQ is 0. The key ranges are the forward seams' (key_ranges, kv_head,
// q_read_row), so a mask or offset defect is one seam for both passes; the backward's own seams say
// which saved rows are read and where the gradients land.
//
// Memory stays linear (no S x S): two passes over tiles that recompute P from the saved LSE, as flash
// backward kernels do. Pass A, over row blocks: dQ of each block's rows, its keys in chunks (a block's P
// and dS stay kRowBlock x kKeyChunk). Pass B, over aligned blocks of
// K/V buffer rows: each key block's dK/dV from the row blocks whose key spans meet it, in row block
// order. Both passes are parallel over their blocks and the sums run in a fixed order, so the result
// does not depend on the thread count. Every valid row contributes (dK/dV of a key need every row that
// sees it), whatever rows=N samples: the backward costs the whole case.
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "reference_gemm.h"
#include "reference_rows.h"
#include "reference_softmax.h"
#include "reference_runtime.h"
#include "attn_oracle/reference/bwd_sums.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

namespace {

constexpr size_t kRowBlock = 128;
constexpr int64_t kKeyBlock = 256;
constexpr int64_t kKeyChunk = 512;  // pass A's keys per product
// 128 x 512 and 256-key tiles: 1.32x faster than 64 x whole span and 64-key tiles on the 32k pack
// (bench/results/sdpa-bwd-blocks-2026-12-05/), where small tiles left sgemm's packing a large share.

// A run of keys of one row block: KV buffer rows base + [lo, hi), the union of its rows' range j.
struct Span {
  int64_t base, lo, hi;
};

struct Block {
  int seg;
  std::vector<int64_t> rows;                  // valid Q rows of one segment
  std::vector<std::vector<KeyRange>> ranges;  // per row: its key ranges (clipped into the buffer)
  std::vector<Span> spans;                    // per range index: the union over the rows
};

// Every valid row of every segment, in blocks of one segment.
std::vector<Block> all_row_blocks(const Layout& l, const ReferenceSeams& seams) {
  std::vector<Block> out;
  for (size_t si = 0; si < l.segments.size(); ++si) {
    const auto& s = l.segments[si];
    for (int64_t i = 0; i < s.valid; i += int64_t(kRowBlock)) {
      Block b{int(si), {}, {}, {}};
      for (int64_t j = i; j < std::min(s.valid, i + int64_t(kRowBlock)); ++j) {
        b.rows.push_back(s.row0 + j);
        b.ranges.push_back(detail::row_key_ranges(l, s.row0 + j, seams));
      }
      for (size_t j = 0; j < b.ranges[0].size(); ++j) {
        Span sp{b.ranges[0][j].base, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
        for (const auto& rr : b.ranges) {
          if (j >= rr.size() || rr[j].hi <= rr[j].lo) continue;
          sp.lo = std::min(sp.lo, rr[j].lo);
          sp.hi = std::max(sp.hi, rr[j].hi);
        }
        if (sp.hi <= sp.lo) sp.lo = sp.hi = 0;
        b.spans.push_back(sp);
      }
      out.push_back(std::move(b));
    }
  }
  return out;
}

template <class T>
struct Run {
  const Layout& l;
  const Inputs& in;
  const ReferenceSeams& seams;
  int Hq, Hkv, D, Dv;
  T scale;
  // The emulation folds the softmax scale into dS before rounding it (ds_fold), so its dQ/dK products
  // take 1; otherwise dS is unscaled and the products take the seams' scales.
  T ds_fold, dq_scale, dk_scale;
  bool guard;
  // A flash backward's rounding: P and scale * dS rounded to the dtype before their products, and under
  // GQA each query head's dK/dV rounded to the dtype before the group's sum. Folding the scale first is
  // the coarser choice for a scale below 1, as 1/sqrt(d) is (scaled dS of rows with small P fall into
  // fp16's subnormals), and so is rounding
  // every head: cuDNN makes both (its fp16 dK errors, matched to three digits in
  // results/gpu/backward-diagnosis-h100-2026-12-05/); a kernel that makes neither errs less.
  bool emulate;
  // With twin (T = float, emulate off): the emulation's gradients too, from the same products of S and dP
  // and the same P and dS, rounded as emulate rounds them: the comparator's two fp32 answers, 10 products
  // where two runs take 14, each bit for bit what its own run gives.
  bool twin;
  std::vector<Block> blocks;

  const std::vector<float>& dout;  // dO: in.dout, or the comparator's weights in its place
  // 0: the whole backward. Else only dV = P^T dO, of dO's first dv_only columns (the comparator's column
  // sums of P): no dQ pass, no dP, dS or dK, 2 of the backward's 7 products, one of them thin.
  int dv_only;
  // With col_w (a whole backward, emulate off): also P^T W of W's first cols columns (W shaped as dO), the
  // comparator's column sums of P, from the backward's own P: what dv_only gives, bit for bit, without
  // its products of S.
  const std::vector<float>* col_w;
  int cols;
  // With ds (beside col_w): the comparator's sums over dS: |dS|^T W2 of W2's first ds_cols columns, and per
  // valid (row, head) sum_j |dS_j| max_e |k_je| and sum_j dS_j^2 (DsSums).
  DsSums* ds;
  int ds_cols;

  Run(const Layout& l_, const Inputs& in_, const ReferenceSeams& s_, bool emulate_ = false,
      const std::vector<float>* dout_ = nullptr, int dv_only_ = 0, bool twin_ = false,
      const std::vector<float>* col_w_ = nullptr, int cols_ = 0, DsSums* ds_ = nullptr)
      : l(l_), in(in_), seams(s_), Hq(l_.c.hq), Hkv(l_.c.hkv), D(l_.c.dim), Dv(l_.c.dim_v), scale(T(l_.scale)),
        ds_fold(emulate_ ? T(s_.dk_scale(l_)) : T(1)), dq_scale(emulate_ ? T(1) : T(s_.dq_scale(l_))),
        dk_scale(emulate_ ? T(1) : T(s_.dk_scale(l_))), guard(s_.guards_empty_rows(l_)),
        emulate(emulate_), twin(twin_), blocks(all_row_blocks(l_, s_)), dout(dout_ ? *dout_ : in_.dout),
        dv_only(dv_only_), col_w(col_w_), cols(col_w_ ? cols_ : 0), ds(ds_),
        ds_cols(ds_ && ds_->weights ? ds_->cols : 0) {
    if (twin && (emulate || dv_only || !std::is_same_v<T, float>))
      throw std::logic_error("Run: the emulation twin rides on a whole fp32 backward");
    if (col_w && (emulate || dv_only || cols < 1 || cols > Dv))
      throw std::logic_error("Run: the column sums ride on a whole backward, 1 to dim_v columns");
    if (ds && (!col_w || (ds->weights && (ds_cols < 1 || ds_cols > D))))
      throw std::logic_error("Run: the sums over dS ride on the column sums, 1 to dim columns");
  }
  // The twin's dS fold (emulate's ds_fold; its dQ/dK products then take 1).
  T twin_fold() const { return T(seams.dk_scale(l)); }

  // The block's rows for head h: Q, dO, the saved LSE and D = rowsum(dO o O).
  struct RowsOfHead {
    std::vector<T> q, dout, lse, d, w, w2;  // w: the column sums' weights (rows x cols); w2: |dS|'s (rows x ds_cols)
  };
  void load_rows(const Block& b, int h, RowsOfHead& x) const {
    const size_t R = b.rows.size();
    x.q.resize(R * size_t(D));
    x.dout.resize(R * size_t(Dv));
    x.lse.resize(R);
    x.d.resize(R);
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = b.rows[i], qr = seams.q_read_row(l, r);
      std::copy_n(in.q.data() + (qr * Hq + h) * D, D, x.q.data() + i * size_t(D));
      const float* dO = dout.data() + (qr * Hq + h) * Dv;
      std::copy_n(dO, Dv, x.dout.data() + i * size_t(Dv));
      x.lse[i] = T(in.lse[size_t(seams.stats_read_row(l, r) * Hq + h)]);
      const float* o = in.o.data() + (seams.o_read_row(l, r) * Hq + h) * Dv;
      T d = 0;
      for (int e = 0; e < Dv; ++e) d += T(dO[e]) * T(o[e]);
      x.d[i] = d;
      if (cols) {
        x.w.resize(R * size_t(cols));
        std::copy_n(col_w->data() + (qr * Hq + h) * Dv, cols, x.w.data() + i * size_t(cols));
      }
      if (ds_cols) {
        x.w2.resize(R * size_t(ds_cols));
        std::copy_n(ds->weights->data() + (qr * Hq + h) * Dv, ds_cols, x.w2.data() + i * size_t(ds_cols));
      }
    }
  }

  // K or V rows [a, b) of KV head kvh as T: for fp32 in place, through the head stride (no copy); else
  // converted into buf, packed (n x dim). Rows of the matrix: ptr + row * ld.
  struct KvRows {
    const T* ptr;
    int64_t ld;
  };
  KvRows kv_rows(const std::vector<float>& src, int dim, int kvh, int64_t a, int64_t b, std::vector<T>& buf) const {
    if constexpr (std::is_same_v<T, float>) {
      (void)b;
      (void)buf;
      return {src.data() + (a * Hkv + kvh) * dim, int64_t(Hkv) * dim};
    } else {
      buf.resize(size_t((b - a) * dim));
      for (int64_t s = a; s < b; ++s)
        std::copy_n(src.data() + (s * Hkv + kvh) * dim, dim, buf.data() + (s - a) * dim);
      return {buf.data(), dim};
    }
  }

  // dS (and P) of the block's rows against keys [a, b) of span j (buffer rows, inside the span):
  // P = exp(S - lse) on each row's allowed keys, 0 elsewhere; a row with an infinite LSE contributes
  // nothing under the guard, and without it takes exp(s - lse) over the masked keys too (-inf - -inf:
  // NaN). Returns false when no row has an allowed key there (nothing to add).
  // With twin, Pe and dSe get the emulation's P and dS (rounded copies).
  bool tile(const Block& b, size_t j, int64_t a, int64_t e, const RowsOfHead& x, KvRows K, KvRows V, std::vector<T>& P,
            std::vector<T>& dS, std::vector<T>& Pe, std::vector<T>& dSe) const {
    const int64_t R = int64_t(b.rows.size()), n = e - a, base = b.spans[j].base;
    const T ninf = -std::numeric_limits<T>::infinity();
    bool any = false;
    std::vector<std::pair<int64_t, int64_t>> cols(static_cast<size_t>(R));
    for (int64_t i = 0; i < R; ++i) {
      const auto& rr = b.ranges[size_t(i)];
      int64_t lo = 0, hi = 0;
      if (j < rr.size()) {
        lo = std::max(rr[j].lo + base, a) - a;
        hi = std::min(rr[j].hi + base, e) - a;
      }
      cols[size_t(i)] = {lo, std::max(lo, hi)};
      const bool empty_row = std::isinf(x.lse[size_t(i)]);
      any = any || hi > lo || (!guard && empty_row);
    }
    if (!any) return false;
    P.resize(size_t(R * n));
    dS.resize(size_t(R * n));
    if (twin) {
      Pe.resize(size_t(R * n));
      dSe.resize(size_t(R * n));
    }
    const T fold_e = twin ? twin_fold() : T(1);
    detail::gemm_abt<T>(R, n, D, scale, x.q.data(), D, K.ptr, K.ld, T(0), P.data(), n);
    if (!dv_only) detail::gemm_abt<T>(R, n, Dv, T(1), x.dout.data(), Dv, V.ptr, V.ld, T(0), dS.data(), n);  // dP
    for (int64_t i = 0; i < R; ++i) {
      const T lse = x.lse[size_t(i)];
      const bool skip = std::isinf(lse) && guard;
      const auto [lo, hi] = cols[size_t(i)];
      T* p = P.data() + i * n;
      T* ds = dS.data() + i * n;
      if (std::isfinite(lse)) {  // exp(-inf - lse) = 0 off the allowed keys, guard or not
        const int64_t a0 = std::min(lo, n), e0 = std::min(hi, n);  // a range may start past the tile
        std::fill(p, p + a0, T(0));
        detail::exp_shift(p + a0, e0 - a0, lse);
        std::fill(p + e0, p + n, T(0));
      } else {
        for (int64_t s = 0; s < n; ++s) {
          const bool allowed = s >= lo && s < hi && !skip;
          p[s] = allowed || !guard ? std::exp((allowed ? p[s] : ninf) - lse) : T(0);
        }
      }
      for (int64_t s = 0; s < n && !dv_only; ++s) {
        ds[s] = p[s] * (ds[s] - x.d[size_t(i)]);
        if (emulate) {
          p[s] = T(round_to(l.c.dtype, float(p[s])));
          ds[s] = T(round_to(l.c.dtype, float(ds[s] * ds_fold)));
        }
      }
      if (twin) {
        T* pe = Pe.data() + i * n;
        T* dse = dSe.data() + i * n;
        for (int64_t s = 0; s < n; ++s) {
          pe[s] = T(round_to(l.c.dtype, float(p[s])));
          dse[s] = T(round_to(l.c.dtype, float(ds[s] * fold_e)));
        }
      }
    }
    return true;
  }

  // Pass A: dQ of every valid row, packed per block (rows x Hq x D), in block order (the twin's in out_e;
  // with ds, the row sums over dS in sums: rows x Hq x 2).
  void dq(std::vector<std::vector<T>>& out, std::vector<std::vector<T>>& out_e,
          std::vector<std::vector<double>>& sums) const {
    out.assign(blocks.size(), {});
    out_e.assign(twin ? blocks.size() : 0, {});
    sums.assign(ds ? blocks.size() : 0, {});
#pragma omp parallel num_threads(detail::reference_threads())
    {
      RowsOfHead x;
      std::vector<T> K, V, P, dS, Pe, dSe, acc, acc_e;
      std::vector<double> kinf;
#pragma omp for schedule(dynamic, 1)
      for (size_t bi = 0; bi < blocks.size(); ++bi) {
        const Block& b = blocks[bi];
        const int64_t R = int64_t(b.rows.size());
        auto& dst = out[bi];
        dst.assign(size_t(R * Hq * D), T(0));
        if (twin) out_e[bi].assign(size_t(R * Hq * D), T(0));
        if (ds) sums[bi].assign(size_t(R * Hq * 2), 0.0);
        for (int h = 0; h < Hq; ++h) {
          const int kvh = seams.kv_head(l, h);
          load_rows(b, h, x);
          acc.assign(size_t(R * D), T(0));
          if (twin) acc_e.assign(size_t(R * D), T(0));
          for (size_t j = 0; j < b.spans.size(); ++j) {
            const Span& sp = b.spans[j];
            if (sp.hi <= sp.lo) continue;
            // Key chunks of the span, so the block's P and dS stay R x kKeyChunk whatever the document.
            for (int64_t a = sp.base + sp.lo; a < sp.base + sp.hi; a += kKeyChunk) {
              const int64_t e = std::min(a + kKeyChunk, sp.base + sp.hi);
              const KvRows Kr = kv_rows(in.k, D, kvh, a, e, K), Vr = kv_rows(in.v, Dv, kvh, a, e, V);
              if (!tile(b, j, a, e, x, Kr, Vr, P, dS, Pe, dSe)) continue;
              detail::gemm_ab<T>(R, D, e - a, dq_scale, dS.data(), e - a, Kr.ptr, Kr.ld, T(1), acc.data(), D);
              if (ds) {  // sum_j |dS_ij| max_e |k_je| and sum_j dS_ij^2 of the block's rows
                const int64_t n = e - a;
                kinf.assign(size_t(n), 0.0);
                for (int64_t s = 0; s < n; ++s)
                  for (int c = 0; c < D; ++c) kinf[size_t(s)] = std::max(kinf[size_t(s)], std::fabs(double(Kr.ptr[s * Kr.ld + c])));
                for (int64_t i = 0; i < R; ++i) {
                  double* to = sums[bi].data() + (i * Hq + h) * 2;
                  for (int64_t s = 0; s < n; ++s) {
                    const double v = double(dS[size_t(i * n + s)]);
                    to[0] += std::fabs(v) * kinf[size_t(s)];
                    to[1] += v * v;
                  }
                }
              }
              if (twin) detail::gemm_ab<T>(R, D, e - a, T(1), dSe.data(), e - a, Kr.ptr, Kr.ld, T(1), acc_e.data(), D);
            }
          }
          for (std::vector<T>* ac : {&acc, &acc_e}) {
            if (ac == &acc_e && !twin) continue;
            if (!guard)  // no allowed key and no span: exp(s - lse) over a masked tile still gives NaN
              for (int64_t i = 0; i < R; ++i)
                if (std::isinf(x.lse[size_t(i)]) && x.lse[size_t(i)] < 0)
                  std::fill_n(ac->data() + i * D, D, std::numeric_limits<T>::quiet_NaN());
            T* to = (ac == &acc ? dst : out_e[bi]).data();
            for (int64_t i = 0; i < R; ++i) std::copy_n(ac->data() + i * D, D, to + (i * Hq + h) * D);
          }
        }
      }
    }
  }

  // One answer's dK/dV of a key block: its sums (dk, dv), the current segment's (tk, tv) and, where each
  // GQA head's partial is rounded before the group's sum, the head's (hk, hv).
  struct KvSums {
    std::vector<T> dk, dv, tk, tv, hk, hv;
    bool round_heads = false;
    T dk_scale = T(1);
    bool columns = false;  // the column sums: dv holds cols columns a row (the others are 0), dk ds_cols
    int dvw = 0;           // dv's width a row and head
    int dkw = 0;           // dk's
  };

  // Pass B: dK/dV of the key block [k0, k0 + kKeyBlock) of the buffer, per KV head (n x Hkv x D / Dv),
  // and which of its rows received a contribution; out[1] the twin's, out[2] the column sums. pairs: (row
  // block, span index) meeting the block.
  void dkv_block(int64_t k0, const std::vector<std::pair<size_t, size_t>>& pairs, KvSums* out,
                 std::vector<char>& touched) const {
    const int64_t k1 = std::min(k0 + kKeyBlock, l.kv_rows), n = k1 - k0;
    std::vector<int> answers{0};
    if (twin) answers.push_back(1);
    if (cols) answers.push_back(2);
    out[0].round_heads = emulate && l.group() > 1;  // each head's partial apart (hk/hv), then rounded
    out[0].dk_scale = dk_scale;
    out[1].round_heads = l.group() > 1;
    out[2].columns = true;
    for (int k : answers) {
      out[k].dvw = out[k].columns ? cols : Dv;
      out[k].dkw = out[k].columns ? ds_cols : D;
      out[k].dk.assign(size_t(n * Hkv * out[k].dkw), T(0));
      out[k].dv.assign(size_t(n * Hkv * out[k].dvw), T(0));
    }
    touched.assign(size_t(n), 0);
    const bool sum_group = seams.dkv_sums_group(l), sum_segments = seams.dkv_sums_segments(l);
    RowsOfHead x;
    std::vector<T> K, V, P, dS, Pe, dSe, absdS;
    std::vector<char> seg_touched;
    int loaded_kvh = -1;  // the K/V head whose rows [k0, k1) kb_k/kb_v hold
    KvRows kb_k{nullptr, 0}, kb_v{nullptr, 0};
    // A segment's contributions go to tk/tv first; they are added (or, without the segment sum, replace
    // what earlier segments gave the keys this segment reaches).
    size_t p = 0;
    while (p < pairs.size()) {
      const int seg = blocks[pairs[p].first].seg;
      size_t q = p;
      while (q < pairs.size() && blocks[pairs[q].first].seg == seg) ++q;
      for (int k : answers) {
        out[k].tk.assign(out[k].dk.size(), T(0));
        out[k].tv.assign(out[k].dv.size(), T(0));
      }
      seg_touched.assign(size_t(n), 0);
      for (int h = 0; h < Hq; ++h) {
        if (!sum_group && h % l.group() != 0) continue;
        const int kvh = seams.kv_head(l, h);
        for (int k : answers)
          if (out[k].round_heads) {
            out[k].hk.assign(size_t(n * D), T(0));
            out[k].hv.assign(size_t(n * Dv), T(0));
          }
        for (size_t t = p; t < q; ++t) {
          const Block& b = blocks[pairs[t].first];
          const size_t j = pairs[t].second;
          const Span& sp = b.spans[j];
          const int64_t a = std::max(k0, sp.base + sp.lo), e = std::min(k1, sp.base + sp.hi);
          if (a >= e) continue;
          load_rows(b, h, x);
          // The key block's K/V rows of head kvh, converted once for all its pairs and heads (fp32: in place).
          if (kvh != loaded_kvh) {
            kb_k = kv_rows(in.k, D, kvh, k0, k1, K);
            if (!dv_only) kb_v = kv_rows(in.v, Dv, kvh, k0, k1, V);  // V enters dP only
            loaded_kvh = kvh;
          }
          const KvRows Kr{kb_k.ptr + (a - k0) * kb_k.ld, kb_k.ld},
              Vr{dv_only ? nullptr : kb_v.ptr + (a - k0) * kb_v.ld, kb_v.ld};
          if (!tile(b, j, a, e, x, Kr, Vr, P, dS, Pe, dSe)) continue;
          const int64_t R = int64_t(b.rows.size()), m = e - a;
          // dV[a:e] += P^T dO, dK[a:e] += dk_scale dS^T Q.
          for (int k : answers) {
            KvSums& o = out[k];
            if (o.columns) {  // the backward's own P (and |dS|) against the weights
              detail::gemm_atb<T>(m, cols, R, T(1), P.data(), m, x.w.data(), cols, T(1),
                                  o.tv.data() + ((a - k0) * Hkv + kvh) * cols, int64_t(Hkv) * cols);
              if (ds_cols) {
                absdS.resize(dS.size());
                for (size_t z = 0; z < dS.size(); ++z) absdS[z] = std::abs(dS[z]);
                detail::gemm_atb<T>(m, ds_cols, R, T(1), absdS.data(), m, x.w2.data(), ds_cols, T(1),
                                    o.tk.data() + ((a - k0) * Hkv + kvh) * ds_cols, int64_t(Hkv) * ds_cols);
              }
              continue;
            }
            const std::vector<T>& Pk = k ? Pe : P;
            const std::vector<T>& dSk = k ? dSe : dS;
            T* tvp = o.round_heads ? o.hv.data() + (a - k0) * Dv : o.tv.data() + ((a - k0) * Hkv + kvh) * Dv;
            T* tkp = o.round_heads ? o.hk.data() + (a - k0) * D : o.tk.data() + ((a - k0) * Hkv + kvh) * D;
            const int64_t ldv = o.round_heads ? Dv : int64_t(Hkv) * Dv, ldk = o.round_heads ? D : int64_t(Hkv) * D;
            detail::gemm_atb<T>(m, dv_only ? dv_only : Dv, R, T(1), Pk.data(), m, x.dout.data(), Dv, T(1), tvp, ldv);
            if (!dv_only) detail::gemm_atb<T>(m, D, R, o.dk_scale, dSk.data(), m, x.q.data(), D, T(1), tkp, ldk);
          }
          std::fill(seg_touched.begin() + (a - k0), seg_touched.begin() + (e - k0), char(1));
        }
        for (int k : answers) {
          KvSums& o = out[k];
          if (!o.round_heads) continue;
          for (int64_t s = 0; s < n; ++s) {
            for (int e = 0; e < D; ++e)
              o.tk[size_t((s * Hkv + kvh) * D + e)] += T(round_to(l.c.dtype, float(o.hk[size_t(s * D + e)])));
            for (int e = 0; e < Dv; ++e)
              o.tv[size_t((s * Hkv + kvh) * Dv + e)] += T(round_to(l.c.dtype, float(o.hv[size_t(s * Dv + e)])));
          }
        }
      }
      for (int64_t s = 0; s < n; ++s) {
        if (!seg_touched[size_t(s)]) continue;
        const bool add = sum_segments && touched[size_t(s)];  // the first contribution is stored as is
        touched[size_t(s)] = 1;
        for (int k : answers) {
          KvSums& o = out[k];
          for (int64_t i = s * Hkv * o.dkw; i < (s + 1) * Hkv * o.dkw; ++i)
            o.dk[size_t(i)] = add ? o.dk[size_t(i)] + o.tk[size_t(i)] : o.tk[size_t(i)];
          for (int64_t i = s * Hkv * o.dvw; i < (s + 1) * Hkv * o.dvw; ++i)
            o.dv[size_t(i)] = add ? o.dv[size_t(i)] + o.tv[size_t(i)] : o.tv[size_t(i)];
        }
      }
      p = q;
    }
    for (int k : answers) {  // the scratch goes; the sums stay until written out
      KvSums& o = out[k];
      o.tk = {}, o.tv = {}, o.hk = {}, o.hv = {};
    }
  }

  // The gradients into out (with twin, the emulation's into *out_e; with col_w, the column sums into
  // out_cols->dv).
  void operator()(Outputs& out, Outputs* out_e = nullptr, Outputs* out_cols = nullptr) const {
    if (twin != (out_e != nullptr)) throw std::logic_error("Run: the twin's outputs go with the twin");
    if ((cols > 0) != (out_cols != nullptr)) throw std::logic_error("Run: the column sums' outputs go with them");
    Outputs* const dst[3] = {&out, out_e, out_cols};
    const int answers = twin ? 2 : 1;  // dQ: the backward and its twin
    // dQ: stored row by row in order (a model whose dQ rows collide stores the last deterministically).
    {
      std::vector<std::vector<T>> dq_blocks[2];
      std::vector<std::vector<double>> sums;
      if (!dv_only) dq(dq_blocks[0], dq_blocks[1], sums);
      if (ds) {
        ds->rows.assign(size_t(l.q_rows) * size_t(Hq) * 2, 0.0);
        for (size_t bi = 0; bi < sums.size(); ++bi)
          for (size_t i = 0; i < blocks[bi].rows.size(); ++i)
            std::copy_n(sums[bi].data() + i * size_t(Hq) * 2, size_t(Hq) * 2,
                        ds->rows.data() + size_t(blocks[bi].rows[i]) * size_t(Hq) * 2);
      }
      for (int k = 0; k < answers; ++k)
        for (size_t bi = 0; bi < dq_blocks[k].size(); ++bi)
          for (size_t i = 0; i < blocks[bi].rows.size(); ++i) {
            const int64_t w = seams.dq_write_row(l, blocks[bi].rows[i]);
            for (int64_t e = 0; e < int64_t(Hq) * D; ++e)
              dst[k]->dq[size_t(w * Hq * D + e)] = float(dq_blocks[k][bi][size_t(int64_t(i) * Hq * D + e)]);
          }
    }
    // dK/dV: key blocks of the buffer and the (row block, span) pairs that meet each, in row block order.
    const int64_t nkb = (l.kv_rows + kKeyBlock - 1) / kKeyBlock;
    std::vector<std::vector<std::pair<size_t, size_t>>> pairs(static_cast<size_t>(nkb));
    for (size_t bi = 0; bi < blocks.size(); ++bi)
      for (size_t j = 0; j < blocks[bi].spans.size(); ++j) {
        const Span& sp = blocks[bi].spans[j];
        if (sp.hi <= sp.lo) continue;
        for (int64_t kb = (sp.base + sp.lo) / kKeyBlock; kb * kKeyBlock < sp.base + sp.hi; ++kb)
          pairs[size_t(kb)].push_back({bi, j});
      }
    const std::vector<char> valid = valid_rows(l, RowBuffer::KV);
    std::vector<std::array<KvSums, 3>> sums(static_cast<size_t>(nkb));
    std::vector<std::vector<char>> touched(static_cast<size_t>(nkb));
#pragma omp parallel for schedule(dynamic, 1) num_threads(detail::reference_threads())
    for (int64_t kb = 0; kb < nkb; ++kb)
      dkv_block(kb * kKeyBlock, pairs[size_t(kb)], sums[size_t(kb)].data(), touched[size_t(kb)]);
    // Every valid K row is written (0 where no row sees it); a row outside them only where a
    // contribution reached it. Stored in key order (colliding rows: the last).
    for (int64_t kb = 0; kb < nkb; ++kb)
      for (int64_t s = 0; s < int64_t(touched[size_t(kb)].size()); ++s) {
        const int64_t k = kb * kKeyBlock + s;
        if (!valid[size_t(k)] && !touched[size_t(kb)][size_t(s)]) continue;
        const int64_t w = seams.dkv_write_row(l, k);
        for (int a = 0; a < 3; ++a) {
          if (!dst[a]) continue;
          const KvSums& o = sums[size_t(kb)][size_t(a)];
          for (int64_t e = 0; e < int64_t(Hkv) * D && !dv_only && (!o.columns || o.dkw > 0); ++e) {
            const int64_t c = e % D;  // the column sums of |dS|: a column beyond their width is 0
            dst[a]->dk[size_t(w * Hkv * D + e)] = c < o.dkw ? float(o.dk[size_t((s * Hkv + e / D) * o.dkw + c)]) : 0.f;
          }
          for (int64_t e = 0; e < int64_t(Hkv) * Dv; ++e) {
            const int64_t c = e % Dv;  // a column beyond the sums' width is 0, as dV alone leaves it
            dst[a]->dv[size_t(w * Hkv * Dv + e)] =
                c < o.dvw ? float(o.dv[size_t((s * Hkv + e / Dv) * o.dvw + c)]) : 0.f;
          }
        }
      }
  }
};

}  // namespace

void reference_sdpa_bwd(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& seams) {
  detail::BlasSingleThread blas_in_caller;
  if (l.c.precision == Precision::F64)
    Run<double>(l, in, seams)(out);
  else
    Run<float>(l, in, seams)(out);
}

void reference_sdpa_bwd_with_columns(const Layout& l, const Inputs& in, Outputs& out, const std::vector<float>& weights,
                                     int cols, Outputs& cols_out) {
  if (cols < 1 || cols > l.c.dim_v)
    throw std::invalid_argument("reference_sdpa_bwd_with_columns: cols outside [1, dim_v]");
  detail::BlasSingleThread blas_in_caller;
  if (l.c.precision == Precision::F64)
    Run<double>(l, in, exact_seams(), false, nullptr, 0, false, &weights, cols)(out, nullptr, &cols_out);
  else
    Run<float>(l, in, exact_seams(), false, nullptr, 0, false, &weights, cols)(out, nullptr, &cols_out);
}

void reference_sdpa_bwd_with_sums(const Layout& l, const Inputs& in, Outputs& out, const std::vector<float>& weights,
                                  int p_cols, Outputs& cols_out, DsSums& ds) {
  if (p_cols < 1 || p_cols > l.c.dim_v)
    throw std::invalid_argument("reference_sdpa_bwd_with_sums: p_cols outside [1, dim_v]");
  if (ds.weights && (ds.cols < 1 || ds.cols > l.c.dim))
    throw std::invalid_argument("reference_sdpa_bwd_with_sums: the sums over dS take 1 to dim columns");
  detail::BlasSingleThread blas_in_caller;
  if (l.c.precision == Precision::F64)
    Run<double>(l, in, exact_seams(), false, nullptr, 0, false, &weights, p_cols, &ds)(out, nullptr, &cols_out);
  else
    Run<float>(l, in, exact_seams(), false, nullptr, 0, false, &weights, p_cols, &ds)(out, nullptr, &cols_out);
}

void reference_sdpa_bwd_dv(const Layout& l, const Inputs& in, const std::vector<float>& dout, int cols, Outputs& out) {
  if (cols < 1 || cols > l.c.dim_v) throw std::invalid_argument("reference_sdpa_bwd_dv: cols outside [1, dim_v]");
  detail::BlasSingleThread blas_in_caller;
  if (l.c.precision == Precision::F64)
    Run<double>(l, in, exact_seams(), false, &dout, cols)(out);
  else
    Run<float>(l, in, exact_seams(), false, &dout, cols)(out);
}

void emulate_sdpa_bwd(const Layout& l, const Inputs& in, Outputs& out) {
  detail::BlasSingleThread blas_in_caller;
  Run<float>(l, in, exact_seams(), true)(out);
}

void reference_and_emulate_sdpa_bwd_f32(const Layout& l, const Inputs& in, Outputs& f32, Outputs& emul) {
  detail::BlasSingleThread blas_in_caller;
  Run<float>(l, in, exact_seams(), false, nullptr, 0, true)(f32, &emul);
}

}  // namespace ao
