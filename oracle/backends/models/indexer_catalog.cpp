// Indexer bug models re-creating the defect catalog's section A (docs/defect-catalog.md): public silent-wrong-result defects of
// DSA top-k indexers. Each overrides a seam of the reference (which keys a row sees, how a K tile is
// read, which candidates the top-k keeps) or transforms the result after the exact reference run.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attn_oracle/case/dtype.h"
#include "attn_oracle/compare/compare.h"
#include "models.h"

namespace ao::models {

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

// A row's key start received wrong, expressed on the document's base (lo < 0 reaches earlier buffer
// rows) so that every row of a block keeps one base.
struct KeyStart : ReferenceSeams {
  virtual void read_start(const Layout& l, const DocLayout& d, KeyRange& k) const = 0;
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    read_start(l, l.docs[size_t(l.seg_of(r).doc)], v[0]);
    return v;
  }
};
// [1] sglang #11629: keys ranked from buffer row 0 up to the row's end.
struct RowStartIgnored : KeyStart {
  void read_start(const Layout&, const DocLayout&, KeyRange& k) const override { k.lo = -k.base; }
};
// [2] ROCm/aiter PR #2901: rows with more than 4096 allowed keys rank buffer rows [0, n).
struct LongRowStart : KeyStart {
  void read_start(const Layout&, const DocLayout&, KeyRange& k) const override {
    if (k.hi - k.lo <= 4096) return;
    k.hi -= k.lo + k.base;
    k.lo = -k.base;
  }
};
// [3] sglang PR #38829: the row's key start aligned down to 16 buffer rows.
struct UnalignedStart : KeyStart {
  void read_start(const Layout&, const DocLayout&, KeyRange& k) const override { k.lo -= k.base % 16; }
};
// [9] pypto-lib #592: the allowed end also capped at floor(q_len / ratio): the current chunk's keys only.
struct ChunkKeysOnly : KeyStart {
  void read_start(const Layout& l, const DocLayout& d, KeyRange& k) const override {
    k.hi = std::min(k.hi, d.q_len / l.c.ratio);
  }
};

// [8] vllm PR #51252: ratio > 1, a document with q_len = 1: the last allowed compressed key's K-gather
// workspace row is never written (read as zeros).
struct CompressedTailZero : ReferenceSeams {
  int64_t zeroed_key(const Layout& l, int64_t r, const KeyRange& last) const override {
    if (l.c.ratio > 1 && l.docs[size_t(l.seg_of(r).doc)].q_len == 1 && last.hi > last.lo) return last.base + last.hi - 1;
    return -1;
  }
};

// [11] DeepGEMM #433: K tiles read through a 128-byte XOR swizzle that was never written: byte a of
// the tile is read from the 16-byte chunk (a/16) ^ (line % chunks) of its 128-byte line; only K rows
// shorter than the swizzle span see it. Bytes past the keys the tile may read come back 0.
struct SwizzleSmallDim : ReferenceSeams {
  static constexpr int64_t kSwizzleBytes = 128;
  static int elem_bytes(const Layout& l) { return l.c.dtype == DType::F32 ? 4 : 2; }
  bool alters_key_reads(const Layout& l) const override { return l.c.dim * elem_bytes(l) < kSwizzleBytes; }
  void read_key_tile(const Layout& l, const Inputs& in, int doc, bool last_range, int64_t base, int64_t t0, int64_t n,
                     float* dst) const override {
    const int D = l.c.dim, eb = elem_bytes(l);
    const int64_t row_bytes = D * eb, sw = kSwizzleBytes, chunks = sw / 16;
    const int64_t limit = last_range ? l.docs[size_t(doc)].kv_len : l.kv_rows - base;
    for (int64_t e = 0; e < n; ++e)
      for (int dd = 0; dd < D; ++dd) {
        const int64_t a = std::max<int64_t>(t0 + e, 0) * row_bytes + dd * eb, line = a / sw, off = a % sw;
        const int64_t src = line * sw + ((off / 16) ^ (line % chunks)) * 16 + off % 16;
        const int64_t sk = src / row_bytes, sd = (src % row_bytes) / eb;
        dst[e * D + dd] = sk < limit ? in.k[size_t((base + sk) * D + sd)] : 0.f;
      }
  }
};

