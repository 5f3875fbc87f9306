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
#include "prepared.h"
#include "attn_oracle/compare/discrimination.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/reference/reference.h"
#include "attn_oracle/compare/tolerance.h"

namespace ao {

namespace {

// The prepared half: the K/V rows' owners and the largest key (the score tolerance's scale); the
// reference's top-k is the yardstick (its exact answer).
class IndexerJudgement final : public PreparedJudgement {
 public:
  IndexerJudgement(const Layout& l, const Inputs& in, const Outputs& ref)
      : l_(l), in_(in), ref_(ref), kv_doc_(size_t(l.kv_rows), -1), kmax_(max_abs_key(l, in)), region_(l) {
    for (size_t b = 0; b < l.docs.size(); ++b)
      for (int64_t s = 0; s < l.docs[b].kv_len; ++s) kv_doc_[size_t(l.docs[b].kv_off + s)] = int32_t(b);
  }
  Verdict judge(const Outputs& got) const override { return judge_rows(got, false); }
  Verdict judge_until_failure(const Outputs& got) const override { return judge_rows(got, true); }
  const Outputs& exact() const override { return ref_; }

 private:
  const Layout& l_;
  const Inputs& in_;
  const Outputs& ref_;
  std::vector<int32_t> kv_doc_;  // owner document of each KV row (-1: pad slot)
  const double kmax_;
  const JudgedRegion region_;
  Verdict judge_rows(const Outputs& got, bool until_failure) const;
};

Verdict IndexerJudgement::judge_rows(const Outputs& got, bool until_failure) const {
  const Layout& l = l_;
  const Inputs& in = in_;
  const Outputs& ref = ref_;
  const Case& c = l.c;
  const size_t K = size_t(c.topk);
  const std::vector<int32_t>& kv_doc = kv_doc_;
  const double kmax = kmax_;

  // Per-row judgement; rows are independent, so they run in parallel and are summed in row order.
  struct RowStats {
    int64_t out_of_causal = 0, cross_doc = 0, out_of_range = 0, dups = 0;
    bool unwritten = false, bad_fill = false, bad = false, tie_order = false;
    double ov = 1, rc = 1;
  };
  const JudgedRegion& region = region_;
  const auto& all_rows = region.value_rows();
  std::vector<RowStats> st(all_rows.size());
  // Until a failure: the rows in blocks, the metrics over the blocks judged (a synthetic answer of the
  // discrimination check fails on its first rows; its later rows would cost a whole judgement more).
  const size_t block = until_failure ? 256 : std::max<size_t>(all_rows.size(), 1);
  size_t judged = 0;
  for (size_t b0 = 0; b0 < all_rows.size(); b0 += block) {
    const size_t b1 = std::min(all_rows.size(), b0 + block);
#pragma omp parallel for schedule(dynamic, 16) num_threads(omp_team_size())
  for (size_t ri = b0; ri < b1; ++ri) {
    const int64_t r = all_rows[ri];
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
    judged = b1;
    const double min_recall = c.min_recall >= 0 ? c.min_recall : 1.0;
    if (until_failure && std::any_of(st.begin() + long(b0), st.begin() + long(b1), [&](const RowStats& x) {
          return x.bad || x.unwritten || x.rc < min_recall;
        }))
      break;
  }
  const std::vector<int64_t> rows(all_rows.begin(), all_rows.begin() + long(judged));
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

}  // namespace

Verdict compare_indexer(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref) {
  return IndexerJudgement(l, in, ref).judge(got);
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

std::unique_ptr<PreparedJudgement> prepare_judgement(const Layout& l, const Inputs& in, const Outputs& ref) {
  if (l.c.op == Op::Indexer)
    return l.c.pass == Pass::Bwd ? prepare_indexer_bwd_judgement(l, in) : std::make_unique<IndexerJudgement>(l, in, ref);
  return l.c.pass == Pass::Bwd ? prepare_sdpa_bwd_judgement(l, in) : prepare_sdpa_judgement(l, in);
}

Verdict compare(const Layout& l, const Inputs& in, const Outputs& got, const Outputs& ref) {
  const auto j = prepare_judgement(l, in, ref);
  return with_gate_checks(j->judge(got), check_gates(l, *j));
}

}  // namespace ao
