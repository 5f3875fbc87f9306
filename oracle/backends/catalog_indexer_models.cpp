// Indexer bug models re-creating the defect catalog's section A (docs/defect-catalog.md): public
// silent-wrong-result defects of DSA top-k indexers. Each is a Quirks setting on the reference path
// (reference_plan.h row_key_ranges, reference_indexer.cpp) or an output transform after the exact
// reference run.
#include <algorithm>
#include <limits>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/compare/compare.h"

namespace ao {

namespace {

// The allowed doc-key range [lo, hi) of a valid row, as the reference and the comparator see it.
void row_range(const Layout& l, int64_t r, int64_t& lo, int64_t& hi) { l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi); }

// [3] sglang PR #38829: lanes outside the row hold the sentinel -FLT_MAX, which outranks the masked -inf
// lanes: a row with n < k allowed keys returns its n keys, then the lane just past the row (buffer row
// kv_off + hi) with score -FLT_MAX, and never writes slots n+1..k-1.
void sentinel_lanes(const Layout& l, const Inputs&, Outputs& out) {
  const size_t K = size_t(l.c.topk);
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    int64_t lo, hi;
    row_range(l, r, lo, hi);
    const size_t n = size_t(hi - lo);
    if (n >= K) continue;
    int32_t* idx = out.topk.data() + size_t(r) * K;
    float* sc = out.scores.data() + size_t(r) * K;
    idx[n] = int32_t(l.docs[size_t(l.seg_of(r).doc)].kv_off + hi);
    sc[n] = -std::numeric_limits<float>::max();
    for (size_t e = n + 1; e < K; ++e) idx[e] = kSentinelIndex, sc[e] = sentinel_float();
  }
}

// [4] cudnn-frontend #446 / PR #410, and cuDNN FE 1.32 `indexer_top_k_wrapper` (own measurement): scores
// below -65504 fall into the fp16 -inf bin together with the key tile's masked lanes, which the bin
// returns first: when fewer than k allowed keys score >= -65504, the slots after them get the masked
// lanes hi, hi+1, ... of the row (score -inf) instead of the low-scoring allowed keys or -1.
void masked_key_fill(const Layout& l, const Inputs&, Outputs& out) {
  const size_t K = size_t(l.c.topk);
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    int64_t lo, hi;
    row_range(l, r, lo, hi);
    int32_t* idx = out.topk.data() + size_t(r) * K;
    float* sc = out.scores.data() + size_t(r) * K;
    size_t m = 0;  // the reference's list is best first: its finite-bin keys lead
    while (m < K && idx[m] >= 0 && sc[m] >= -65504.f) ++m;
    const int64_t lane0 = l.docs[size_t(l.seg_of(r).doc)].kv_off + hi;
    for (size_t e = m; e < K; ++e) {
      idx[e] = int32_t(lane0 + int64_t(e - m));
      sc[e] = -std::numeric_limits<float>::infinity();
    }
  }
}

// vllm #51782 / PR #55122 (catalog conventions): a top-k that keeps tied keys in the order its threads
// delivered them, here descending index: each run of exactly tied keys in a row's list comes back
// reversed. A valid set (ties=set passes); ties=strict asks for ascending order among tied keys.
void tie_arrival_order(const Layout& l, const Inputs& in, Outputs& out) {
  const size_t K = size_t(l.c.topk);
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    int32_t* idx = out.topk.data() + size_t(r) * K;
    float* sc = out.scores.data() + size_t(r) * K;
    std::vector<double> ex(K);
    size_t n = 0;
    while (n < K && idx[n] >= 0) ex[n] = exact_indexer_score(l, in, r, idx[n]), ++n;
    for (size_t i = 0; i < n;) {
      size_t j = i + 1;
      while (j < n && ex[j] == ex[i]) ++j;
      std::reverse(idx + i, idx + j);
      std::reverse(sc + i, sc + j);
      i = j;
    }
  }
}

}  // namespace