// A radix top-k whose first pass bins the scores by the top 8 bits of their fp16 order key, and keeps
// at most `cap` keys of the k-th score's bin, in index order (a fixed-size candidate buffer): removes
// the later keys of that bin from `keys` (a row's keys in index order).
template <class T>
void radix_bin_overflow(std::vector<std::pair<T, int32_t>>& keys, size_t K, int64_t cap) {
  if (keys.size() <= K) return;
  auto bin = [](T x) {
    if (std::isnan(x)) return 0u;
    const uint32_t h = f32_to_f16_bits(float(x) + 0.0f);
    return ((h & 0x8000u) ? (~h & 0xffffu) : (h | 0x8000u)) >> 8;
  };
  std::vector<size_t> hist(256, 0);
  for (const auto& k : keys) ++hist[bin(k.first)];
  uint32_t kth_bin = 255;
  for (size_t above = 0; above + hist[kth_bin] < K; --kth_bin) above += hist[kth_bin];
  int64_t kept = 0;
  std::erase_if(keys, [&](const auto& k) { return bin(k.first) == kth_bin && ++kept > cap; });
}
struct RadixBinOverflow : ReferenceSeams {
  static constexpr int64_t kBinCap = 2048;
  bool filters_candidates(const Layout&) const override { return true; }
  void filter_candidates(std::vector<std::pair<float, int32_t>>& keys, size_t k) const override {
    radix_bin_overflow(keys, k, kBinCap);
  }
  void filter_candidates(std::vector<std::pair<double, int32_t>>& keys, size_t k) const override {
    radix_bin_overflow(keys, k, kBinCap);
  }
};

}  // namespace

