// Reference DSA indexer: score(t,s) = scale * sum_h w[t,h] * ReLU(q[t,h] . k[s]) on allowed keys,
// top-k with ties broken by lower key index, best first. The selected set is exact: the keys whose fp
// score is within the rounding bound of the kth are re-scored exactly (integers) and decided by
// (exact score desc, index asc); so are short runs of near-equal selected scores (exact_decisions).
// Per row block (rows of one segment, about 1024 query-head rows) and key tile: one GEMM
// S = Q_blk [R*H x D] * K_tile^T (reference_gemm.h: OpenBLAS or Eigen), then per row the fused
// ReLU-weighting (heads summed in head order) and a running top-k (threshold-filtered pushes, partial
// selection at 2k). Where blocks are fewer than the threads can share, a block's key tiles are split
// into parts, each with its own running top-k merged into the block's. Memory is
// O(rows_block * heads * key_tile + rows * k), never S x S.
// The result is the top k in the total order `better`, so it depends only on the score bits, and a
// score depends only on its row block's GEMM of its key tile: bitwise identical for any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include <Eigen/Dense>

#include "reference_gemm.h"
#include "attn_oracle/reference/reference_scratch.h"
#include "attn_oracle/internal/isa_clones.h"
#include "reference_rows.h"
#include "reference_runtime.h"

namespace ao {

namespace {

constexpr int64_t kQueryHeadRows = 1024;  // R * H per block (GEMM M); R at least kMinRows
constexpr size_t kMinRows = 8;
constexpr int64_t kKeyTile = 256;        // GEMM N: the score tile stays in L2
constexpr size_t kMaxParts = 16;         // key parts per block at most
constexpr size_t kMinPartTiles = 8;      // a part's tiles at least (its top-k pass and merge stay small)
constexpr double kBusy = 0.9;            // the share of the threads' rounds that tasks must fill

// The fewest key parts per block whose tasks (blocks x parts, of about equal cost) fill at least kBusy
// of the rounds the threads take over them: 17 blocks on 16 threads take two rounds, half of them idle
// (6 parts: 102 tasks in 7 rounds of 16); 4 blocks on 2 threads need none. A part costs its own running
// top-k and a merge (7% of the 64-row 131k rank at 4 parts per block, measured), so no more than needed.
size_t key_parts(size_t blocks, size_t threads) {
  for (size_t p = 1; p < kMaxParts; ++p) {
    const size_t tasks = blocks * p, rounds = (tasks + threads - 1) / threads;
    if (double(tasks) >= kBusy * double(rounds * threads)) return p;
  }
  return kMaxParts;
}

}  // namespace

// Per thread: a block's score tile with its Q and weight rows, and a key tile in fp64 (grow with heads);
// running top-k candidates (grow with topk): at most one block's per thread plus the next block's (tasks
// run in block order), and, where blocks are shared out in key parts, the thread's part's: 3 sets.
std::vector<ScratchBytes> indexer_reference_scratch(const Layout& l) {
  const double H = l.c.heads, D = l.c.dim, K = l.c.topk, bt = l.c.precision == Precision::F64 ? 8 : 4;
  const double R = double(std::max(kMinRows, size_t(kQueryHeadRows / std::max(l.c.heads, 1))));
  const double T = double(kKeyTile);
  return {{"the reference's per-thread scratch", R * H * (T + D + 1) * bt + T * (D + 1) * 8, "heads"},
          {"the reference's per-thread scratch", 3 * R * 2 * K * (bt == 8 ? 24 : 16), "topk"}};
}

namespace {

// Candidates are ordered by descending score, then ascending index, NaN last (a strict total order,
// so the selected set and its order depend only on the scores). The order is carried by an integer
// key: the score's bits mapped monotonically (-0 as +0, NaN below -inf), compared before the index.
inline uint64_t order_key(float x) {
  if (std::isnan(x)) return 0;
  const uint32_t u = f32_bits(x + 0.0f);
  return (u >> 31) ? uint32_t(~u) : (u | 0x80000000u);
}
inline uint64_t order_key(double x) {
  if (std::isnan(x)) return 0;
  const double y = x + 0.0;
  uint64_t u;
  std::memcpy(&u, &y, 8);
  return (u >> 63) ? ~u : (u | (uint64_t(1) << 63));
}

template <class T>
struct Cand {
  uint64_t key;
  int32_t idx;
  T score;
};

template <class T>
bool better(const Cand<T>& a, const Cand<T>& b) {
  return a.key != b.key ? a.key > b.key : a.idx < b.idx;
}

// The best k candidates pushed so far, plus every candidate within `margin` below the kth (the ones an
// exact tie decision may still need). Once k are held, a candidate below kth - margin is dropped at
// once (one float compare for most keys); the buffer is cut back by partial selection when it doubles.
template <class T>
class RunningTopK {
 public:
  RunningTopK(size_t k, T margin) : k_(k), margin_(margin), cap_(2 * k) {}
  void push(T score, int32_t idx) {
    if (k_ == 0 || (full_ && score < floor_)) return;
    const Cand<T> c{order_key(score), idx, score};
    if (full_ && margin_ == T(0) && !better(c, thr_)) return;
    if (c_.empty()) c_.reserve(cap_);
    c_.push_back(c);
    if (c_.size() >= cap_) shrink();
  }
  // Every held candidate, in no order: a superset of what finish() returns.
  const std::vector<Cand<T>>& held() const { return c_; }
  // Every held candidate, best first (fp order): the best min(k, pushed), then those within the margin.
  std::vector<Cand<T>>& finish() {
    if (c_.size() > k_) shrink();
    std::sort(c_.begin(), c_.end(), better<T>);
    return c_;
  }

