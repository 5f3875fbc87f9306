// Bug models of offsets, masks, heads and stored values: each overrides one seam of the reference
// (which keys a row sees, where rows are read from and land, which KV head a query head reads, how
// P @ V reads its last key tile, how the LSE is stored) or transforms the stored result.
#include <cmath>

#include "models.h"

namespace ao::models {

namespace {

// Seed PR #14: a chunk-local top-left causal mask on CP / bottom-right query chunks: a row's position
// counted from its segment's first row (q_causal_offsets dropped).
struct TopLeftCp : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    const auto k = exact_row_keys(l, r, r - l.seg_of(r).row0);
    return {{k.doc.kv_off, k.lo, k.hi}};
  }
};

// Rows at packed prefix offsets of the valid lengths (the bound ragged offsets ignored). Under CP the
// local buffers have no packed image, so Q and outputs keep their rows there.
int64_t packed_row(const Layout& l, int64_t r) {
  const auto& seg = l.seg_of(r);
  return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
}

// cudnn-frontend #737: every tensor addressed by prefix(lens).
struct DerivedOffsets : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    v[0].base = l.docs[size_t(l.seg_of(r).doc)].packed_kv_off;
    return v;
  }
  int64_t q_read_row(const Layout& l, int64_t r) const override { return l.is_cp() ? r : packed_row(l, r); }
  int64_t o_write_row(const Layout& l, int64_t r) const override {
    return l.is_cp() ? ReferenceSeams::o_write_row(l, r) : packed_row(l, r);
  }
  int64_t stats_write_row(const Layout& l, int64_t r) const override {
    return l.is_cp() ? ReferenceSeams::stats_write_row(l, r) : packed_row(l, r);
  }
};

// K/V read through the Q offsets.
struct SharedQkvOffsets : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    v[0].base = l.docs[size_t(l.seg_of(r).doc)].q_off;
    return v;
  }
};

// A causal mask that keeps key p + 1.
struct OffByOneCausal : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    if (l.c.mask != MaskKind::None && v[0].hi < l.docs[size_t(l.seg_of(r).doc)].kv_len) v[0].hi += 1;
    return v;
  }
};

// A causal mask over the whole pack: every earlier document's keys too.
struct CrossDoc : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    std::vector<KeyRange> v;
    for (int b = 0; b < l.seg_of(r).doc; ++b) v.push_back({l.docs[size_t(b)].kv_off, 0, l.docs[size_t(b)].kv_len});
    v.push_back(ReferenceSeams::key_ranges(l, r)[0]);
    return v;
  }
};

struct GqaModulo : ReferenceSeams {
  int kv_head(const Layout& l, int h) const override { return h % l.c.hkv; }
};

struct LseLog2 : ReferenceSeams {
  double lse_divisor() const override { return M_LN2; }
};

struct StatsPacked : ReferenceSeams {
  int64_t stats_write_row(const Layout& l, int64_t r) const override {
    return l.is_cp() ? ReferenceSeams::stats_write_row(l, r) : packed_row(l, r);
  }
};

// cudnn-frontend #624: P @ V over whole 64-row key tiles.
struct TailRead : ReferenceSeams {
  int64_t pv_key_tile(const Layout&) const override { return 64; }
};

// Short rows filled with 0 instead of -1: the exact run's fills (-1, written only there) become 0.
void fill_zero(const Layout& l, const Inputs&, Outputs& out) {
  for (int64_t r : l.check_rows) {
    int32_t* idx = out.topk.data() + size_t(r) * size_t(l.c.topk);
    for (int e = 0; e < l.c.topk; ++e)
      if (idx[e] == -1) idx[e] = 0;
  }
}

}  // namespace