std::vector<BugModel> indexer_catalog_models() {
  using K = DefectClass;
  const std::string short_rows = "op=indexer docs=40,25 topk=64";  // rows with fewer than k allowed keys
  const std::string glm = "heads=32 dim=128 topk=2048 dtype=bf16 rows=64";  // a production indexer shape (GLM)
  return {
      {.name = "row-start-ignored",
       .what = "[1] the row's key start never received: ranks buffer rows [0, kv_off + hi) of the packed key axis "
               "(earlier documents and pad slots) in multi-document packs",
       .indexer = true, .sdpa = false, .seams = seams<RowStartIgnored>(), .catalog = "[1]",
       .source = "sglang #11629 (PRs #12582/#12583)", .defect_class = K::BoundaryMetadata,
       .catches = {"cross_doc", "tie_aware_recall_min"},
       .triggers = {{"op=indexer docs=100,37,200 topk=48", {"cross_doc"}}},
       .outside = {{"op=indexer docs=300 topk=32", "one document at buffer row 0"},
                   {"op=indexer docs=1024 cp=4 rank=1 topk=64", "one document at buffer row 0, CP"}}},
      {.name = "long-row-start",
       .what = "[2] rows with more than 4096 allowed keys take a long-row path that ranks buffer rows [0, n) "
               "(rowStart ignored): wrong for documents not at buffer row 0",
       .indexer = true, .sdpa = false, .seams = seams<LongRowStart>(), .catalog = "[2]",
       .source = "ROCm/aiter PR #2901", .defect_class = K::BoundaryMetadata, .catches = {"cross_doc", "tie_aware_recall_min"},
       .triggers = {{"op=indexer q_lens=16,16 kv_lens=2000,4600 topk=16", {"cross_doc"}}},
       .outside = {{"op=indexer q_lens=16,16 kv_lens=2000,4000 topk=16", "no row longer than 4096 keys"},
                   {"op=indexer q_lens=16 kv_lens=6000 topk=16", "long rows, document at buffer row 0"}}},
      {.name = "sentinel-lanes",
       .what = "[3] rows with n < k allowed keys: slot n gets the lane past the row (kv_off + hi, score -FLT_MAX), "
               "slots n+1.. never written",
       .indexer = true, .sdpa = false, .transform = sentinel_lanes, .catalog = "[3]", .source = "sglang PR #38829",
       .defect_class = K::PadLanes, .catches = {"unwritten_rows", "out_of_causal", "out_of_range", "wrong_fill_rows"},
       .triggers = {{short_rows, {"unwritten_rows", "out_of_causal"}},
                    {"op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", {"unwritten_rows"}},
                    // CP front chunk
                    {"op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24", {"out_of_causal"}},
                    {"op=indexer docs=8192 cp=32 rank=0 " + glm, {"unwritten_rows"}, CaseScale::Production}},
       .outside = {{"op=indexer docs=100,37 mask=none topk=32", "every row has k allowed keys"},
                   {"op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16", "CP back chunk: every row has k keys"},
                   {"op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=100 levels=3",
                    "long rows, three tie levels"},
                   {"op=indexer docs=8192 cp=32 rank=31 " + glm, "CP back chunk", CaseScale::Production}}},
      {.name = "unaligned-start",
       .what = "[3] the row's key start aligned down to 16 buffer rows: an unaligned ragged start also ranks the "
               "previous request's last keys",
       .indexer = true, .sdpa = false, .seams = seams<UnalignedStart>(), .catalog = "[3]", .source = "sglang PR #38829",
       .defect_class = K::BoundaryMetadata, .catches = {"cross_doc", "tie_aware_recall_min"},
       .triggers = {{"op=indexer docs=100,37,200 topk=48", {"cross_doc"}}},
       .outside = {{"op=indexer docs=64,32,100 topk=32", "starts aligned to 16 rows"}}},
      {.name = "masked-key-fill",
       .what = "[4] fewer than k allowed keys scoring >= -65504 (short rows, very negative scores): the remaining "
               "slots get masked key lanes hi, hi+1, ... instead of the low-scoring keys or -1",
       .indexer = true, .sdpa = false, .transform = masked_key_fill, .catalog = "[4]",
       .source = "cudnn-frontend #446 / PR #410; cuDNN FE 1.32 indexer_top_k_wrapper (own measurement)",
       .defect_class = K::PadLanes, .catches = {"out_of_causal", "wrong_fill_rows", "out_of_range"},
       .triggers = {{short_rows, {"out_of_causal", "wrong_fill_rows"}},
                    {"op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", {"wrong_fill_rows"}},
                    {"op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24", {"out_of_causal"}},
                    // long rows, extreme scores: all but 1 key in 32 below -65504 (128 < k above the bin)
                    {"op=indexer q_lens=64 kv_lens=4096 values=extreme heads=2 dim=16 topk=512", {"out_of_range"}},
                    {"op=indexer docs=8192 cp=32 rank=0 " + glm, {"wrong_fill_rows"}, CaseScale::Production},
                    // every row has k allowed keys, but most score below -65504 (large scale, negative head weights)
                    {"op=indexer docs=40 mask=none topk=32 scale=100000", {"out_of_range"}},
                    {"op=indexer docs=300 mask=none topk=32 values=extreme", {"out_of_range"}},
                    {"op=indexer docs=300 topk=32 values=extreme", {"out_of_causal"}}},
       .outside = {{"op=indexer docs=100,37 mask=none topk=32", "k keys per row, none below -65504"},
                   {"op=indexer docs=300 mask=none topk=32 values=plateau", "no score below -65504"},
                   {"op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16", "CP back chunk: k keys per row"},
                   {"op=indexer docs=300 mask=none heads=2 dim=16 topk=40", "no causal mask: k keys per row"},
                   {"op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=512", "long rows, no extreme scores"},
                   {"op=indexer docs=8192 cp=32 rank=31 " + glm, "CP back chunk", CaseScale::Production}}},
      {.name = "compressed-tail-uninit",
       .what = "[8] ratio > 1, a document with q_len = 1: the last allowed compressed key's K-gather workspace row is "
               "never written (read as zeros: score 0)",
       .indexer = true, .sdpa = false, .seams = seams<CompressedTailZero>(), .catalog = "[8]",
       .source = "vllm PR #51252", .defect_class = K::PadLanes, .catches = {"tie_aware_recall_min"},
       .triggers = {{"op=indexer q_lens=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 kv_lens=100,100,100,100,100,100,100,100,100,100,"
                     "100,100,100,100,100,100 ratio=4 topk=30",
                     {"tie_aware_recall_min"}}},
       .outside = {{"op=indexer docs=512 ratio=4 topk=32", "ratio 4, q_len > 1"},
                   {"op=indexer q_lens=1,1 kv_lens=100,100 topk=30", "q_len 1, ratio 1"}}},
      {.name = "swizzle-small-dim",
       .what = "[11] K tiles read through a 128-byte XOR swizzle that was never written: wrong only when a K row "
               "(dim x element bytes) is shorter than 128 bytes (bf16 dim 32)",
       .indexer = true, .sdpa = false, .seams = seams<SwizzleSmallDim>(), .catalog = "[11]",
       .source = "DeepGEMM #433 (also #379, #434, #392)", .catches = {"tie_aware_recall_min"},
       .triggers = {{"op=indexer docs=300 topk=32", {"tie_aware_recall_min"}}},
       .outside = {{"op=indexer docs=300 dim=64 topk=32", "bf16 dim 64: 128-byte rows"},
                   {"op=indexer docs=300 dim=32 dtype=fp32 topk=32", "fp32 dim 32: 128-byte rows"}}},
      {.name = "chunk-keys-only",
       .what = "[9] chunked/suffix prefill: allowed end min(floor((p+1)/ratio), floor(q_len/ratio)) instead of "
               "floor((p+1)/ratio): only the current chunk's keys (queries not starting at position 0)",
       .indexer = true, .sdpa = false, .seams = seams<ChunkKeysOnly>(), .catalog = "[9]", .source = "pypto-lib #592",
       .defect_class = K::BoundaryMetadata, .catches = {"tie_aware_recall_min", "wrong_fill_rows"},
       // bottom-right suffix queries (q_len < kv_len): the first query sits at position kv_len - q_len
       .triggers = {{"op=indexer q_lens=16,16 kv_lens=300,200 topk=32", {"tie_aware_recall_min", "wrong_fill_rows"}},
                    // chunked prefill: a 64-query chunk at position 256 of longer documents
                    {"op=indexer q_lens=64,64 kv_lens=320,400 start_pos=256 topk=32", {"tie_aware_recall_min"}}},
       .outside = {{"op=indexer docs=300,100 topk=32", "queries start at position 0"},
                   {"op=indexer q_lens=128,64 kv_lens=32,16 ratio=4 topk=16", "q_len = kv_len x ratio"},
                   {"op=indexer docs=300,100 start_pos=0 topk=32", "chunk at position 0"}}},
      {.name = "radix-bin-overflow",
       .what = "radix top-k: the k-th score's bin (top 8 bits of its fp16 key) keeps at most 2048 keys, in index "
               "order; later keys of that bin are dropped",
       .indexer = true, .sdpa = false, .seams = seams<RadixBinOverflow>(),
       .source = "defect catalog A, also seen: fixed-size candidate buffers per radix bin",
       .defect_class = K::TopkBuffers, .catches = {"tie_aware_recall_min"},
       .triggers = {{"op=indexer q_lens=8 kv_lens=12000 topk=512 values=clustered", {"tie_aware_recall_min"}},
                    // dense long rows: ~10% of 30000 keys share the k-th score's fp16 bin
                    {"op=indexer q_lens=8 kv_lens=30000 topk=8192", {"tie_aware_recall_min"}},
                    // one head: every key whose dot is <= 0 scores exactly 0 (a ReLU plateau at the k-th value)
                    {"op=indexer q_lens=8 kv_lens=20000 heads=1 topk=4096", {"tie_aware_recall_min"}}},
       .outside = {{"op=indexer q_lens=8 kv_lens=3000 topk=512", "no bin holds more than 2048 keys"},
                   {"op=indexer q_lens=8 kv_lens=1500 topk=512 values=clustered", "bins of at most 2048 keys"}}},
      {.name = "tie-arrival-order",
       .what = "tied keys returned in thread-arrival order (descending index): a valid set, wrong under ties=strict",
       .indexer = true, .sdpa = false, .transform = tie_arrival_order,
       .source = "vllm #51782 / PR #55122 (catalog conventions: top-k ties)", .defect_class = K::TopkBuffers,
       .catches = {"tie_order_rows"},
       .triggers = {{"op=indexer docs=300 levels=3 topk=32 ties=strict", {"tie_order_rows"}}},
       .outside = {{"op=indexer docs=300 mask=none heads=16 topk=4 ties=strict",
                    "no exact ties in the top 4 (with 4 heads a row whose weights are all negative has a 0-score "
                    "plateau)"}}},
  };
}

}  // namespace ao::models
