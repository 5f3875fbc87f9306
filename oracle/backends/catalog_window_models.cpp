// Catalog bug models of windows, alignment, context parallelism and offsets (defect catalog
// sections B, C, F; issue 15): each a Quirks setting on the reference path (reference_plan.h
// row_key_ranges) or an output transform after it.
#include <algorithm>

#include "attn_oracle/backends/bug_models.h"

namespace ao {

namespace {

// Moves the rows of one result buffer that hold a valid token's result, in buffer order, to the
// buffer's first rows; the rows they leave keep the sentinel (unwritten) unless a moved row lands there.
template <class T>
void compact_to_prefix(const Layout& l, RowBuffer b, std::vector<T>& data, size_t width, T unwritten) {
  std::vector<int64_t> rows;
  for_each_valid_row(l, b, [&](int64_t, int64_t br) { rows.push_back(br); });
  std::sort(rows.begin(), rows.end());
  std::vector<T> moved(rows.size() * width);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(data.begin() + long(size_t(rows[i]) * width), width, moved.begin() + long(i * width));
  for (int64_t r : rows) std::fill_n(data.begin() + long(size_t(r) * width), width, unwritten);
  std::copy(moved.begin(), moved.end(), data.begin());
}

// NeMo Automodel PR #3640: the kernel reads the padded inputs correctly, but its results are taken
// as `local[:n_real]`, as if the real tokens were a prefix of the buffer: with interior padding
// (pad slots between documents, or a CP chunk's pad rows) every later row lands too early.
void output_prefix(const Layout& l, const Inputs&, Outputs& out) {
  if (l.c.op == Op::Indexer) {
    const size_t K = size_t(l.c.topk);
    compact_to_prefix(l, RowBuffer::Q, out.topk, K, kSentinelIndex);
    compact_to_prefix(l, RowBuffer::Q, out.scores, K, sentinel_float());
  } else {
    compact_to_prefix(l, RowBuffer::O, out.o, size_t(l.c.hq) * size_t(l.c.dim_v), sentinel_float());
    compact_to_prefix(l, RowBuffer::Stats, out.lse, size_t(l.c.hq), sentinel_float());
  }
}

Quirks quirks(void (*set)(Quirks&)) {
  Quirks q;
  set(q);
  return q;
}

}  // namespace

std::vector<BugModel> catalog_window_models() {
  using K = DefectClass;
  const std::vector<std::string> sdpa_values = {"tol_violations", "rel_l2_err", "lse_max_err"};
  // Models that leave rows with no key where the reference has some: LSE -inf also counts as non-finite.
  const std::vector<std::string> sdpa_empty = {"tol_violations", "rel_l2_err", "lse_max_err", "nonfinite_valid"};
  return {
      {"cp-drops-window", "cp > 1: the sliding window is dropped, every row attends its full causal past", false,
       true, quirks([](Quirks& q) { q.cp_drops_window = true; }), {}, "[14]", "accelerate PR #4177",
       K::WindowAlignment, sdpa_values},
      {"cp-local-keys",
       "cp > 1 run as cp = 1 (CP group None): a rank attends only the keys at its own chunks' positions", true,
       true, quirks([](Quirks& q) { q.cp_local_keys = true; }), {}, "[15]", "Megatron-Bridge #2667",
       K::BoundaryMetadata,
       {"tie_aware_recall_min", "wrong_fill_rows", "tol_violations", "rel_l2_err", "lse_max_err"}},
      {"output-prefix",
       "results stored at packed prefix rows (local[:n_real]) while inputs are read padded: interior padding",
       true, true, Quirks{}, output_prefix, "[16]", "NeMo Automodel PR #3640", K::BoundaryMetadata,
       {"unwritten_rows", "clobbered_pad_slots", "cross_doc", "out_of_causal", "wrong_fill_rows", "tie_aware_recall_min",
        "tol_violations", "rel_l2_err", "lse_max_err"}},
      {"window-left-only",
       "a two-sided band (window_right > 0) forwarded with its left bound only: every query attends its whole future",
       false, true, quirks([](Quirks& q) { q.window_left_only = true; }), {}, "[18]", "jax PR #39576",
       K::WindowAlignment, sdpa_values},
      {"sentinel-widen",
       "any window (left, right) with left + right < 0 widened to full attention: (-1, 0) becomes non-causal", false,
       true, quirks([](Quirks& q) { q.sentinel_widen = true; }), {}, "[19]", "FlashAttention PR #2490 (before)",
       K::WindowAlignment, sdpa_values},
      {"sentinel-empty-band",
       "the unbounded sentinel -1 used as a number: (-1, 0) is the empty band [p+1, p] (O = 0, LSE = -inf)", false,
       true, quirks([](Quirks& q) { q.sentinel_empty_band = true; }), {}, "[19]",
       "TransformerEngine #3528 (PR #3532)", K::WindowAlignment, sdpa_empty},
      {"clamp-right-before-shift",
       "bottom-right, q_len > kv_len: window_right > max_seqlen_kv clamped to it before the shift (q_len - kv_len "
       "keys dropped on the right)",
       false, true, quirks([](Quirks& q) { q.clamp_right_before_shift = true; }), {}, "[20]",
       "FlashAttention #895", K::WindowAlignment, sdpa_empty},
      {"topleft-for-bottomright",
       "mask=bottomright built as top-left when q_len != kv_len (shift 0, CP chunk offsets kept)", true, true,
       quirks([](Quirks& q) { q.topleft_for_bottomright = true; }), {}, "[21]",
       "cutlass #2336 (also onnxruntime PR #28958)", K::WindowAlignment,
       {"tie_aware_recall_min", "out_of_causal", "wrong_fill_rows", "tol_violations", "rel_l2_err", "lse_max_err"}},
      {"decode-tile-unmasked",
       "mask=none, q_len = 1: key lanes past kv_len up to the end of the last 256-wide key tile enter the softmax",
       false, true, quirks([](Quirks& q) { q.decode_tile = 256; }), {}, "[22]", "flashinfer #3716", K::PadLanes,
       {"nonfinite_valid", "tol_violations", "rel_l2_err", "lse_max_err"}},
      {"batch-stride-max-seqlen",
       "document b's keys addressed at b * max_seqlen_kv (a batch stride from the capacity), not its offset", false,
       true, quirks([](Quirks& q) { q.batch_stride_max_seqlen = true; }), {}, "[38]", "pytorch #139462",
       K::BoundaryMetadata, sdpa_empty},
  };
}

}  // namespace ao
