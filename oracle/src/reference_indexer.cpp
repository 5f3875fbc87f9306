// Reference DSA indexer: score(t,s) = scale * sum_h w[t,h] * ReLU(q[t,h] . k[s]) on allowed keys,
// top-k with ties broken by lower key index.
// Per row block (rows of one segment, about 1024 query-head rows) and key tile: one GEMM
// S = Q_blk [R*H x D] * K_tile^T (reference_gemm.h: OpenBLAS or Eigen), then per row the fused
// ReLU-weighting (heads summed in head order) and a running top-k (threshold-filtered pushes, partial
// selection at 2k). Memory is O(rows_block * heads * key_tile + rows * k), never S x S.
// The result is the top k in the total order `better`, so it depends only on the score bits, and a
// score depends only on its row block's GEMM: bitwise identical for any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Dense>

#include "reference_gemm.h"
#include "reference_plan.h"

namespace ao {

namespace {

constexpr int64_t kQueryHeadRows = 1024;  // R * H per block (GEMM M); R at least kMinRows
constexpr size_t kMinRows = 8;
constexpr int64_t kKeyTile = 256;        // GEMM N: the score tile stays in L2

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

// The best k candidates pushed so far. Once k are held, a candidate worse than the kth is dropped at
// once (one float compare for most keys); the buffer is cut back to k by partial selection at 2k.
template <class T>
class RunningTopK {
 public:
  explicit RunningTopK(size_t k) : k_(k) {}
  void push(T score, int32_t idx) {
    if (k_ == 0 || (full_ && score < thr_.score)) return;
    const Cand<T> c{order_key(score), idx, score};
    if (full_ && !better(c, thr_)) return;
    if (c_.empty()) c_.reserve(2 * k_);
    c_.push_back(c);
    if (c_.size() >= 2 * k_) shrink();
  }
  // The best min(k, pushed) candidates, best first.
  const std::vector<Cand<T>>& finish() {
    if (c_.size() > k_) shrink();
    std::sort(c_.begin(), c_.end(), better<T>);
    return c_;
  }

 private:
  void shrink() {
    std::nth_element(c_.begin(), c_.begin() + long(k_ - 1), c_.end(), better<T>);
    thr_ = c_[k_ - 1];
    c_.resize(k_);
    full_ = true;
  }
  size_t k_;
  bool full_ = false;
  Cand<T> thr_{};
  std::vector<Cand<T>> c_;
};

// acc[s] = sum_h w[h] * max(S[h * ld + s], 0) for s in [a, b), heads summed in order. The hot loop
// after the GEMM; cloned per ISA so that portable binaries still use AVX-512/AVX2 where present.
#define AO_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
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

template <class T>
void run(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk) {
  const Case& c = l.c;
  const int H = c.heads, D = c.dim;
  const size_t K = size_t(c.topk);
  const T scale = T(l.scale);
  const int32_t fill = qk.fill_zero ? 0 : -1;
  const size_t block_rows = std::max(kMinRows, size_t(kQueryHeadRows / std::max(H, 1)));
  const auto blocks = detail::row_blocks(l, block_rows);
  int64_t max_keys = 0;
  for (const auto& d : l.docs) max_keys = std::max(max_keys, d.kv_len);
  detail::BlasSingleThread blas_in_caller;
  detail::Progress progress("indexer reference", blocks.size(),
                            double(l.check_rows.size()) * double(max_keys) * H * D);

#pragma omp parallel num_threads(detail::reference_threads())
  {
    // Per-thread scratch, reused across blocks.
    std::vector<T> Qb, W, S, Kt;
    std::vector<T> acc = std::vector<T>(size_t(kKeyTile));
#pragma omp for schedule(dynamic, 1)
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
      const auto& blk = blocks[bi];
      const size_t R = blk.rows.size();
      std::vector<std::vector<detail::KeyRange>> ranges(R);
      std::vector<RunningTopK<T>> top(R, RunningTopK<T>(K));
      std::vector<char> valid(R);
      Qb.assign(R * size_t(H * D), T(0));
      W.assign(R * size_t(H), T(0));
      for (size_t i = 0; i < R; ++i) {
        const int64_t r = blk.rows[i];
        valid[i] = l.valid_row(r);
        if (!valid[i]) continue;
        ranges[i] = detail::row_key_ranges(l, r, qk);
        const int64_t qr = detail::q_read_row(l, r, qk);
        std::copy_n(in.q.data() + qr * H * D, H * D, Qb.data() + i * size_t(H * D));
        std::copy_n(in.w.data() + qr * H, H, W.data() + i * size_t(H));
      }
      // Every row of a block shares the range bases (same document); spans differ per row.
      size_t nr = 0;
      for (size_t i = 0; i < R; ++i)
        if (valid[i]) { nr = ranges[i].size(); break; }
      S.resize(R * size_t(H) * size_t(kKeyTile));
      for (size_t j = 0; j < nr; ++j) {
        int64_t base = 0, lo = std::numeric_limits<int64_t>::max(), hi = 0;
        for (size_t i = 0; i < R; ++i) {
          if (!valid[i]) continue;
          base = ranges[i][j].base;
          lo = std::min(lo, ranges[i][j].lo);
          hi = std::max(hi, ranges[i][j].hi);
        }
        for (int64_t t0 = lo; t0 < hi; t0 += kKeyTile) {
          const int64_t n = std::min(kKeyTile, hi - t0);
          const float* kf = in.k.data() + (base + t0) * D;
          const T* kt;
          if constexpr (std::is_same_v<T, float>) {
            kt = kf;
          } else {
            Kt.resize(size_t(n * D));
            for (size_t e = 0; e < size_t(n * D); ++e) Kt[e] = T(kf[e]);
            kt = Kt.data();
          }
          detail::gemm_abt<T>(int64_t(R) * H, n, D, T(1), Qb.data(), D, kt, D, T(0), S.data(), n);
          for (size_t i = 0; i < R; ++i) {
            if (!valid[i]) continue;
            const auto& kr = ranges[i][j];
            const int64_t a = std::max(t0, kr.lo) - t0, b = std::min(t0 + n, kr.hi) - t0;
            if (a >= b) continue;
            T* ac = acc.data();
            weighted_relu_sum(S.data() + int64_t(i) * H * n, n, W.data() + i * size_t(H), H, a, b, ac);
            auto& tk = top[i];
            for (int64_t s = a; s < b; ++s) tk.push(scale * ac[s], int32_t(base + t0 + s));
          }
        }
      }
      for (size_t i = 0; i < R; ++i) {
        const int64_t r = blk.rows[i];
        const auto& cd = top[i].finish();
        const int64_t orow = valid[i] ? detail::q_read_row(l, r, qk) : r;
        for (size_t e = 0; e < K; ++e) {
          out.topk[size_t(orow) * K + e] = e < cd.size() ? cd[e].idx : fill;
          out.scores[size_t(orow) * K + e] =
              e < cd.size() ? float(cd[e].score) : -std::numeric_limits<float>::infinity();
        }
      }
      progress.block_done();
    }
  }
}

}  // namespace

void reference_indexer(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk) {
  if (l.c.precision == Precision::F64)
    run<double>(l, in, out, qk);
  else
    run<float>(l, in, out, qk);
}

}  // namespace ao