 private:
  void shrink() {
    std::nth_element(c_.begin(), c_.begin() + long(k_ - 1), c_.end(), better<T>);
    thr_ = c_[k_ - 1];
    floor_ = margin_ > T(0) ? thr_.score - margin_ : thr_.score;
    auto end = margin_ > T(0) ? std::partition(c_.begin() + long(k_), c_.end(),
                                               [&](const Cand<T>& x) { return x.score >= floor_; })
                              : c_.begin() + long(k_);
    c_.resize(size_t(end - c_.begin()));
    cap_ = std::max(cap_, 2 * c_.size());
    full_ = true;
  }
  size_t k_;
  T margin_;
  size_t cap_;
  bool full_ = false;
  T floor_ = 0;
  Cand<T> thr_{};
  std::vector<Cand<T>> c_;
};

__extension__ typedef __int128 i128;  // GCC/Clang: exact integer scores (up to 127 bits)

// Exact tie decisions. The inputs are dyadic rationals (floats): with integers Q, W, K holding the row's
// q, w and the keys' k scaled by common powers of two (exponents of their least significant bits), a
// score is exactly sum_h W_h * max(sum_d Q_hd K_d, 0) times one power of two shared by the row's keys
// (the scale > 0 is a common factor too, so it does not change the order).
struct Dyadic {  // a finite float as sign * mant * 2^exp
  bool finite = true;
  int64_t mant = 0;
  int exp = 0;
};
inline Dyadic dyadic(float x) {
  const uint32_t u = f32_bits(x), e = (u >> 23) & 0xff, m = u & 0x7fffff;
  Dyadic d;
  if (e == 0xff) { d.finite = false; return d; }
  d.mant = e ? int64_t(m | 0x800000) : int64_t(m);
  d.exp = e ? int(e) - 150 : -149;
  if (u >> 31) d.mant = -d.mant;
  return d;
}
// Lowest set bit's exponent (lsb) and bit length (top) over the nonzero values of x[0, n).
inline bool dyadic_range(const float* x, size_t n, int& lsb, int& top) {
  for (size_t i = 0; i < n; ++i) {
    const Dyadic d = dyadic(x[i]);
    if (!d.finite) return false;
    if (d.mant == 0) continue;
    const uint64_t a = uint64_t(d.mant < 0 ? -d.mant : d.mant);
    lsb = std::min(lsb, d.exp + __builtin_ctzll(a));
    top = std::max(top, d.exp + 64 - __builtin_clzll(a));
  }
  return true;
}
inline int64_t fixed(float x, int e0) {  // x / 2^e0, exact when e0 <= x's lsb and the result fits
  const Dyadic d = dyadic(x);
  if (d.mant == 0) return 0;
  const int sh = d.exp - e0;
  return sh >= 0 ? d.mant * (int64_t(1) << sh) : d.mant / (int64_t(1) << -sh);  // sh < 0 only for 0 low bits
}
inline constexpr int kNoBits = 1 << 20;

// One row's integer image, built on first use; `ok` is false when the integers would not fit in 127 bits
// (generated inputs always fit: values in [-2, 2] on grids no finer than 2^-24 * 2/levels).
struct ExactRow {
  bool built = false, ok = false, zero = false;
  int e_k = 0, k_top = 0;
  std::vector<int64_t> Q, W, Kx;
  void build(const float* q, const float* w, int H, int D, int k_lsb, int k_top_in) {
    built = true;
    int ql = kNoBits, qt = -kNoBits, wl = kNoBits, wt = -kNoBits;
    if (!dyadic_range(q, size_t(H) * size_t(D), ql, qt) || !dyadic_range(w, size_t(H), wl, wt)) return;
    if (ql > qt || wl > wt) {  // q or w all zero: every score is 0
      ok = zero = true;
      return;
    }
    if (k_lsb > k_top) return;  // no nonzero key value (nothing to decide) or no integer image
    const int log_d = 64 - __builtin_clzll(uint64_t(D)), log_h = 64 - __builtin_clzll(uint64_t(H));
    if (qt - ql > 62 || wt - wl > 62 || k_top_in - k_lsb > 62 ||
        (qt - ql) + (k_top_in - k_lsb) + log_d + (wt - wl) + log_h > 125)
      return;
    Q.resize(size_t(H) * size_t(D));
    for (size_t i = 0; i < Q.size(); ++i) Q[i] = fixed(q[i], ql);
    W.resize(size_t(H));
    for (int h = 0; h < H; ++h) W[size_t(h)] = fixed(w[h], wl);
    Kx.resize(size_t(D));
    e_k = k_lsb;
    k_top = k_top_in;
    ok = true;
  }
  // False for a key outside the valid keys' range (a bug model reading a pad slot): no exact score.
  bool score(const float* key, int H, int D, i128& acc) {
    acc = 0;
    if (zero) return true;
    int lo = kNoBits, top = -kNoBits;
    if (!dyadic_range(key, size_t(D), lo, top) || (lo <= top && (lo < e_k || top > k_top))) return false;
    for (int d = 0; d < D; ++d) Kx[size_t(d)] = fixed(key[d], e_k);
    for (int h = 0; h < H; ++h) {
      i128 dot = 0;
      const int64_t* qh = Q.data() + size_t(h) * size_t(D);
      for (int d = 0; d < D; ++d) dot += i128(qh[d]) * Kx[size_t(d)];
      if (dot > 0) acc += dot * W[size_t(h)];
    }
    return true;
  }
};

// Sorts held[i0, i1) by (exact score desc, index asc); leaves it as is if the row has no integer image.
template <class T>
void exact_sort(std::vector<Cand<T>>& held, size_t i0, size_t i1, ExactRow& ex, const float* k, int H, int D) {
  if (!ex.ok) return;
  std::vector<std::pair<i128, Cand<T>>> run(i1 - i0);
  for (size_t i = i0; i < i1; ++i) {
    run[i - i0].second = held[i];
    if (!ex.score(k + int64_t(held[i].idx) * D, H, D, run[i - i0].first)) return;
  }
  std::sort(run.begin(), run.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second.idx < y.second.idx;
  });
  for (size_t i = i0; i < i1; ++i) held[i] = run[i - i0].second;
}

// Above the boundary window, per row: runs of near-equal selected scores are re-ordered exactly while
// they re-score at most this many keys in all (dense random rows have long runs of scores closer than the
// rounding bound; exact ties come from low-entropy inputs, whose runs are short and few).
constexpr size_t kExactInteriorKeys = 64;

// Makes one row's top-k decisions exact. `held` (fp order, best first) holds every candidate whose fp
// score is within `err2` (twice the bound on the fp score error) below the kth, sk. Keys scoring above
// sk + err2 are in the exact top-k, keys below sk - err2 are not; the window in between is re-scored
// exactly and ordered by (exact score desc, index asc): the selected set is exact. Above the window,
// runs of selected keys whose consecutive fp scores are within err2 (where rounding may have swapped
// them) are re-ordered exactly, best first, while they fit in kExactInteriorKeys re-scored keys; the
// others keep their fp order.
template <class T>
void exact_decisions(std::vector<Cand<T>>& held, size_t K, double err2, const float* q, const float* w,
                     const float* k, int H, int D, int k_lsb, int k_top) {
  if (held.size() < 2 || K == 0) return;
  const size_t kth = std::min(K, held.size()) - 1;
  const double sk = double(held[kth].score);
  if (!std::isfinite(sk) || !std::isfinite(err2)) return;
  size_t a = kth, b = kth + 1;
  while (a > 0 && double(held[a - 1].score) <= sk + err2) --a;
  while (b < held.size() && double(held[b].score) >= sk - err2) ++b;
  ExactRow ex;
  auto sort_run = [&](size_t i0, size_t i1) {
    if (!ex.built) ex.build(q, w, H, D, k_lsb, k_top);
    exact_sort(held, i0, i1, ex, k, H, D);
  };
  if (b - a >= 2) sort_run(a, b);
  size_t budget = kExactInteriorKeys;
  for (size_t i = 0; i < a;) {
    size_t j = i + 1;
    while (j < a && double(held[j - 1].score) - double(held[j].score) <= err2) ++j;
    if (j - i >= 2 && j - i <= budget) {
      sort_run(i, j);
      budget -= j - i;
    }
    i = j;
  }
}

// Bound on |fp score - exact score| for every key of a row (Higham's gamma_n for the n = D + H + 1
// roundings on any path of the computation: the D-term dot in any order (products of fp32 inputs
// included), the head product and the (H-1)-term head sum, the scale; ReLU is 1-Lipschitz):
//   E = gamma_{D+H+2} * scale * sum_h |w_h| * ||q_h||_1 * max|k|,  gamma_n = n u / (1 - n u).
template <class T>
double score_error_bound(const T* q, const T* w, int H, int D, double scale, double kmax) {
  const double u = std::is_same_v<T, float> ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  const double n = double(D + H + 2), gamma = n * u / (1 - n * u);
  double m = 0;
  for (int h = 0; h < H; ++h) {
    double l1 = 0;
    for (int d = 0; d < D; ++d) l1 += std::fabs(double(q[h * D + d]));
    m += std::fabs(double(w[h])) * l1;
  }
  return gamma * scale * m * kmax * (1 + 1e-9);
}

// acc[s] = sum_h w[h] * max(S[h * ld + s], 0) for s in [a, b), heads summed in order. The hot loop
// after the GEMM; cloned per ISA so that portable binaries still use AVX-512/AVX2 where present.
template <class T>
inline void weighted_relu_sum_impl(const T* S, int64_t ld, const T* w, int H, int64_t a, int64_t b, T* acc) {
  std::fill(acc + a, acc + b, T(0));
  for (int h = 0; h < H; ++h) {
    const T wh = w[h];
    const T* srow = S + h * ld;
    for (int64_t s = a; s < b; ++s) acc[s] += wh * std::max(srow[s], T(0));
  }
}
AO_ISA_CLONES void weighted_relu_sum(const float* S, int64_t ld, const float* w, int H, int64_t a, int64_t b,
                                     float* acc) {
  weighted_relu_sum_impl(S, ld, w, H, a, b, acc);
}
AO_ISA_CLONES void weighted_relu_sum(const double* S, int64_t ld, const double* w, int H, int64_t a, int64_t b,
                                     double* acc) {
  weighted_relu_sum_impl(S, ld, w, H, a, b, acc);
}

// One row block's state: its rows' key ranges, Q and weight rows, rounding windows and running top-k,
// and the key tiles its parts share out. Built by the block's first task, freed by its last.
template <class T>
struct BlockState {
  struct Tile {
    size_t j;  // the rows' j-th key range
    int64_t base, t0, n;
  };
  size_t parts = 1;  // the key-tile parts that score (the block's other tasks find no tiles)
  size_t nr = 0;     // key ranges per row
  std::vector<std::vector<KeyRange>> ranges;
  std::vector<char> valid;
  std::vector<double> err2;  // twice the row's score error bound: the exact-decision window
  // The buffer row whose K row reads as zeros (-1: none); under filtered candidates every scored key, in
  // index order.
  std::vector<int64_t> zero_key;
  std::vector<std::vector<std::pair<T, int32_t>>> scored;
  std::vector<T> Qb, W;
  std::vector<Tile> tiles;
  std::vector<RunningTopK<T>> top;
};
template <class T>
struct BlockWork {
  std::mutex mu;
  size_t tasks_left = 0;  // of the block's tasks, those not yet done
  std::unique_ptr<BlockState<T>> st;
};

template <class T>
void run(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& seams) {
  const Case& c = l.c;
  const int H = c.heads, D = c.dim;
  const size_t K = size_t(c.topk);
  const T scale = T(l.scale);
  const size_t block_rows = std::max(kMinRows, size_t(kQueryHeadRows / std::max(H, 1)));
  const auto blocks = detail::row_blocks(l, block_rows);
  const int threads = detail::reference_threads();
  int64_t max_keys = 0;
  double kmax = 0;  // max |k| over valid keys: the rounding bound's key factor
  int k_lsb = kNoBits, k_top = -kNoBits;  // the keys' integer image (exact tie decisions)
  bool k_exact = true;
  // The keys scanned in chunks across the threads (serially, a 131k-token rank's K took 70 ms on 2 EPYC
  // cores, where the 512-row reference takes 0.38 s on 16 Xeon cores); max, min and and give the same
  // for any split.
  constexpr int64_t kScanChunk = int64_t(1) << 16;
  std::vector<std::pair<const float*, int64_t>> chunks;
  for (const auto& d : l.docs) {
    max_keys = std::max(max_keys, d.kv_len);
    const float* k0 = in.k.data() + d.kv_off * D;
    for (int64_t e = 0; e < d.kv_len * D; e += kScanChunk) chunks.push_back({k0 + e, std::min(kScanChunk, d.kv_len * D - e)});
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(max : kmax, k_top) \
    reduction(min : k_lsb) reduction(&& : k_exact)
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const auto [x, n] = chunks[ci];
    double m = 0;
    for (int64_t e = 0; e < n; ++e) m = std::max(m, double(std::fabs(x[e])));  // NaN never taken
    kmax = std::max(kmax, m);
    k_exact = dyadic_range(x, size_t(n), k_lsb, k_top) && k_exact;
  }
  if (!k_exact) k_lsb = -kNoBits, k_top = kNoBits;  // no integer image: ExactRow::build refuses
  // Seams that alter what a row's scores are (K reads, candidates) also leave its order to the fp scores.
  const bool reads_altered = seams.alters_key_reads(l), filtered = seams.filters_candidates(l);
  // Few row blocks leave threads idle (17 blocks on 16 threads take two rounds): each block's key tiles
  // are then shared out in parts, each part a task with its own running top-k merged into the block's.
  // The merged set is that of one pass (the best k in a total order plus every candidate within the
  // margin of the final kth: a part drops only candidates below its own kth - margin, never above the
  // final one) and every tile's GEMM is the same call, so the outputs stay bitwise independent of the
  // thread count. Filtered candidates keep one pass (the filter sees a row's keys in index order).
  const size_t parts = filtered || blocks.empty() ? 1 : key_parts(blocks.size(), size_t(threads));
  std::unique_ptr<BlockWork<T>[]> work(new BlockWork<T>[blocks.size()]);
  detail::BlasSingleThread blas_in_caller;
  detail::Progress progress("indexer reference", blocks.size(),
                            double(l.check_rows.size()) * double(max_keys) * H * D);

  const auto prepare = [&](BlockState<T>& w, const detail::RowBlock& blk) {
    const size_t R = blk.rows.size();
    w.ranges.resize(R);
    w.valid.resize(R);
    w.err2.assign(R, 0.0);
    w.zero_key.assign(R, -1);
    w.scored.resize(filtered ? R : 0);
    w.Qb.assign(R * size_t(H * D), T(0));
    w.W.assign(R * size_t(H), T(0));
    w.top.reserve(R);
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = blk.rows[i];
      w.valid[i] = l.valid_row(r);
      if (w.valid[i]) {
        w.ranges[i] = detail::row_key_ranges(l, r, seams);
        w.zero_key[i] = seams.zeroed_key(l, r, w.ranges[i].back());
        const int64_t qr = seams.q_read_row(l, r);
        std::copy_n(in.q.data() + qr * H * D, H * D, w.Qb.data() + i * size_t(H * D));
        std::copy_n(in.w.data() + qr * H, H, w.W.data() + i * size_t(H));
        w.err2[i] = 2 * score_error_bound(w.Qb.data() + i * size_t(H * D), w.W.data() + i * size_t(H), H, D,
                                          l.scale, kmax);
      }
      // The margin rounds down to at most err2 below the kth, never above (1.001: fp subtraction).
      w.top.emplace_back(K, T(w.err2[i] * 1.001));
    }
    // Every row of a block shares the range bases (same document); spans differ per row. The tiles cover
    // the union of the rows' ranges, each inside the K buffer (row_key_ranges), so inside too.
    for (size_t i = 0; i < R; ++i)
      if (w.valid[i]) { w.nr = w.ranges[i].size(); break; }
    for (size_t j = 0; j < w.nr; ++j) {
      int64_t base = 0, lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
      for (size_t i = 0; i < R; ++i) {
        if (!w.valid[i]) continue;
        base = w.ranges[i][j].base;
        lo = std::min(lo, w.ranges[i][j].lo);
        hi = std::max(hi, w.ranges[i][j].hi);
      }
      for (int64_t t0 = lo; t0 < hi; t0 += kKeyTile) w.tiles.push_back({j, base, t0, std::min(kKeyTile, hi - t0)});
    }
    w.parts = std::clamp<size_t>(w.tiles.size() / kMinPartTiles, 1, parts);
  };

