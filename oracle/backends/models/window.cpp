// Catalog bug models of windows, alignment, context parallelism and offsets (defect catalog
// sections B, C, F; docs/defect-catalog.md): each overrides the reference's key_ranges seam (which keys a row sees) or
// transforms the stored result.
#include <algorithm>

#include "models.h"

namespace ao::models {

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

// A kernel that reads the window bounds (left, right) other than the case gives them: the band is
// recomputed from the bounds as read (sdpa_window_band) where they differ.
struct WindowBoundsRead : ReferenceSeams {
  virtual void read_bounds(const Layout& l, int64_t& left, int64_t& right) const = 0;
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    const Case& c = l.c;
    if (c.op != Op::Sdpa || c.mask == MaskKind::None) return v;
    int64_t left = c.window, right = c.window_right;
    read_bounds(l, left, right);
    if (left == c.window && right == c.window_right) return v;
    sdpa_window_band(c.window_convention, l.docs[size_t(l.seg_of(r).doc)].kv_len, l.pos_of(r), left, right, v[0].lo,
                     v[0].hi);
    return v;
  }
};

// accelerate PR #4177: under CP the band's mask is dropped and is_causal set.
struct CpDropsWindow : WindowBoundsRead {
  void read_bounds(const Layout& l, int64_t& left, int64_t& right) const override {
    if (l.is_cp()) left = -1, right = 0;
  }
};
// jax PR #39576: only the left bound forwarded.
struct WindowLeftOnly : WindowBoundsRead {
  void read_bounds(const Layout&, int64_t&, int64_t& right) const override {
    if (right > 0) right = -1;
  }
};
// FlashAttention PR #2490 (before): any negative sum read as "full".
struct SentinelWiden : WindowBoundsRead {
  void read_bounds(const Layout&, int64_t& left, int64_t& right) const override {
    if (left + right < 0) left = right = -1;
  }
};
// FlashAttention #895: the right bound clamped to max_seqlen_kv after the position was already shifted.
struct ClampRightBeforeShift : WindowBoundsRead {
  void read_bounds(const Layout& l, int64_t&, int64_t& right) const override {
    if (right > l.max_seqlen_kv) right = l.max_seqlen_kv;
  }
};

// TransformerEngine #3528: the unbounded sentinel -1 used as a number (left -1: s >= p + 1 (fa) /
// s > p + 1 (cudnn); right -1: s <= p - 1), where either bound is -1.
struct SentinelEmptyBand : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    const Case& c = l.c;
    if (c.op != Op::Sdpa || c.mask == MaskKind::None || (c.window != -1 && c.window_right != -1)) return v;
    const bool fa = c.window_convention == WindowConvention::Fa;
    const int64_t kv = l.docs[size_t(l.seg_of(r).doc)].kv_len, p = l.pos_of(r);
    v[0].hi = std::clamp<int64_t>(p + 1 + c.window_right, 0, kv);
    v[0].lo = c.window == 0 && !fa ? 0 : std::clamp<int64_t>(fa ? p - c.window : p - c.window + 1, 0, v[0].hi);
    return v;
  }
};

// cutlass #2336: mask=bottomright built as top-left (shift 0), the CP chunk's token offset kept.
struct TopLeftForBottomRight : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    if (l.c.mask != MaskKind::BottomRight || l.c.start_pos >= 0) return ReferenceSeams::key_ranges(l, r);
    const auto& seg = l.seg_of(r);
    const auto k = exact_row_keys(l, r, seg.tok0 + (r - seg.row0));
    return {{k.doc.kv_off, k.lo, k.hi}};
  }
};

// flashinfer #3716: mask=none, q_len = 1: the key lanes up to the end of the last 256-wide tile enter.
struct DecodeTileUnmasked : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    const auto& d = l.docs[size_t(l.seg_of(r).doc)];
    if (l.c.mask == MaskKind::None && d.q_len == 1) v[0].hi = (d.kv_len + 255) / 256 * 256;
    return v;
  }
};

// pytorch #139462: document b's keys at b * max_seqlen_kv (a batch stride from the capacity).
struct BatchStrideMaxSeqlen : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    v[0].base = int64_t(l.seg_of(r).doc) * l.max_seqlen_kv;
    return v;
  }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Megatron-Bridge #2667: cp > 1 run as cp = 1: one range per segment of this document on this rank,
