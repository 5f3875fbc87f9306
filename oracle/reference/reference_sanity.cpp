#include "attn_oracle/reference/reference_sanity.h"
#include "attn_oracle/internal/omp_threads.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace ao {

namespace {

std::string where(const Layout& l, int64_t r) {
  const auto& s = l.seg_of(r);
  return fmt::format("row {} (doc {}, pos {})", r, s.doc, l.pos_of(r));
}

std::string indexer_row_fault(const Layout& l, const Outputs& ref, int64_t r) {
  const size_t K = size_t(l.c.topk);
  const int32_t* row = ref.topk.data() + size_t(r) * K;
  int64_t lo = 0, hi = 0;
  const auto& seg = l.seg_of(r);
  if (l.valid_row(r)) l.allowed_range(seg.doc, l.pos_of(r), lo, hi);  // pad rows of a segment: no keys
  const int64_t off = l.docs[size_t(seg.doc)].kv_off;
  const size_t expect = std::min<size_t>(K, size_t(hi - lo));
  std::vector<int32_t> idx;
  idx.reserve(expect);
  size_t fills = 0;
  for (size_t e = 0; e < K; ++e) {
    const int32_t v = row[e];
    if (v == kSentinelIndex) return fmt::format("{}: entry {} unwritten", where(l, r), e);
    if (v == -1) { ++fills; continue; }
    if (v < off + lo || v >= off + hi)
      return fmt::format("{}: index {} is not an allowed key (allowed KV rows [{}, {}))", where(l, r), v, off + lo,
                         off + hi);
    idx.push_back(v);
  }
  std::sort(idx.begin(), idx.end());
  if (const auto d = std::adjacent_find(idx.begin(), idx.end()); d != idx.end())
    return fmt::format("{}: index {} appears more than once", where(l, r), *d);
  if (fills != K - expect)
    return fmt::format("{}: {} indices and {} -1 fills; min(k, allowed keys) = {} indices expected", where(l, r),
                       idx.size(), fills, expect);
  return {};
}

std::string sdpa_row_fault(const Layout& l, const Outputs& ref, int64_t r) {
  if (!l.valid_row(r)) return {};  // pad rows are not compared
  const int Hq = l.c.hq, Dv = l.c.dim_v;
  const auto& seg = l.seg_of(r);
  const int64_t orow = seg.o_row0 + (r - seg.row0), srow = seg.stats_row0 + (r - seg.row0);
  int64_t lo = 0, hi = 0;
  l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
  for (int h = 0; h < Hq; ++h) {
    const float* o = ref.o.data() + (orow * Hq + h) * Dv;
    for (int e = 0; e < Dv; ++e) {
      if (is_sentinel(o[e])) return fmt::format("{} head {}: O unwritten", where(l, r), h);
      if (!std::isfinite(o[e])) return fmt::format("{} head {}: O[{}] = {} is not finite", where(l, r), h, e, o[e]);
    }
    const float lse = ref.lse[size_t(srow * Hq + h)];
    if (is_sentinel(lse)) return fmt::format("{} head {}: LSE unwritten", where(l, r), h);
    if (hi > lo && !std::isfinite(lse))
      return fmt::format("{} head {}: LSE = {} is not finite ({} allowed keys)", where(l, r), h, lse, hi - lo);
    const bool neg = l.c.empty_rows == EmptyRows::NegInf;
    if (hi <= lo && !(std::isinf(lse) && (lse < 0) == neg))
      return fmt::format("{} head {}: LSE = {} for a row without allowed keys (must be {}inf)", where(l, r), h, lse,
                         neg ? "-" : "+");
  }
  return {};
}

// The indexer backward: every valid Q row's d_index_q and d_weights, every valid K row's d_index_k and the
// loss written and finite.
std::string indexer_backward_fault(const Layout& l, const Outputs& ref) {
  const size_t HD = size_t(l.c.heads) * size_t(l.c.dim), H = size_t(l.c.heads), D = size_t(l.c.dim);
  std::string fault;
  auto check = [&](const std::vector<float>& t, size_t row, size_t width, const char* name, const std::string& at) {
    for (size_t e = 0; e < width && fault.empty(); ++e) {
      const float x = t[row * width + e];
      if (is_sentinel(x)) fault = fmt::format("{}: {} unwritten", at, name);
      else if (!std::isfinite(x)) fault = fmt::format("{}: {}[{}] = {} is not finite", at, name, e, x);
    }
  };
  for_each_valid_row(l, RowBuffer::Q, [&](int64_t r, int64_t) {
    if (!fault.empty()) return;
    check(ref.dq, size_t(r), HD, "d_index_q", where(l, r));
    check(ref.dw, size_t(r), H, "d_weights", where(l, r));
  });
  for_each_valid_row(l, RowBuffer::KV, [&](int64_t, int64_t j) {
    if (fault.empty()) check(ref.dk, size_t(j), D, "d_index_k", fmt::format("K row {}", j));
  });
  if (fault.empty()) check(ref.loss, 0, 1, "loss", "the loss");
  return fault;
}

}  // namespace

// The SDPA backward's gradients: finite on every judged row (valid Q rows, valid K/V rows).
static std::string sdpa_bwd_fault(const Layout& l, const Outputs& ref) {
  const Case& c = l.c;
  auto bad = [](const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i])) return true;
    return false;
  };
  const size_t WQ = size_t(c.hq) * size_t(c.dim), WK = size_t(c.hkv) * size_t(c.dim), WV = size_t(c.hkv) * size_t(c.dim_v);
  for (int64_t r : l.check_rows)
    if (l.valid_row(r) && bad(ref.dq.data() + size_t(r) * WQ, WQ))
      return fmt::format("{}: dQ not finite (or unwritten)", where(l, r));
  std::string fault;
  for_each_valid_row(l, RowBuffer::KV, [&](int64_t, int64_t k) {
    if (fault.empty() && (bad(ref.dk.data() + size_t(k) * WK, WK) || bad(ref.dv.data() + size_t(k) * WV, WV)))
      fault = fmt::format("K/V row {}: dK/dV not finite (or unwritten)", k);
  });
  return fault;
}

std::string reference_sanity(const Layout& l, const Outputs& ref) {
  if (l.c.pass == Pass::Bwd && l.c.op == Op::Sdpa) return sdpa_bwd_fault(l, ref);
  if (l.c.op == Op::Indexer && l.c.pass == Pass::Bwd) return indexer_backward_fault(l, ref);
  const auto& rows = l.check_rows;
  const bool indexer = l.c.op == Op::Indexer;
  // Rows are independent: checked in parallel; the first bad one (in row order) is reported.
  int64_t first = LLONG_MAX;
#pragma omp parallel for schedule(dynamic, 64) reduction(min : first) num_threads(omp_team_size())
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    const bool bad = indexer ? !indexer_row_fault(l, ref, r).empty() : !sdpa_row_fault(l, ref, r).empty();
    if (bad) first = std::min<int64_t>(first, int64_t(i));
  }
  if (first == LLONG_MAX) return {};
  const int64_t r = rows[size_t(first)];
  return indexer ? indexer_row_fault(l, ref, r) : sdpa_row_fault(l, ref, r);
}

}  // namespace ao