  // The best k of the block's rows (tops) over tiles [a, b).
  const auto score = [&](BlockState<T>& w, const detail::RowBlock& blk, size_t a_tile, size_t b_tile,
                         std::vector<RunningTopK<T>>& tops, std::vector<T>& S, std::vector<T>& Kt,
                         std::vector<float>& Ks, std::vector<T>& acc) {
    const size_t R = blk.rows.size();
    S.resize(R * size_t(H) * size_t(kKeyTile));
    for (size_t ti = a_tile; ti < b_tile; ++ti) {
      const auto [j, base, t0, n] = w.tiles[ti];
      const float* kf = in.k.data() + (base + t0) * D;
      if (reads_altered) {
        Ks.resize(size_t(n * D));
        seams.read_key_tile(l, in, l.segments[size_t(blk.seg)].doc, j + 1 == w.nr, base, t0, n, Ks.data());
        kf = Ks.data();
      }
      const T* kt;
      if constexpr (std::is_same_v<T, float>) {
        kt = kf;
      } else {
        Kt.resize(size_t(n * D));
        for (size_t e = 0; e < size_t(n * D); ++e) Kt[e] = T(kf[e]);
        kt = Kt.data();
      }
      detail::gemm_abt<T>(int64_t(R) * H, n, D, T(1), w.Qb.data(), D, kt, D, T(0), S.data(), n);
      for (size_t i = 0; i < R; ++i) {
        if (!w.valid[i]) continue;
        const auto& kr = w.ranges[i][j];
        const int64_t a = std::max(t0, kr.lo) - t0, b = std::min(t0 + n, kr.hi) - t0;
        if (a >= b) continue;
        T* ac = acc.data();
        weighted_relu_sum(S.data() + int64_t(i) * H * n, n, w.W.data() + i * size_t(H), H, a, b, ac);
        if (filtered) {
          for (int64_t s = a; s < b; ++s) w.scored[i].push_back({scale * ac[s], int32_t(base + t0 + s)});
          continue;
        }
        const int64_t z = w.zero_key[i] - (base + t0);  // a zero K row scores 0
        if (z >= a && z < b) ac[z] = T(0);
        auto& tk = tops[i];
        for (int64_t s = a; s < b; ++s) tk.push(scale * ac[s], int32_t(base + t0 + s));
      }
    }
  };

