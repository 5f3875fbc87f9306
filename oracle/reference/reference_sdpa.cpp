// Reference SDPA forward over padded THD: per row block and query head, S = scale * Q K^T over the
// row's allowed keys (read through the bound K/V offsets), softmax, O = P V, LSE = max + log(sum).
// Rows with no allowed key: O = 0, LSE = -inf (+inf under empty_rows=posinf). Memory is O(rows_block * keys of one document).
// The two products go through reference_gemm.h (OpenBLAS or Eigen), reading fp32 K/V in place
// through their head stride. A row whose allowed scores are all finite takes the vectorised softmax
// (reference_softmax.h); one with NaN/Inf among them takes the scalar path, whose NaN semantics are the
// contract the poisoning metrics rely on (NaN is skipped by the max, then poisons the sum and the row).
// Split-KV (ReferenceSeams::key_splits): a finite row's allowed keys are cut at the document's key splits
// [j*S, (j+1)*S), S = ceil(max_seqlen_kv / num_splits); each split gives a partial state (O_j, LSE_j)
// and the states are merged left to right as a combine kernel does (merge_partials).
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include <Eigen/Dense>

#include "reference_gemm.h"
#include "attn_oracle/reference/reference_scratch.h"
#include "reference_rows.h"
#include "reference_softmax.h"
#include "reference_runtime.h"

