// Reference DSA indexer: score(t,s) = scale * sum_h w[t,h] * ReLU(q[t,h] . k[s]) on allowed keys,
// top-k with ties broken by lower key index. Key tiles are streamed with a running top-k per row,
// so memory is O(rows_block * heads * key_tile + rows * k), never S x S.
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "reference_plan.h"

namespace ao {

namespace {

constexpr size_t kRowBlock = 32;
constexpr int64_t kKeyTile = 512;

template <class T>
struct Cand {
  T score;
  int32_t idx;
};

// Descending score, then ascending index; NaN orders last so the comparator stays a strict order.
template <class T>
bool better(const Cand<T>& a, const Cand<T>& b) {
  const bool an = std::isnan(a.score), bn = std::isnan(b.score);
  if (an != bn) return bn;
  if (!an && a.score != b.score) return a.score > b.score;
  return a.idx < b.idx;
}

template <class T>
void prune(std::vector<Cand<T>>& c, size_t k) {
  if (c.size() <= k) return;
  std::nth_element(c.begin(), c.begin() + long(k - 1), c.end(), better<T>);
  c.resize(k);
}

template <class T>
void run(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using FMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Case& c = l.c;
  const int H = c.heads, D = c.dim;
  const size_t K = size_t(c.topk);
  const T scale = T(l.scale);
  const int32_t fill = qk.fill_zero ? 0 : -1;
  const auto blocks = detail::row_blocks(l, kRowBlock);

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const auto& blk = blocks[bi];
    const size_t R = blk.rows.size();
    std::vector<std::vector<detail::KeyRange>> ranges(R);
    std::vector<std::vector<Cand<T>>> cand(R);
    Mat Qb(Eigen::Index(R) * H, D), W(Eigen::Index(R), H);
    std::vector<bool> valid(R);
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = blk.rows[i];
      valid[i] = l.valid_row(r);
      if (!valid[i]) continue;
      ranges[i] = detail::row_key_ranges(l, r, qk);
      const int64_t qr = detail::q_read_row(l, r, qk);
      Qb.middleRows(Eigen::Index(i) * H, H) =
          Eigen::Map<const FMat>(in.q.data() + qr * H * D, H, D).template cast<T>();
      W.row(Eigen::Index(i)) = Eigen::Map<const FMat>(in.w.data() + qr * H, 1, H).template cast<T>();
    }
    // Every row of a block shares the range bases (same document); spans differ per row.
    const size_t nr = [&] { for (size_t i = 0; i < R; ++i) if (valid[i]) return ranges[i].size(); return size_t(0); }();
    Mat S;
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
        auto Kt = Eigen::Map<const FMat>(in.k.data() + (base + t0) * D, n, D).template cast<T>();
        S.noalias() = Qb * Kt.transpose();
        for (size_t i = 0; i < R; ++i) {
          if (!valid[i]) continue;
          const auto& kr = ranges[i][j];
          for (int64_t s = std::max(t0, kr.lo); s < std::min(t0 + n, kr.hi); ++s) {
            T acc = 0;
            for (int h = 0; h < H; ++h) acc += W(Eigen::Index(i), h) * std::max(S(Eigen::Index(i) * H + h, s - t0), T(0));
            cand[i].push_back({scale * acc, int32_t(base + s)});
          }
          if (cand[i].size() > 4 * K) prune(cand[i], K);
        }
      }
    }
    for (size_t i = 0; i < R; ++i) {
      const int64_t r = blk.rows[i];
      auto& cd = cand[i];
      prune(cd, K);
      std::sort(cd.begin(), cd.end(), better<T>);
      const int64_t orow = valid[i] ? detail::q_read_row(l, r, qk) : r;
      for (size_t e = 0; e < K; ++e) {
        out.topk[size_t(orow) * K + e] = e < cd.size() ? cd[e].idx : fill;
        out.scores[size_t(orow) * K + e] =
            e < cd.size() ? float(cd[e].score) : -std::numeric_limits<float>::infinity();
      }
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
