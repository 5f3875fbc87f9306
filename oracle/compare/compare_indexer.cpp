// Indexer comparator. Per checked row (B = backend's indices, R = reference's):
//  * strict overlap |B ∩ R| / min(k, allowed)                       (informational; ties make it < 1)
//  * tie-aware recall: a returned index counts if it is allowed and its exact fp64 score is
//    >= kth - tol, kth = the lowest exact score in R, tol = indexer_score_tolerance(row) (tolerance.cpp:
//    fp32 accumulation over heads x dim at the row's input magnitudes). Gate: >= min_recall (1).
//  * out-of-causal (same document, not allowed), cross-document, out-of-range (outside the KV buffer
//    or in a KV pad slot), duplicates, wrong -1 fill (count of -1 != k - min(k, allowed)), unwritten rows,
//    and writes into pad slots (clobbered_pad_slots, pad_writes=forbid). All gated at 0.
// The rows judged and the pad slots are the judged region's (judged_region.h): every checked row, a
// segment's pad rows included (they must hold k fills), and the Q rows outside every segment.
//  * ties=strict only: rows whose exactly tied keys (equal fp64 exact score) are not in ascending index
//    order, or whose tie at the k-th was not taken at the lowest indices (tie_order_rows, gated at 0).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

#include "attn_oracle/internal/omp_threads.h"
#include "attn_oracle/compare/compare.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/reference/reference.h"
#include "attn_oracle/compare/tolerance.h"