namespace ao {

namespace {

constexpr size_t kRowBlock = 128;
constexpr size_t kTasksPerThread = 4;  // where blocks are few: (block, query heads) tasks a thread at least

}  // namespace

// Per thread: a block's score rows over the most keys a row may see, its Q and O rows, and those keys'
// K/V rows in fp64 (all grow with the K/V length).
std::vector<ScratchBytes> sdpa_reference_scratch(const Layout& l) {
  int64_t max_kv = 0;  // the last valid row of a segment sees the most keys
  for (const auto& g : l.segments) {
    int64_t lo = 0, hi = 0;
    if (g.valid > 0) l.allowed_range(g.doc, g.pos0 + g.valid - 1, lo, hi);
    max_kv = std::max(max_kv, hi);
  }
  const double R = double(kRowBlock), D = l.c.dim, Dv = l.c.dim_v, bt = l.c.precision == Precision::F64 ? 8 : 4;
  return {{"the reference's per-thread scratch", R * (double(max_kv) + D + Dv + 8) * bt + double(max_kv) * (D + Dv) * 8, ""}};
}

namespace {

// Key splits of a split-KV kernel: the count (1 = no split) and the keys per split.
struct Splits {
  int n = 1;
  int64_t len = 1;
  int of(int64_t s) const { return int(std::clamp<int64_t>(s / len, 0, n - 1)); }
};
Splits key_splits(const Layout& l, int n) {
  Splits sp;
  sp.n = std::max(n, 1);
  sp.len = sp.n == l.c.num_splits ? l.split_len : std::max<int64_t>(1, (l.max_seqlen_kv + sp.n - 1) / sp.n);
  return sp;
}

// Merges partial states, given by their LSEs, left to right (a combine kernel's state merge): returns
// the merged LSE and sets w[j], the weight of O_j in the merged O. With the guard, two empty states
// ((0, -inf), (0, -inf)) merge to an empty one; without it -inf - -inf = NaN, and the NaN stays in
// every later merge.
template <class T>
T merge_partials(const std::vector<T>& lse, std::vector<T>& w, bool guard) {
  const T ninf = -std::numeric_limits<T>::infinity();
  w.assign(lse.size(), T(0));
  T acc = lse[0];
  w[0] = T(1);
  for (size_t j = 1; j < lse.size(); ++j) {
    const T m = std::fmax(acc, lse[j]);
    if (guard && m == ninf) continue;  // both empty: the merged state stays (0, -inf)
    const T a = std::exp(acc - m), b = std::exp(lse[j] - m), sum = a + b;
    for (size_t k = 0; k < j; ++k) w[k] *= a / sum;
    w[j] = b / sum;
    acc = m + std::log(sum);
  }
  return acc;
}

template <class T>
void run(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& seams) {
  const Case& c = l.c;
  const int Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v;
  const T scale = T(l.scale);
  const T ninf = -std::numeric_limits<T>::infinity();
  const float empty_lse = (c.empty_rows == EmptyRows::PosInf ? 1.f : -1.f) * std::numeric_limits<float>::infinity();
  const auto blocks = detail::row_blocks(l, kRowBlock);
  const KeySplits split_seam = seams.key_splits(l);
  const Splits splits = key_splits(l, split_seam.n);
  // The split path computes every row from partial states; nan_rows_only re-creates only the rows that
  // the merge's NaN reaches (elsewhere a correct merge differs from the exact path by rounding).
  const bool split_path = !split_seam.nan_rows_only && splits.n > 1;
  const bool nan_rows = split_seam.nan_rows_only && splits.n > 1;
  const T m0 = T(seams.initial_max()), lse_div = T(seams.lse_divisor());
  const int64_t pv_tile = std::max<int64_t>(seams.pv_key_tile(l), 1);
  int64_t max_keys = 0;
  for (const auto& d : l.docs) max_keys = std::max(max_keys, d.kv_len);
  detail::BlasSingleThread blas_in_caller;
  detail::Progress progress("sdpa reference", blocks.size(),
                            double(l.check_rows.size()) * double(max_keys) * Hq * (D + Dv));
  // Few row blocks (sampled rows: 256 of them are 2 blocks) leave threads idle, and under a causal mask a
  // block's cost grows with its rows' positions: each block's query heads are then shared out in parts, a
  // task each, for at least kTasksPerThread tasks a thread. A part costs only its block's key ranges again;
  // a head's products and softmax are the same calls whichever task runs them, so the outputs stay bitwise
  // independent of the thread count.
  const int threads = detail::reference_threads();
  const size_t head_parts = std::clamp<size_t>((kTasksPerThread * size_t(threads) + blocks.size() - 1) /
                                                   std::max<size_t>(blocks.size(), 1),
                                               1, size_t(std::max(Hq, 1)));
  std::unique_ptr<std::atomic<size_t>[]> parts_left(new std::atomic<size_t>[blocks.size()]);
  for (size_t bi = 0; bi < blocks.size(); ++bi) parts_left[bi] = head_parts;

#pragma omp parallel num_threads(threads)
  {
    std::vector<T> Qh, S, Kh, Vh, O;  // per-thread scratch, reused across blocks
    std::vector<T> part_max, part_sum, part_lse, part_w;  // split-KV partial states of one row
#pragma omp for schedule(dynamic, 1)
    for (size_t task = 0; task < blocks.size() * head_parts; ++task) {
      const size_t bi = task / head_parts, hp = task % head_parts;
      const int h_begin = int(hp * size_t(Hq) / head_parts), h_end = int((hp + 1) * size_t(Hq) / head_parts);
      const auto part_done = [&] {
        if (parts_left[bi].fetch_sub(1) == 1) progress.block_done();
      };
      const auto& blk = blocks[bi];
      std::vector<int64_t> rows;
      std::vector<std::vector<KeyRange>> ranges;
      for (int64_t r : blk.rows)
        if (l.valid_row(r)) {
          rows.push_back(r);
          ranges.push_back(detail::row_key_ranges(l, r, seams));
        }
      if (rows.empty()) {
        part_done();
        continue;
      }
      const int64_t R = int64_t(rows.size());
      // Concatenate the block's key spans (same bases for all rows of a document). A span is the union
      // of its rows' ranges, each inside the KV buffer (row_key_ranges), so it stays inside too.
      struct Span { int64_t base, lo, hi, at; };
      std::vector<Span> spans;
      int64_t nkeys = 0;
      for (size_t j = 0; j < ranges[0].size(); ++j) {
        Span sp{ranges[0][j].base, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), nkeys};
        for (auto& rr : ranges) { sp.lo = std::min(sp.lo, rr[j].lo); sp.hi = std::max(sp.hi, rr[j].hi); }
        if (sp.hi <= sp.lo) { sp.lo = sp.hi = 0; }
        nkeys += sp.hi - sp.lo;
        spans.push_back(sp);
      }
      // P @ V over whole key tiles: the last span is widened to a tile's end, reading pad rows whose
      // probabilities are zero but whose V values still enter P @ V (0 * NaN = NaN).
      int64_t tail_lo = 0, tail_hi = 0;
      if (pv_tile > 1 && !spans.empty()) {
        const auto& sp = spans.back();
        const int64_t t = pv_tile;
        tail_lo = sp.hi;
        tail_hi = std::min((sp.hi + t - 1) / t * t, l.kv_rows - sp.base);
        tail_hi = std::max(tail_hi, tail_lo);
      }
      const int64_t ldS = std::max<int64_t>(nkeys, 1);
      Qh.resize(size_t(R * D));
      S.resize(size_t(R * ldS));
      O.resize(size_t(R * Dv));
      std::vector<char> no_key(static_cast<size_t>(R));
      std::vector<std::pair<int64_t, int64_t>> cols;  // a row's allowed S columns, one run per span
      for (int h = h_begin; h < h_end; ++h) {
        const int kvh = seams.kv_head(l, h);
        for (int64_t i = 0; i < R; ++i) {
          const int64_t qr = seams.q_read_row(l, rows[size_t(i)]);
          const float* q = in.q.data() + (qr * Hq + h) * D;
          std::copy_n(q, D, Qh.data() + i * D);  // converts for T = double
        }
        // K/V of a span: fp32 is read in place through the head stride; fp64 is converted once.
        auto span_kv = [&](const Span& sp, const float* src, int dim, std::vector<T>& buf, int64_t& ld) -> const T* {
          const float* p = src + ((sp.base + sp.lo) * Hkv + kvh) * dim;
          if constexpr (std::is_same_v<T, float>) {
            (void)buf;
            ld = int64_t(Hkv) * dim;
            return p;
          } else {
            const int64_t n = sp.hi - sp.lo;
            buf.resize(size_t(n * dim));
            for (int64_t s = 0; s < n; ++s)
              for (int e = 0; e < dim; ++e) buf[size_t(s * dim + e)] = T(p[s * Hkv * dim + e]);
            ld = dim;
            return buf.data();
          }
        };
        for (const auto& sp : spans) {
          if (sp.hi == sp.lo) continue;
          int64_t ld = 0;
          const T* kp = span_kv(sp, in.k.data(), D, Kh, ld);
          detail::gemm_abt<T>(R, sp.hi - sp.lo, D, scale, Qh.data(), D, kp, ld, T(0), S.data() + sp.at, ldS);
        }
        for (int64_t i = 0; i < R; ++i) {
          T* srow = S.data() + i * ldS;
          cols.clear();
          bool finite = true;
          T mx = ninf;
          for (size_t j = 0; j < spans.size(); ++j) {
            const auto& sp = spans[j];
            const auto& kr = ranges[size_t(i)][j];
            const int64_t a = std::max(sp.lo, kr.lo), b = std::min(sp.hi, kr.hi);
            if (a >= b) continue;
            cols.push_back({sp.at + a - sp.lo, sp.at + b - sp.lo});
            T m = ninf;
            finite = finite && detail::finite_max(srow + cols.back().first, b - a, m);
            if (finite) mx = std::max(mx, m);
          }
          const int64_t lrow = seams.stats_write_row(l, rows[size_t(i)]);
          const int64_t orow = seams.o_write_row(l, rows[size_t(i)]);
          float* o = out.o.data() + (orow * Hq + h) * Dv;
          // A column's document key s (for its split): the span's lo plus the column's offset in it.
          auto for_each_col = [&](auto&& f) {
            for (size_t j = 0; j < spans.size(); ++j) {
              const auto& sp = spans[j];
              const int64_t a = std::max(sp.lo, ranges[size_t(i)][j].lo), b = std::min(sp.hi, ranges[size_t(i)][j].hi);
              for (int64_t s = a; s < b; ++s) f(sp.at + s - sp.lo, splits.of(s));
            }
          };
          if (split_path || nan_rows) {
            part_max.assign(size_t(splits.n), ninf);
            part_sum.assign(size_t(splits.n), T(0));
            for_each_col([&](int64_t c, int j) { part_max[size_t(j)] = std::fmax(part_max[size_t(j)], srow[c]); });
          }
          if (nan_rows) {  // the merge's outcome depends only on which partial states are empty
            part_lse.assign(size_t(splits.n), T(0));
            for (int j = 0; j < splits.n; ++j)
              if (part_max[size_t(j)] == ninf) part_lse[size_t(j)] = ninf;
            if (std::isnan(merge_partials(part_lse, part_w, split_seam.guard))) {
              for (int e = 0; e < Dv; ++e) o[e] = std::numeric_limits<float>::quiet_NaN();
              out.lse[size_t(lrow * Hq + h)] = std::numeric_limits<float>::quiet_NaN();
              no_key[size_t(i)] = true;  // keeps the NaN row out of the P @ V store
              std::fill(srow, srow + ldS, T(0));
              continue;
            }
          }
          if (finite && !cols.empty() && mx < m0 - T(104)) {
            // A finite initial max m0 never moves below it, every exp(x - m0) underflows to 0 in fp32
            // (x < m0 - 104), the row's sum stays 0: O = 0, LSE = m0. Never under the exact m0 = -inf.
            for (int e = 0; e < Dv; ++e) o[e] = 0.f;
            out.lse[size_t(lrow * Hq + h)] = float(m0);
            no_key[size_t(i)] = true;  // keeps the row out of the P @ V store
            std::fill(srow, srow + ldS, T(0));
            continue;
          }
          T sum = 0;
          if (finite && split_path) {  // partial softmax per split, merged: P = w_j * exp(x - m_j) / sum_j
            int64_t at = 0;
            for (const auto& [a, b] : cols) {
              std::fill(srow + at, srow + a, T(0));
              at = b;
            }
            std::fill(srow + at, srow + nkeys, T(0));
            for_each_col([&](int64_t c, int j) {
              srow[c] = std::exp(srow[c] - part_max[size_t(j)]);
              part_sum[size_t(j)] += srow[c];
            });
            part_lse.resize(size_t(splits.n));
            for (int j = 0; j < splits.n; ++j)
              part_lse[size_t(j)] = part_sum[size_t(j)] > 0 ? part_max[size_t(j)] + std::log(part_sum[size_t(j)]) : ninf;
            const T lse = merge_partials(part_lse, part_w, split_seam.guard);
            no_key[size_t(i)] = mx == ninf || std::isnan(lse);
            if (no_key[size_t(i)]) {  // no allowed key (0, -inf), or the unguarded merge's NaN
              const bool nan = std::isnan(lse);
              for (int e = 0; e < Dv; ++e) o[e] = nan ? std::numeric_limits<float>::quiet_NaN() : 0.f;
              out.lse[size_t(lrow * Hq + h)] = nan ? std::numeric_limits<float>::quiet_NaN() : empty_lse;
              std::fill(srow, srow + ldS, T(0));
              continue;
            }
            for_each_col([&](int64_t c, int j) { srow[c] *= part_w[size_t(j)] / part_sum[size_t(j)]; });
            out.lse[size_t(lrow * Hq + h)] = float(lse / lse_div);
            continue;
          }
          if (finite) {  // the allowed columns, in place; everything else gets probability 0
            int64_t at = 0;
            for (const auto& [a, b] : cols) {
              std::fill(srow + at, srow + a, T(0));
              sum += detail::exp_shift_sum(srow + a, b - a, mx);
              at = b;
            }
            std::fill(srow + at, srow + nkeys, T(0));
          } else {  // NaN/Inf among the allowed scores: scalar path (NaN is skipped by the max)
            mx = ninf;
            for (size_t j = 0; j < spans.size(); ++j) {
              const auto& sp = spans[j];
              const auto& kr = ranges[size_t(i)][j];
              for (int64_t s = sp.lo; s < sp.hi; ++s) {
                T& x = srow[sp.at + s - sp.lo];
                if (s < kr.lo || s >= kr.hi) x = ninf;
                mx = std::max(mx, x);
              }
            }
            if (mx != ninf)
              for (int64_t s = 0; s < nkeys; ++s) {
                T& x = srow[s];
                x = x == ninf ? T(0) : std::exp(x - mx);
                sum += x;
              }
          }
          no_key[size_t(i)] = mx == ninf;
          if (mx == ninf) {  // no allowed key
            for (int e = 0; e < Dv; ++e) o[e] = 0.f;
            out.lse[size_t(lrow * Hq + h)] = empty_lse;
            std::fill(srow, srow + ldS, T(0));
            continue;
          }
          detail::divide_row(srow, nkeys, sum);
          T lse = mx + std::log(sum);
          lse /= lse_div;
          out.lse[size_t(lrow * Hq + h)] = float(lse);
        }
        bool first = true;
        for (const auto& sp : spans) {
          if (sp.hi == sp.lo) continue;
          int64_t ld = 0;
          const T* vp = span_kv(sp, in.v.data(), Dv, Vh, ld);
          detail::gemm_ab<T>(R, Dv, sp.hi - sp.lo, T(1), S.data() + sp.at, ldS, vp, ld, first ? T(0) : T(1),
                             O.data(), Dv);
          first = false;
        }
        if (first) std::fill(O.begin(), O.end(), T(0));
        if (tail_hi > tail_lo) {  // zero probabilities times whatever the pad rows hold
          const auto& sp = spans.back();
          for (int64_t s = tail_lo; s < tail_hi; ++s)
            for (int64_t i = 0; i < R; ++i)
              for (int e = 0; e < Dv; ++e)
                O[size_t(i * Dv + e)] += T(0) * T(in.v[size_t(((sp.base + s) * Hkv + kvh) * Dv + e)]);
        }
        for (int64_t i = 0; i < R; ++i) {
          const int64_t orow = seams.o_write_row(l, rows[size_t(i)]);
          float* o = out.o.data() + (orow * Hq + h) * Dv;
          if (no_key[size_t(i)] && tail_hi <= tail_lo) continue;
          for (int e = 0; e < Dv; ++e) o[e] = float(O[size_t(i * Dv + e)]);
        }
      }
      part_done();
    }
  }
}

}  // namespace

void reference_sdpa(const Layout& l, const Inputs& in, Outputs& out, const ReferenceSeams& seams) {
  if (l.c.precision == Precision::F64)
    run<double>(l, in, out, seams);
  else
    run<float>(l, in, out, seams);
}

}  // namespace ao