std::vector<BugModel> catalog_indexer_models() {
  using K = DefectClass;
  auto quirk = [](auto set) {
    Quirks q;
    set(q);
    return q;
  };
  return {
      {"row-start-ignored",
       "[1] the row's key start never received: ranks buffer rows [0, kv_off + hi) of the packed key axis "
       "(earlier documents and pad slots) in multi-document packs",
       true, false, quirk([](Quirks& q) { q.row_start_ignored = true; }), {}, "[1]",
       "sglang #11629 (PRs #12582/#12583)", K::BoundaryMetadata, {"cross_doc", "tie_aware_recall_min"}},
      {"long-row-start",
       "[2] rows with more than 4096 allowed keys take a long-row path that ranks buffer rows [0, n) "
       "(rowStart ignored): wrong for documents not at buffer row 0",
       true, false, quirk([](Quirks& q) { q.long_row_keys = 4096; }), {}, "[2]", "ROCm/aiter PR #2901",
       K::BoundaryMetadata, {"cross_doc", "tie_aware_recall_min"}},
      {"sentinel-lanes",
       "[3] rows with n < k allowed keys: slot n gets the lane past the row (kv_off + hi, score -FLT_MAX), "
       "slots n+1.. never written",
       true, false, Quirks{}, sentinel_lanes, "[3]", "sglang PR #38829", K::PadLanes,
       {"unwritten_rows", "out_of_causal", "out_of_range", "wrong_fill_rows"}},
      {"unaligned-start",
       "[3] the row's key start aligned down to 16 buffer rows: an unaligned ragged start also ranks the "
       "previous request's last keys",
       true, false, quirk([](Quirks& q) { q.start_align = 16; }), {}, "[3]", "sglang PR #38829",
       K::BoundaryMetadata, {"cross_doc", "tie_aware_recall_min"}},
      {"masked-key-fill",
       "[4] fewer than k allowed keys scoring >= -65504 (short rows, very negative scores): the remaining "
       "slots get masked key lanes hi, hi+1, ... instead of the low-scoring keys or -1",
       true, false, Quirks{}, masked_key_fill, "[4]",
       "cudnn-frontend #446 / PR #410; cuDNN FE 1.32 indexer_top_k_wrapper (own measurement)", K::PadLanes,
       {"out_of_causal", "wrong_fill_rows", "out_of_range"}},
      {"compressed-tail-uninit",
       "[8] ratio > 1, a document with q_len = 1: the last allowed compressed key's K-gather workspace row is "
       "never written (read as zeros: score 0)",
       true, false, quirk([](Quirks& q) { q.compressed_tail_zero = true; }), {}, "[8]", "vllm PR #51252",
       K::PadLanes, {"tie_aware_recall_min"}},
      {"swizzle-small-dim",
       "[11] K tiles read through a 128-byte XOR swizzle that was never written: wrong only when a K row "
       "(dim x element bytes) is shorter than 128 bytes (bf16 dim 32)",
       true, false, quirk([](Quirks& q) { q.swizzle_bytes = 128; }), {}, "[11]",
       "DeepGEMM #433 (also #379, #434, #392)", K::Generic, {"tie_aware_recall_min"}},
      {"chunk-keys-only",
       "[9] chunked/suffix prefill: allowed end min(floor((p+1)/ratio), floor(q_len/ratio)) instead of "
       "floor((p+1)/ratio): only the current chunk's keys (queries not starting at position 0)",
       true, false, quirk([](Quirks& q) { q.chunk_keys_only = true; }), {}, "[9]", "pypto-lib #592",
       K::BoundaryMetadata, {"tie_aware_recall_min", "wrong_fill_rows"}},
      {"radix-bin-overflow",
       "radix top-k: the k-th score's bin (top 8 bits of its fp16 key) keeps at most 2048 keys, in index "
       "order; later keys of that bin are dropped",
       true, false, quirk([](Quirks& q) { q.radix_bin_cap = 2048; }), {}, "",
       "defect catalog A, also seen: fixed-size candidate buffers per radix bin", K::TopkBuffers,
       {"tie_aware_recall_min"}},
      {"tie-arrival-order",
       "tied keys returned in thread-arrival order (descending index): a valid set, wrong under ties=strict",
       true, false, Quirks{}, tie_arrival_order, "", "vllm #51782 / PR #55122 (catalog conventions: top-k ties)",
       K::TopkBuffers, {"tie_order_rows"}},
  };
}

}  // namespace ao