  // The block's answer from its merged top-k: exact tie decisions, strict ties, the output rows.
  const auto finish = [&](BlockState<T>& w, const detail::RowBlock& blk) {
    const size_t R = blk.rows.size();
    if (filtered)
      for (size_t i = 0; i < R; ++i) {
        seams.filter_candidates(w.scored[i], K);
        for (const auto& [sc, idx] : w.scored[i]) w.top[i].push(sc, idx);
      }
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = blk.rows[i];
      auto& cd = w.top[i].finish();
      const int64_t qrow = w.valid[i] ? seams.q_read_row(l, r) : r;
      const int64_t orow = w.valid[i] ? seams.topk_write_row(l, r) : r;
      if (w.valid[i] && !reads_altered && w.zero_key[i] < 0)
        exact_decisions(cd, K, w.err2[i], in.q.data() + qrow * H * D, in.w.data() + qrow * H, in.k.data(), H, D,
                        k_lsb, k_top);
      if (w.valid[i] && l.c.ties == Ties::Strict) {  // tied keys in ascending index order, ties by fp64 score
        const size_t n = std::min(K, cd.size());
        std::vector<std::pair<double, size_t>> key(n);
        for (size_t e = 0; e < n; ++e) key[e] = {exact_indexer_score(l, in, qrow, cd[e].idx), e};
        std::stable_sort(key.begin(), key.end(), [&](const auto& a, const auto& b) {
          return a.first != b.first ? a.first > b.first : cd[a.second].idx < cd[b.second].idx;
        });
        std::vector<Cand<T>> sorted(n);
        for (size_t e = 0; e < n; ++e) sorted[e] = cd[key[e].second];
        std::copy(sorted.begin(), sorted.end(), cd.begin());
      }
      for (size_t e = 0; e < K; ++e) {
        out.topk[size_t(orow) * K + e] = e < cd.size() ? cd[e].idx : -1;
        out.scores[size_t(orow) * K + e] =
            e < cd.size() ? float(cd[e].score) : -std::numeric_limits<float>::infinity();
      }
    }
  };