std::vector<BugModel> offset_mask_models() {
  using K = DefectClass;
  const std::string te_padded = "lens=3,2,4 padded_offsets=0,4,8,13";
  return {
      {.name = "topleft-cp",
       .what = "chunk-local top-left causal mask on CP / bottom-right query chunks (q_causal_offsets dropped; seed PR #14)",
       .indexer = true, .sdpa = true, .seams = seams<TopLeftCp>(),
       .source = "seed PR #14 (Megatron packed-CP indexer)", .defect_class = K::BoundaryMetadata,
       .catches = {"tie_aware_recall_min", "out_of_causal", "tol_violations", "rel_l2_err", "lse_max_err"},
       .triggers = {{"op=indexer docs=1024 cp=4 rank=3 topk=16", {"tie_aware_recall_min"}},
                    {"op=sdpa docs=256 cp=4 rank=1", {"tol_violations"}}},
       .outside = {{"op=indexer docs=300 topk=32", "no CP: segments start at position 0"},
                   {"op=sdpa docs=100,37", "no CP"}}},
      {.name = "derived-offsets",
       .what = "sequences addressed by prefix(lens), bound ragged offsets ignored (cudnn-frontend #737)",
       .indexer = true, .sdpa = true, .seams = seams<DerivedOffsets>(), .source = "cudnn-frontend #737",
       .defect_class = K::BoundaryMetadata,
       .catches = {"tie_aware_recall_min", "out_of_range", "cross_doc", "clobbered_pad_slots", "unwritten_rows",
                   "tol_violations", "rel_l2_err", "lse_max_err", "nonfinite_valid"},
       .triggers = {{"op=indexer " + te_padded + " topk=4", {"out_of_range"}},
                    {"op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2", {"tol_violations"}}},
       .outside = {{"op=sdpa docs=100,37", "packed: the bound offsets are prefix(lens)"},
                   {"op=indexer docs=100,37 topk=32", "packed"}}},
      {.name = "shared-qkv-offsets", .what = "K/V read through the Q offsets", .indexer = true, .sdpa = true,
       .seams = seams<SharedQkvOffsets>(), .defect_class = K::BoundaryMetadata,
       .catches = {"tie_aware_recall_min", "out_of_range", "cross_doc", "tol_violations", "rel_l2_err",
                   "lse_max_err", "nonfinite_valid"},
       .triggers = {{"op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 hq=8 hkv=2", {"tol_violations"}}},
       .outside = {{"op=sdpa docs=100,37", "packed, q_len = kv_len: the Q and KV offsets coincide"}}},
      {.name = "tail-read",
       .what = "64-row key tiles read past a sequence's end; masked P times pad-row V (cudnn-frontend #624)",
       .indexer = false, .sdpa = true, .seams = seams<TailRead>(),
       .source = "cudnn-frontend #624 (also FA #1745, #1395)", .defect_class = K::PadLanes,
       .catches = {"nonfinite_valid", "tol_violations", "rel_l2_err"},
       .triggers = {{"op=sdpa docs=100,37 pad=11 tail=64 poison=nan", {"nonfinite_valid"}}},
       .outside = {{"op=sdpa docs=128,64 poison=nan", "every document ends on a 64-key tile"}}},
      {.name = "off-by-one-causal", .what = "causal mask keeps key p+1", .indexer = true, .sdpa = true,
       .seams = seams<OffByOneCausal>(),
       .catches = {"out_of_causal", "tie_aware_recall_min", "tol_violations", "rel_l2_err", "lse_max_err",
                   "dq_violations", "dk_violations", "dv_violations"},
       .triggers = {{"op=indexer docs=300 topk=32", {"out_of_causal"}},
                    // long rows: ~1/4000 per key
                    {"op=sdpa docs=8192 cp=32 rank=31 rows=64", {"rel_l2_err"}},
                    {"op=sdpa q_lens=40,40 kv_lens=4100,4300 mask=bottomright rows=24 dtype=fp16", {"lse_max_err"}},
                    // the backward's sensitivity: one key too many on rows of ~4100 keys, bf16
                    {"op=sdpa pass=bwd q_lens=64 kv_lens=4100 mask=bottomright hq=2 hkv=1 dim=64",
                     {"dq_violations", "dk_violations"}}},
       .outside = {{"op=sdpa docs=100,37 mask=none", "no causal mask"},
                   {"op=indexer docs=100 mask=none topk=16", "no causal mask"}}},
      {.name = "cross-doc", .what = "causal mask over the whole pack, document boundaries ignored", .indexer = true,
       .sdpa = true, .seams = seams<CrossDoc>(),
       .catches = {"cross_doc", "tie_aware_recall_min", "tol_violations", "rel_l2_err", "lse_max_err",
                   "dkv_unreached_nonzero"},
       .triggers = {{"op=indexer docs=100,200 topk=48", {"cross_doc"}},
                    {"op=sdpa pass=bwd q_lens=0,40 kv_lens=40,40 hq=2 dim=16", {"dkv_unreached_nonzero"}}},
       .outside = {{"op=indexer docs=300 topk=32", "one document"}, {"op=sdpa docs=100", "one document"}}},
      {.name = "gqa-modulo", .what = "query head h reads kv head h % hkv instead of h / (hq/hkv)", .indexer = false,
       .sdpa = true, .seams = seams<GqaModulo>(), .catches = {"tol_violations", "rel_l2_err", "lse_max_err"},
       .triggers = {{"op=sdpa docs=70,50 hq=8 hkv=2", {"tol_violations"}}},
       .outside = {{"op=sdpa docs=70,50 hq=4 hkv=1", "one KV head"}, {"op=sdpa docs=70 hq=4 hkv=4", "MHA"}}},
      {.name = "lse-log2", .what = "LSE written in base 2", .indexer = false, .sdpa = true, .seams = seams<LseLog2>(),
       .catches = {"lse_max_err"},
       .triggers = {{"op=sdpa docs=70", {"lse_max_err"}}},
       .outside = {{"op=sdpa q_lens=8,4 kv_lens=0,0", "no keys: LSE -inf in any base"}}},
      {.name = "stats-packed", .what = "LSE written at packed prefix rows, stats offsets ignored", .indexer = false,
       .sdpa = true, .seams = seams<StatsPacked>(), .defect_class = K::BoundaryMetadata,
       .catches = {"clobbered_pad_slots", "unwritten_rows", "lse_max_err"},
       .triggers = {{"op=sdpa " + te_padded, {"clobbered_pad_slots"}}},
       .outside = {{"op=sdpa docs=100,37", "packed: the stats offsets are prefix(lens)"}}},
      {.name = "fill-zero", .what = "rows with fewer than k allowed keys filled with 0 instead of -1", .indexer = true,
       .sdpa = false, .transform = fill_zero, .defect_class = K::EmptyRows,
       .catches = {"wrong_fill_rows", "duplicates"},
       .triggers = {{"op=indexer docs=40,25 topk=64", {"wrong_fill_rows"}}},
       .outside = {{"op=indexer docs=100,37 mask=none topk=32", "every row has k keys"}}},
  };
}

}  // namespace ao::models