namespace ao {

Verdict compare_indexer(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref) {
  const Case& c = l.c;
  const size_t K = size_t(c.topk);
  // Owner document of each KV row (-1: pad slot).
  std::vector<int32_t> kv_doc(size_t(l.kv_rows), -1);
  for (size_t b = 0; b < l.docs.size(); ++b)
    for (int64_t s = 0; s < l.docs[b].kv_len; ++s) kv_doc[size_t(l.docs[b].kv_off + s)] = int32_t(b);

  const double kmax = max_abs_key(l, in);

  // Per-row judgement; rows are independent, so they run in parallel and are summed in row order.
  struct RowStats {
    int64_t out_of_causal = 0, cross_doc = 0, out_of_range = 0, dups = 0;
    bool unwritten = false, bad_fill = false, bad = false, tie_order = false;
    double ov = 1, rc = 1;
  };
  const JudgedRegion region(l);
  const auto& rows = region.value_rows();
  std::vector<RowStats> st(rows.size());
#pragma omp parallel for schedule(dynamic, 16) num_threads(omp_team_size())
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    const int64_t r = rows[ri];
    RowStats& x = st[ri];
    const auto& seg = l.seg_of(r);
    const auto& d = l.docs[size_t(seg.doc)];
    const int32_t* b = got.topk.data() + size_t(r) * K;
    const int32_t* rr = ref.topk.data() + size_t(r) * K;
    int64_t lo = 0, hi = 0;
    if (l.valid_row(r)) l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
    const size_t expect = std::min<size_t>(K, size_t(hi - lo));
    size_t fills = 0;
    std::unordered_set<int32_t> seen, in_ref;
    for (size_t e = 0; e < K; ++e)
      if (rr[e] >= 0) in_ref.insert(rr[e]);
    size_t inter = 0, good = 0;
    std::vector<int32_t> to_score, listed;  // listed: the valid returned keys, in list order
    for (size_t e = 0; e < K; ++e) {
      const int32_t v = b[e];
      if (v == kSentinelIndex) { x.unwritten = true; continue; }
      if (v == -1) { ++fills; continue; }
      if (!seen.insert(v).second) { ++x.dups; x.bad = true; continue; }
      if (v < 0 || v >= l.kv_rows || kv_doc[size_t(v)] < 0) { ++x.out_of_range; x.bad = true; continue; }
      if (kv_doc[size_t(v)] != seg.doc) { ++x.cross_doc; x.bad = true; continue; }
      const int64_t s = v - d.kv_off;
      if (s < lo || s >= hi) { ++x.out_of_causal; x.bad = true; continue; }
      listed.push_back(v);
      if (in_ref.count(v)) { ++inter; ++good; } else { to_score.push_back(v); }
    }
    if (!x.unwritten && fills != K - expect) { x.bad_fill = true; x.bad = true; }
    if (!to_score.empty()) {
      const double tol = indexer_score_tolerance(l, in, r, kmax);
      // kth = the lowest exact score in R. The reference's own scores (when it wrote finite ones) say
      // which entries can be lowest: only those within 2*tol of its lowest need an exact score.
      // (Not with a score_tol override: the margin must cover the reference's own rounding.)
      const float* rs = ref.scores.size() == ref.topk.size() && l.c.score_tol < 0 ? ref.scores.data() + size_t(r) * K
                                                                                 : nullptr;
      double ref_min = INFINITY;
      for (size_t e = 0; rs && e < K; ++e)
        if (rr[e] >= 0) {
          if (!std::isfinite(rs[e])) { rs = nullptr; break; }
          ref_min = std::min(ref_min, double(rs[e]));
        }
      double kth = INFINITY;
      for (size_t e = 0; e < K; ++e)
        if (rr[e] >= 0 && (!rs || double(rs[e]) <= ref_min + 2 * tol))
          kth = std::min(kth, exact_indexer_score(l, in, r, rr[e]));
      for (int32_t v : to_score)
        if (in_ref.size() < expect || exact_indexer_score(l, in, r, v) >= kth - tol) ++good;
    }
    if (c.ties == Ties::Strict) {
      // Adjacent exactly tied keys must ascend; a key returned instead of a reference key of the same
      // exact score must not have the higher index (the reference takes ties at the lowest indices).
      double prev = 0;
      for (size_t e = 0; e < listed.size(); ++e) {
        const double sc = exact_indexer_score(l, in, r, listed[e]);
        if (e > 0 && sc == prev && listed[e] < listed[e - 1]) x.tie_order = true;
        prev = sc;
      }
      for (size_t e = 0; e < K && !to_score.empty(); ++e) {
        if (rr[e] < 0 || seen.count(rr[e])) continue;
        const double su = exact_indexer_score(l, in, r, rr[e]);
        for (int32_t v : to_score)
          if (exact_indexer_score(l, in, r, v) == su && rr[e] < v) x.tie_order = true;
      }
      x.bad |= x.tie_order;
    }
    x.ov = expect ? double(inter) / double(expect) : (seen.empty() ? 1.0 : 0.0);
    x.rc = expect ? double(std::min(good, expect)) / double(expect) : (seen.empty() ? 1.0 : 0.0);
  }
  int64_t out_of_causal = 0, cross_doc = 0, out_of_range = 0, dups = 0, fill_rows = 0, unwritten = 0,
          rows_scored = 0, tie_rows = 0;
  double ov_min = 1, ov_sum = 0, rc_min = 1, rc_sum = 0;
  std::vector<RowNote> notes;
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    const auto& x = st[ri];
    out_of_causal += x.out_of_causal;
    cross_doc += x.cross_doc;
    out_of_range += x.out_of_range;
    dups += x.dups;
    fill_rows += x.bad_fill;
    unwritten += x.unwritten;
    tie_rows += x.tie_order;
    ov_min = std::min(ov_min, x.ov);
    rc_min = std::min(rc_min, x.rc);
    ov_sum += x.ov;
    rc_sum += x.rc;
    ++rows_scored;
    if (x.ov < 1 || x.rc < 1 || x.bad || x.unwritten) {
      const int64_t r = rows[ri];
      const auto& seg = l.seg_of(r);
      notes.push_back({r, seg.doc, seg.chunk, l.pos_of(r), std::min(x.ov, x.rc)});
    }
  }
  const int64_t pad_written = region.clobbered_pad_slots(got);

  const double n = double(std::max<int64_t>(rows_scored, 1));
  const double min_recall = c.min_recall >= 0 ? c.min_recall : 1.0;
  const bool forbid_pad = c.pad_writes == PadWrites::Forbid;
  std::vector<Metric> metrics = {
          info_metric("rows_checked", double(rows_scored)),
          info_metric("overlap_min", ov_min, Headline::Yes),
          info_metric("overlap_mean", ov_sum / n, Headline::Yes),
          gated_metric("tie_aware_recall_min", rc_min, fmt::format(">= {}", min_recall), rc_min < min_recall,
                       Headline::Yes),
          info_metric("tie_aware_recall_mean", rc_sum / n),
          gated_metric("out_of_causal", double(out_of_causal), "== 0", out_of_causal > 0, Headline::Yes),
          gated_metric("cross_doc", double(cross_doc), "== 0", cross_doc > 0),
          gated_metric("out_of_range", double(out_of_range), "== 0", out_of_range > 0),
          gated_metric("duplicates", double(dups), "== 0", dups > 0),
          gated_metric("wrong_fill_rows", double(fill_rows), "== 0", fill_rows > 0),
          gated_metric("unwritten_rows", double(unwritten), "== 0", unwritten > 0),
          gated_metric("clobbered_pad_slots", double(pad_written), forbid_pad ? "== 0" : "", pad_written > 0),
  };
  if (c.ties == Ties::Strict)
    metrics.push_back(gated_metric("tie_order_rows", double(tie_rows), "== 0", tie_rows > 0));
  return build_verdict(std::move(metrics), std::move(notes), WorseIs::Lowest);
}

// Per thread, a row's sets (seen, in_ref: hash nodes of the returned and the reference's keys) and its
// lists (to_score, listed). Counted in one part with the reference's row-block scratch, as a refusal over
// --max-mem names it; the SDPA comparator's rows are the reference stage's (sdpa_truth).
std::vector<ScratchBytes> compare_scratch_bytes(const Layout& l) {
  if (l.c.op != Op::Indexer) return {};
  const double K = l.c.topk;
  return {{"the reference's per-thread scratch", 2 * K * 64 + 4 * K, "topk"}};
}

bool comparator_reads_reference(const Case& c) { return c.op == Op::Indexer; }

Verdict compare(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref) {
  if (l.c.op == Op::Indexer) return l.c.pass == Pass::Bwd ? compare_indexer_bwd(l, in, got, ref) : compare_indexer(l, in, got, ref);
  return l.c.pass == Pass::Bwd ? compare_sdpa_bwd(l, in, got, ref) : compare_sdpa(l, in, got, ref);
}

}  // namespace ao
