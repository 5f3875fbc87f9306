// Reference SDPA forward over padded THD: per row block and query head, S = scale * Q K^T over the
// row's allowed keys (read through the bound K/V offsets), softmax, O = P V, LSE = max + log(sum).
// Rows with no allowed key: O = 0, LSE = -inf. Memory is O(rows_block * keys of one document).
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "reference_plan.h"

namespace ao {

namespace {

constexpr size_t kRowBlock = 64;

template <class T>
void run(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using FMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strided = Eigen::Map<const FMat, 0, Eigen::OuterStride<>>;
  const Case& c = l.c;
  const int Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v, G = l.group();
  const T scale = T(l.scale);
  const T ninf = -std::numeric_limits<T>::infinity();
  const auto blocks = detail::row_blocks(l, kRowBlock);

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const auto& blk = blocks[bi];
    std::vector<int64_t> rows;
    std::vector<std::vector<detail::KeyRange>> ranges;
    for (int64_t r : blk.rows)
      if (l.valid_row(r)) {
        rows.push_back(r);
        ranges.push_back(detail::row_key_ranges(l, r, qk));
      }
    if (rows.empty()) continue;
    const Eigen::Index R = Eigen::Index(rows.size());
    // Concatenate the block's key spans (same bases for all rows of a document).
    struct Span { int64_t base, lo, hi, at; };
    std::vector<Span> spans;
    int64_t nkeys = 0;
    for (size_t j = 0; j < ranges[0].size(); ++j) {
      Span sp{ranges[0][j].base, std::numeric_limits<int64_t>::max(), 0, nkeys};
      for (auto& rr : ranges) { sp.lo = std::min(sp.lo, rr[j].lo); sp.hi = std::max(sp.hi, rr[j].hi); }
      if (sp.hi <= sp.lo) { sp.lo = sp.hi = 0; }
      nkeys += sp.hi - sp.lo;
      spans.push_back(sp);
    }
    // Bug model tail-read: the last span is widened to a whole key tile, reading pad rows whose
    // probabilities are zero but whose V values still enter P @ V (0 * NaN = NaN).
    int64_t tail_lo = 0, tail_hi = 0;
    if (qk.tail_read_tile > 0 && !spans.empty()) {
      const auto& sp = spans.back();
      const int64_t t = qk.tail_read_tile;
      tail_lo = sp.hi;
      tail_hi = std::min((sp.hi + t - 1) / t * t, l.kv_rows - sp.base);
      tail_hi = std::max(tail_hi, tail_lo);
    }
    Mat Qh(R, D), S(R, std::max<int64_t>(nkeys, 1)), Kh(std::max<int64_t>(nkeys, 1), D),
        Vh(std::max<int64_t>(nkeys, 1), Dv), O(R, Dv);
    std::vector<char> no_key(static_cast<size_t>(R));
    for (int h = 0; h < Hq; ++h) {
      const int kvh = qk.gqa_modulo ? h % Hkv : h / G;
      for (Eigen::Index i = 0; i < R; ++i) {
        const int64_t qr = detail::q_read_row(l, rows[size_t(i)], qk);
        Qh.row(i) = Eigen::Map<const FMat>(in.q.data() + (qr * Hq + h) * D, 1, D).template cast<T>();
      }
      for (const auto& sp : spans) {
        if (sp.hi == sp.lo) continue;
        const int64_t n = sp.hi - sp.lo;
        Kh.middleRows(sp.at, n) = Strided(in.k.data() + ((sp.base + sp.lo) * Hkv + kvh) * D, n, D,
                                          Eigen::OuterStride<>(Hkv * D)).template cast<T>();
        Vh.middleRows(sp.at, n) = Strided(in.v.data() + ((sp.base + sp.lo) * Hkv + kvh) * Dv, n, Dv,
                                          Eigen::OuterStride<>(Hkv * Dv)).template cast<T>();
      }
      if (nkeys > 0) S.leftCols(nkeys).noalias() = scale * (Qh * Kh.topRows(nkeys).transpose());
      for (Eigen::Index i = 0; i < R; ++i) {
        T mx = ninf;
        for (size_t j = 0; j < spans.size(); ++j) {
          const auto& sp = spans[j];
          const auto& kr = ranges[size_t(i)][j];
          for (int64_t s = sp.lo; s < sp.hi; ++s) {
            T& x = S(i, sp.at + s - sp.lo);
            if (s < kr.lo || s >= kr.hi) x = ninf;
            mx = std::max(mx, x);
          }
        }
        const int64_t lrow = detail::stats_write_row(l, rows[size_t(i)], qk);
        const int64_t orow = detail::o_write_row(l, rows[size_t(i)], qk);
        float* o = out.o.data() + (orow * Hq + h) * Dv;
        no_key[size_t(i)] = mx == ninf;
        if (mx == ninf) {  // no allowed key
          for (int e = 0; e < Dv; ++e) o[e] = 0.f;
          out.lse[size_t(lrow * Hq + h)] = -std::numeric_limits<float>::infinity();
          S.row(i).setZero();
          continue;
        }
        T sum = 0;
        for (int64_t s = 0; s < nkeys; ++s) {
          T& x = S(i, s);
          x = x == ninf ? T(0) : std::exp(x - mx);
          sum += x;
        }
        S.row(i).leftCols(nkeys) /= sum;
        T lse = mx + std::log(sum);
        if (qk.lse_log2) lse /= T(M_LN2);
        out.lse[size_t(lrow * Hq + h)] = float(lse);
      }
      if (nkeys > 0) O.noalias() = S.leftCols(nkeys) * Vh.topRows(nkeys);
      else O.setZero();
      if (tail_hi > tail_lo) {  // zero probabilities times whatever the pad rows hold
        const auto& sp = spans.back();
        for (int64_t s = tail_lo; s < tail_hi; ++s)
          for (Eigen::Index i = 0; i < R; ++i)
            for (int e = 0; e < Dv; ++e) O(i, e) += T(0) * T(in.v[size_t(((sp.base + s) * Hkv + kvh) * Dv + e)]);
      }
      for (Eigen::Index i = 0; i < R; ++i) {
        const int64_t orow = detail::o_write_row(l, rows[size_t(i)], qk);
        float* o = out.o.data() + (orow * Hq + h) * Dv;
        if (no_key[size_t(i)] && tail_hi <= tail_lo) continue;
        for (int e = 0; e < Dv; ++e) o[e] = float(O(i, e));
      }
    }
  }
}

}  // namespace

void reference_sdpa(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk) {
  if (l.c.precision == Precision::F64)
    run<double>(l, in, out, qk);
  else
    run<float>(l, in, out, qk);
}

}  // namespace ao