// the keys its own tokens would produce (key s from token s * ratio), as a kernel that never
// all-gathered K/V sees them.
struct CpLocalKeys : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    if (!l.is_cp()) return v;
    const KeyRange k = v[0];
    v.clear();
    for (const auto& g : l.segments) {
      if (g.doc != l.seg_of(r).doc) continue;
      const int64_t a = std::max(k.lo, ceil_div(g.pos0, l.c.ratio));
      v.push_back({k.base, a, std::max(a, std::min(k.hi, ceil_div(g.pos0 + g.rows, l.c.ratio)))});
    }
    return v;
  }
};

}  // namespace

std::vector<BugModel> window_models() {
  using K = DefectClass;
  const std::vector<std::string> sdpa_values = {"tol_violations", "rel_l2_err", "lse_max_err"};
  // Models that leave rows with no key where the reference has some: LSE -inf also counts as non-finite.
  const std::vector<std::string> sdpa_empty = {"tol_violations", "rel_l2_err", "lse_max_err", "nonfinite_valid"};
  return {
      {.name = "cp-drops-window",
       .what = "cp > 1: the sliding window is dropped, every row attends its full causal past", .indexer = false,
       .sdpa = true, .seams = seams<CpDropsWindow>(), .catalog = "[14]", .source = "accelerate PR #4177",
       .defect_class = K::WindowAlignment, .catches = sdpa_values,
       // a sliding-window layer under CP becomes full causal
       .triggers = {{"op=sdpa docs=256 cp=4 rank=1 window=16", {"tol_violations", "lse_max_err"}},
                    {"op=sdpa docs=256 cp=4 rank=2 window=8 window_right=4 window_convention=fa", {"tol_violations"}}},
       .outside = {{"op=sdpa docs=256 window=16", "no CP"},
                   {"op=sdpa docs=256 cp=4 rank=1", "CP, no window"},
                   {"op=sdpa docs=256 cp=4 rank=1 window=-1 window_right=0", "CP, the causal band"}}},
      {.name = "cp-local-keys",
       .what = "cp > 1 run as cp = 1 (CP group None): a rank attends only the keys at its own chunks' positions",
       .indexer = true, .sdpa = true, .seams = seams<CpLocalKeys>(), .catalog = "[15]",
       .source = "Megatron-Bridge #2667", .defect_class = K::BoundaryMetadata,
       .catches = {"tie_aware_recall_min", "wrong_fill_rows", "tol_violations", "rel_l2_err", "lse_max_err"},
       // a rank attends only the keys of its own two zigzag chunks
       .triggers = {{"op=indexer docs=1024 cp=4 rank=1 topk=32", {"tie_aware_recall_min"}},
                    {"op=sdpa docs=256 cp=4 rank=1", {"tol_violations", "lse_max_err"}}},
       .outside = {{"op=sdpa docs=100,37 window=8", "no CP"}, {"op=indexer docs=300 topk=32", "no CP"}}},
      {.name = "output-prefix",
       .what = "results stored at packed prefix rows (local[:n_real]) while inputs are read padded: interior padding",
       .indexer = true, .sdpa = true, .transform = output_prefix, .catalog = "[16]",
       .source = "NeMo Automodel PR #3640", .defect_class = K::BoundaryMetadata,
       .catches = {"unwritten_rows", "clobbered_pad_slots", "cross_doc", "out_of_causal", "wrong_fill_rows",
                   "tie_aware_recall_min", "tol_violations", "rel_l2_err", "lse_max_err"},
       .triggers = {{"op=sdpa lens=3,2,4 padded_offsets=0,4,8,13", {"clobbered_pad_slots", "unwritten_rows", "tol_violations"}},
                    {"op=indexer docs=100,37,200 pad=5,0,11 tail=40 topk=48", {"unwritten_rows"}},
                    {"op=indexer docs=70,200 pad=58,56 cp=4 rank=3 topk=16", {"cross_doc"}}},
       .outside = {{"op=sdpa docs=100,37 hq=8 hkv=2", "packed: the real tokens are a prefix"},
                   {"op=sdpa docs=100,37 tail=30", "capacity past the end is not interior"},
                   {"op=indexer docs=1024 cp=4 rank=1 topk=32", "CP chunks without pad rows"}}},
      {.name = "window-left-only",
       .what = "a two-sided band (window_right > 0) forwarded with its left bound only: every query attends its whole future",
       .indexer = false, .sdpa = true, .seams = seams<WindowLeftOnly>(), .catalog = "[18]", .source = "jax PR #39576",
       .defect_class = K::WindowAlignment, .catches = sdpa_values,
       .triggers = {{"op=sdpa docs=200 window=16 window_right=8", {"tol_violations"}},
                    {"op=sdpa docs=100,37 window=-1 window_right=4 window_convention=fa", {"lse_max_err"}}},
       .outside = {{"op=sdpa docs=200 window=16", "one-sided"},
                   {"op=sdpa docs=200 window=16 window_right=-1", "already unbounded on the right"}}},
      {.name = "sentinel-widen",
       .what = "any window (left, right) with left + right < 0 widened to full attention: (-1, 0) becomes non-causal",
       .indexer = false, .sdpa = true, .seams = seams<SentinelWiden>(), .catalog = "[19]",
       .source = "FlashAttention PR #2490 (before)", .defect_class = K::WindowAlignment, .catches = sdpa_values,
       // (-1, 0), the causal encoding, widened to full (non-causal) attention
       .triggers = {{"op=sdpa docs=200 window=-1 window_right=0 window_convention=fa", {"tol_violations"}},
                    {"op=sdpa docs=100,37 window=-1 window_right=0", {"lse_max_err"}}},
       .outside = {{"op=sdpa docs=200 window=16 window_right=4 window_convention=fa", "no sentinel"},
                   {"op=sdpa docs=200 window=-1 window_right=-1", "full attention already"},
                   {"op=sdpa docs=200 window=-1 window_right=3", "sum >= 0"}}},
      {.name = "sentinel-empty-band",
       .what = "the unbounded sentinel -1 used as a number: (-1, 0) is the empty band [p+1, p] (O = 0, LSE = -inf)",
       .indexer = false, .sdpa = true, .seams = seams<SentinelEmptyBand>(), .catalog = "[19]",
       .source = "TransformerEngine #3528 (PR #3532)", .defect_class = K::WindowAlignment, .catches = sdpa_empty,
       .triggers = {{"op=sdpa docs=200 window=-1 window_right=0 window_convention=fa", {"lse_max_err"}},
                    {"op=sdpa docs=100,37 window=16 window_right=-1", {"tol_violations"}}},
       .outside = {{"op=sdpa docs=200 window=16 window_right=4 window_convention=fa", "no sentinel"},
                   {"op=sdpa docs=100,37", "no window at all"}}},
      {.name = "clamp-right-before-shift",
       .what = "bottom-right, q_len > kv_len: window_right > max_seqlen_kv clamped to it before the shift (q_len - kv_len "
               "keys dropped on the right)",
       .indexer = false, .sdpa = true, .seams = seams<ClampRightBeforeShift>(), .catalog = "[20]",
       .source = "FlashAttention #895", .defect_class = K::WindowAlignment, .catches = sdpa_empty,
       // the example: the right bound clamped to max_seqlen_kv, then shifted by kv_len - q_len
       .triggers = {{"op=sdpa q_lens=100 kv_lens=40 mask=bottomright window_right=50", {"tol_violations"}},
                    {"op=sdpa q_lens=200,30 kv_lens=40,64 mask=bottomright window=24 window_right=200 max_seqlen_kv=128",
                     {"lse_max_err"}}},
       .outside = {{"op=sdpa q_lens=40 kv_lens=100 mask=bottomright window_right=200", "q < kv"},
                   {"op=sdpa q_lens=100 kv_lens=40 mask=topleft window_right=50", "no shift"},
                   {"op=sdpa q_lens=100 kv_lens=40 mask=bottomright window_right=30", "right < max"}}},
      {.name = "topleft-for-bottomright",
       .what = "mask=bottomright built as top-left when q_len != kv_len (shift 0, CP chunk offsets kept)",
       .indexer = true, .sdpa = true, .seams = seams<TopLeftForBottomRight>(), .catalog = "[21]",
       .source = "cutlass #2336 (also onnxruntime PR #28958)", .defect_class = K::WindowAlignment,
       .catches = {"tie_aware_recall_min", "out_of_causal", "wrong_fill_rows", "tol_violations", "rel_l2_err",
                   "lse_max_err"},
       // cutlass #2336: q = 3, k = 128
       .triggers = {{"op=sdpa q_lens=3 kv_lens=128 mask=bottomright", {"tol_violations"}},
                    {"op=sdpa q_lens=20,7 kv_lens=50,30 mask=bottomright", {"lse_max_err"}},
                    {"op=indexer q_lens=64 kv_lens=256 topk=16", {"tie_aware_recall_min"}},
                    {"op=indexer q_lens=256 kv_lens=128 topk=16", {"out_of_causal"}}},
       .outside = {{"op=sdpa docs=50,30 mask=bottomright", "q_len == kv_len"},
                   {"op=sdpa q_lens=20,7 kv_lens=50,30 mask=topleft", "top-left"},
                   {"op=indexer docs=1024 cp=4 rank=3 topk=32", "bottom-right, q == kv, CP"}}},
      {.name = "decode-tile-unmasked",
       .what = "mask=none, q_len = 1: key lanes past kv_len up to the end of the last 256-wide key tile enter the softmax",
       .indexer = false, .sdpa = true, .seams = seams<DecodeTileUnmasked>(), .catalog = "[22]",
       .source = "flashinfer #3716", .defect_class = K::PadLanes,
       .catches = {"nonfinite_valid", "tol_violations", "rel_l2_err", "lse_max_err"},
       // non-causal decode: lanes past kv_len in the last 256-wide tile (NaN pad slots, the next document)
       .triggers = {{"op=sdpa q_lens=1,1 kv_lens=40,17 mask=none tail=256 poison=nan", {"nonfinite_valid"}},
                    {"op=sdpa q_lens=1,1 kv_lens=40,17 mask=none", {"tol_violations"}},
                    {"op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64",
                     {"nonfinite_valid"}},
                    {"op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64 poison=none",
                     {"lse_max_err"}},
                    {"op=sdpa q_lens=1*32 kv_lens=4000*32 kv_pad=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16", {"nonfinite_valid"}, CaseScale::Production}},
       .outside = {{"op=sdpa q_lens=1,1 kv_lens=40,17 mask=bottomright tail=256", "causal"},
                   {"op=sdpa q_lens=2,2 kv_lens=40,17 mask=none tail=256", "not decode"},
                   {"op=sdpa q_lens=1,1 kv_lens=256,512 mask=none tail=256", "whole tiles"},
                   {"op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=bottomright hq=4 hkv=2 dim=64", "causal"},
                   {"op=sdpa q_lens=40,3 kv_lens=90,50 kv_pad=5 tail=64 mask=none hq=2 dim=32", "not decode"},
                   {"op=sdpa q_lens=1*32 kv_lens=4096*32 kv_pad=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16", "whole tiles", CaseScale::Production}}},
      {.name = "batch-stride-max-seqlen",
       .what = "document b's keys addressed at b * max_seqlen_kv (a batch stride from the capacity), not its offset",
       .indexer = false, .sdpa = true, .seams = seams<BatchStrideMaxSeqlen>(), .catalog = "[38]",
       .source = "pytorch #139462", .defect_class = K::BoundaryMetadata, .catches = sdpa_empty,
       // documents shorter than the longest one before the last
       .triggers = {{"op=sdpa docs=37,100", {"tol_violations"}},
                    {"op=sdpa docs=100,37,90", {"lse_max_err"}},
                    // pytorch #139462's case: capacity 256 declared, 128 keys each, B = 2: document 1 reads nothing
                    {"op=sdpa docs=128,128 max_seqlen_kv=256", {"lse_max_err"}}},
       .outside = {{"op=sdpa docs=100,100,100", "equal lengths: b * max = the offset"},
                   {"op=sdpa docs=37 tail=40", "one document"}}},
  };
}

}  // namespace ao::models