#pragma omp parallel num_threads(threads)
  {
    // Per-thread scratch, reused across tasks: the score tile, a K tile in T, a K tile as an altered read
    // sees it, the weighted sums, a part's running top-k.
    std::vector<T> S, Kt;
    std::vector<float> Ks;
    std::vector<T> acc = std::vector<T>(size_t(kKeyTile));
    std::vector<RunningTopK<T>> part_top;
    // Tasks in block order: at most one block per thread plus the next one is in flight.
#pragma omp for schedule(dynamic, 1)
    for (size_t task = 0; task < blocks.size() * parts; ++task) {
      const size_t bi = task / parts, p = task % parts;
      const auto& blk = blocks[bi];
      BlockWork<T>& bw = work[bi];
      {
        std::lock_guard<std::mutex> g(bw.mu);
        if (!bw.st) {
          bw.st = std::make_unique<BlockState<T>>();
          prepare(*bw.st, blk);
          bw.tasks_left = parts;
        }
      }
      BlockState<T>& w = *bw.st;
      if (p < w.parts) {
        const size_t a = p * w.tiles.size() / w.parts, b = (p + 1) * w.tiles.size() / w.parts;
        if (w.parts == 1) {
          score(w, blk, a, b, w.top, S, Kt, Ks, acc);
        } else {
          part_top.clear();
          for (size_t i = 0; i < blk.rows.size(); ++i) part_top.emplace_back(K, T(w.err2[i] * 1.001));
          score(w, blk, a, b, part_top, S, Kt, Ks, acc);
          std::lock_guard<std::mutex> g(bw.mu);
          for (size_t i = 0; i < blk.rows.size(); ++i)
            for (const Cand<T>& cd : part_top[i].held()) w.top[i].push(cd.score, cd.idx);
        }
      }
      bool last;
      {
        std::lock_guard<std::mutex> g(bw.mu);
        last = --bw.tasks_left == 0;
      }
      if (last) {
        finish(w, blk);
        bw.st.reset();
        progress.block_done();
      }
    }
  }
}

}  // namespace

double exact_indexer_score(const Layout& l, const Inputs& in, int64_t row, int64_t key_row) {
  const int H = l.c.heads, D = l.c.dim;
  const float* q = in.q.data() + row * H * D;
  const float* k = in.k.data() + key_row * D;
  double acc = 0;
  for (int h = 0; h < H; ++h) {
    double dot = 0;
    for (int d = 0; d < D; ++d) dot += double(q[h * D + d]) * double(k[d]);
    acc += double(in.w[size_t(row * H + h)]) * std::max(dot, 0.0);
  }
  return l.scale * acc;
}

void reference_indexer(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& seams) {
  if (l.c.precision == Precision::F64)
    run<double>(l, in, out, seams);
  else
    run<float>(l, in, out, seams);
}

}  // namespace ao
