// Bug models of the SDPA backward (pass=bwd): each overrides one backward seam of the reference
// (reference_seams.h: which saved LSE/O rows are read back, where dQ lands, how dK/dV contributions
// combine, the scale of dK, the guard of rows without keys) or transforms the stored gradients. The key
// ranges are the forward's seams, so the forward's mask and offset models apply to the backward as is.
// One transform, zero_grad_pads, serves both ops: it follows each gradient's judged region (output_specs).
#include <cmath>
#include <limits>

#include "attn_oracle/compare/judged_region.h"
#include "models.h"

namespace ao::models {

namespace {

// The saved LSE read at the row's Q offset, the stats offsets ignored: rows past a gap read LSE pad
// slots (left uninitialised by the forward: NaN gradients) or another token's LSE.
struct LseAtQRow : ReferenceSeams {
  int64_t stats_read_row(const Layout& l, int64_t r) const override {
    return std::min(r, l.stats_rows - 1);
  }
};

// D = rowsum(dO o O) over the next row's O.
struct DNextRow : ReferenceSeams {
  int64_t o_read_row(const Layout& l, int64_t r) const override {
    return std::min(o_write_row(l, r) + 1, l.o_rows - 1);
  }
};

// dK/dV of a GQA group: only the group's first query head's contribution (the others' lost).
struct GqaFirstHead : ReferenceSeams {
  bool dkv_sums_group(const Layout&) const override { return false; }
};

// dK = dS^T Q without the softmax scale.
struct DkNoScale : ReferenceSeams {
  double dk_scale(const Layout&) const override { return 1.0; }
};

// A CP rank's partial dK/dV: each chunk's contribution overwrites the keys it reaches instead of adding.
struct CpDkvOverwrite : ReferenceSeams {
  bool dkv_sums_segments(const Layout&) const override { return false; }
};

// No guard of a row without allowed keys: exp(s - lse) with lse = -inf over its masked scores is NaN.
struct NoEmptyRowGuard : ReferenceSeams {
  bool guards_empty_rows(const Layout&) const override { return false; }
};

// The dQ accumulator's element offset row * hq * dim wrapping (int32 in the kernel: 2^31 elements;
// scaled to 2^18 here so that a CPU case reaches it, and the fuzzer's backward packs at small dims:
// 512 rows of 8 heads x 64): later rows land on early rows.
constexpr int64_t kWrapElements = int64_t(1) << 18;
struct DqOffsetWrap : ReferenceSeams {
  int64_t dq_write_row(const Layout& l, int64_t r) const override {
    const int64_t w = int64_t(l.c.hq) * l.c.dim;
    return ((q_read_row(l, r) * w) % kWrapElements) / w;
  }
};

// FlashAttention #1990 (TransformerEngine's padded THD through FA3 varlen): the backward takes each
// document's lengths from the differences of its padded offsets (cu_seqlens) instead of the valid lengths
// (seqused), so the pad slots after a document count as its tokens: under mask=none a row attends the pad
// keys, under bottom-right alignment the band shifts by the pad counts. The K/V side of the defect (the
// forward, given seqused, is right). Not modelled: the pad Q rows taken as tokens (their dQ written, their
// poisoned dO added into dK/dV); with equal Q and K/V pads under bottom-right they are the only effect.
int64_t padded_len(const std::vector<int64_t>& offs, int64_t off, int64_t len, int64_t rows) {
  int64_t next = rows;  // the next document's offset in buffer order, or the buffer's end
  for (int64_t o : offs)
    if (o > off && o < next) next = o;
  return std::max(len, next - off);
}
struct PaddedLengths : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    const Case& c = l.c;
    const auto& seg = l.seg_of(r);
    const DocLayout& d = l.docs[size_t(seg.doc)];
    std::vector<int64_t> kv_offs, q_offs;
    for (const auto& x : l.docs) kv_offs.push_back(x.kv_off), q_offs.push_back(x.q_off);
    const int64_t kv = padded_len(kv_offs, d.kv_off, d.kv_len, l.kv_rows);
    if (kv == d.kv_len && c.mask != MaskKind::BottomRight) return ReferenceSeams::key_ranges(l, r);
    int64_t lo = 0, hi = kv;
    if (c.mask != MaskKind::None) {
      int64_t p = l.pos_of(r);
      if (c.mask == MaskKind::BottomRight && !l.is_cp()) {  // the shift from the padded lengths
        const int64_t q = padded_len(q_offs, d.q_off, d.q_len, l.q_rows);
        p += bottom_right_shift(q, kv, 1) - bottom_right_shift(d.q_len, d.kv_len, 1);
      }
      sdpa_window_band(c.window_convention, kv, p, c.window, c.window_right, lo, hi);
    }
    return {{d.kv_off, lo, hi}};
  }
};

// Zeros written into every pad-slot row of dQ, dK and dV (kernels that clear whole gradient buffers).
void zero_grad_pads(const Layout& l, const Inputs&, Outputs& out) {
  if (l.c.pass != Pass::Bwd) return;
  for (const OutputSpec& g : output_specs(l.c)) {  // every gradient of either op, by its judged region
    if (!g.floats) continue;
    std::vector<float>& t = out.*g.floats;
    const std::vector<char> valid = valid_rows(l, g.rows);
    const size_t width = size_t(g.width);
    for (size_t r = 0; r < valid.size() && (r + 1) * width <= t.size(); ++r)
      if (!valid[r]) std::fill_n(t.begin() + long(r * width), width, 0.f);
  }
}

// Whole 64-row tiles past a sequence's end in the backward, the way FlashAttention-4 4.0.0b36's SM90
// backward answers on the H200 (found by this project's fuzz: corpus/found/fa4-varlen-bwd/). Key tiles,
// from the document's first key row: a row's last tile runs to the tile's end, and the pad-slot K/V rows
// there enter dP = dO V^T and dQ += dS K with P = 0, so a NaN/Inf pad slot makes the row's dQ NaN
// (0 * NaN). Query tiles, from the segment's first row: the pad-slot Q, dO, O and LSE rows of the last
// tile enter the dK/dV sums of every key the segment's last row reaches. A finite pad slot changes
// nothing (0 times a finite value), and the model writes no pad-slot row.
constexpr int64_t kBwdTile = 64;
void bwd_tile_pad_read(const Layout& l, const Inputs& in, Outputs& out) {
  const Case& c = l.c;
  if (c.pass != Pass::Bwd || c.op != Op::Sdpa) return;
  const int64_t Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v;
  const std::vector<char> kv_valid = valid_rows(l, RowBuffer::KV), q_valid = valid_rows(l, RowBuffer::Q);
  const ReferenceSeams& exact = exact_seams();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Whether elements [row * width + e0, + n) hold a NaN or an Inf.
  auto nonfinite = [](const std::vector<float>& t, int64_t row, int64_t width, int64_t e0, int64_t n) {
    for (int64_t e = 0; e < n; ++e)
      if (!std::isfinite(t[size_t(row * width + e0 + e)])) return true;
    return false;
  };
  auto round_up = [](int64_t n) { return (n + kBwdTile - 1) / kBwdTile * kBwdTile; };
  for (const auto& s : l.segments) {
    if (s.valid <= 0) continue;
    const int64_t first_key = l.docs[size_t(s.doc)].kv_off;
    for (int64_t i = 0; i < s.valid; ++i) {  // key tiles -> dQ
      const int64_t r = s.row0 + i;
      const auto ranges = exact.key_ranges(l, r);
      if (ranges.empty() || ranges.back().hi <= ranges.back().lo) continue;
      const int64_t end = ranges.back().base + ranges.back().hi;
      const int64_t tile_end = std::min(l.kv_rows, first_key + round_up(end - first_key));
      for (int h = 0; h < c.hq; ++h) {
        const int g = exact.kv_head(l, h);
        bool poisoned = false;
        for (int64_t k = end; k < tile_end && !poisoned; ++k)
          poisoned = !kv_valid[size_t(k)] && (nonfinite(in.k, k, Hkv * D, g * D, D) || nonfinite(in.v, k, Hkv * Dv, g * Dv, Dv));
        if (poisoned) std::fill_n(out.dq.begin() + long((r * Hq + h) * D), D, nan);
      }
    }
    const int64_t last = s.row0 + s.valid - 1;  // query tiles -> dK/dV of the keys the last row reaches
    const auto reached = exact.key_ranges(l, last);
    const int64_t q_end = std::min(l.q_rows, s.row0 + round_up(s.valid));
    for (int h = 0; h < c.hq; ++h) {
      bool poisoned = false;
      for (int64_t p = s.row0 + s.valid; p < q_end && !poisoned; ++p) {
        if (q_valid[size_t(p)]) continue;
        const int64_t o_row = std::min(l.o_rows - 1, s.o_row0 + (p - s.row0));
        const int64_t st_row = std::min(l.stats_rows - 1, s.stats_row0 + (p - s.row0));
        poisoned = nonfinite(in.q, p, Hq * D, h * D, D) || nonfinite(in.dout, p, Hq * Dv, h * Dv, Dv) ||
                   nonfinite(in.o, o_row, Hq * Dv, h * Dv, Dv) || nonfinite(in.lse, st_row, Hq, h, 1);
      }
      if (!poisoned) continue;
      const int g = exact.kv_head(l, h);
      for (const KeyRange& kr : reached)
        for (int64_t k = std::max<int64_t>(0, kr.base + kr.lo); k < std::min(l.kv_rows, kr.base + kr.hi); ++k) {
          std::fill_n(out.dk.begin() + long((k * Hkv + g) * D), D, nan);
          std::fill_n(out.dv.begin() + long((k * Hkv + g) * Dv), Dv, nan);
        }
    }
  }
}

}  // namespace

std::vector<BugModel> backward_models() {
  using K = DefectClass;
  const std::vector<std::string> nonfinite = {"dq_nonfinite_valid", "dk_nonfinite_valid", "dv_nonfinite_valid"};
  return {
      {.name = "bwd-lse-pad-read", .what = "backward reads the saved LSE at the Q row offsets (stats offsets ignored): LSE pad slots give NaN gradients",
       .indexer = false, .sdpa = true, .seams = seams<LseAtQRow>(), .catalog = "[39]",
       .source = "FlashAttention PR #2324 (LSE padding rows read in the backward)", .defect_class = K::BoundaryMetadata,
       .catches = {"dq_nonfinite_valid", "dk_nonfinite_valid", "dv_nonfinite_valid", "dq_violations", "dk_violations",
                   "dv_violations"},
       .triggers = {{"op=sdpa pass=bwd docs=40,40 hq=2 dim=16 stats_offsets=0,64,104", nonfinite}},
       .outside = {{"op=sdpa pass=bwd docs=40,40 hq=2 dim=16", "stats offsets = Q offsets"},
                   {"op=sdpa docs=40,40 stats_offsets=0,64,104", "the forward reads no saved LSE"}}},
      {.name = "bwd-d-next-row", .what = "backward's D = rowsum(dO o O) taken over the next row's O",
       .indexer = false, .sdpa = true, .seams = seams<DNextRow>(),
       .catches = {"dq_violations", "dk_violations", "dq_nonfinite_valid", "dk_nonfinite_valid"},
       .triggers = {{"op=sdpa pass=bwd docs=50,30 hq=2 dim=16", {"dq_violations", "dk_violations"}}},
       .outside = {{"op=sdpa docs=50,30", "the forward computes no D"}}},
      {.name = "bwd-gqa-first-head", .what = "dK/dV of a GQA group from its first query head only (not summed)",
       .indexer = false, .sdpa = true, .seams = seams<GqaFirstHead>(),
       .catches = {"dk_violations", "dv_violations"},
       .triggers = {{"op=sdpa pass=bwd docs=50,30 hq=4 hkv=2 dim=16", {"dk_violations", "dv_violations"}}},
       .outside = {{"op=sdpa pass=bwd docs=50,30 hq=2 hkv=2 dim=16", "MHA: a group of one head"}}},
      {.name = "bwd-dk-no-scale", .what = "dK = dS^T Q without the softmax scale", .indexer = false, .sdpa = true,
       .seams = seams<DkNoScale>(), .catches = {"dk_violations"},
       .triggers = {{"op=sdpa pass=bwd docs=50,30 hq=2 dim=16", {"dk_violations"}}},
       .outside = {{"op=sdpa pass=bwd docs=50,30 hq=2 dim=16 scale=1", "scale 1"}}},
      {.name = "bwd-cp-dkv-overwrite",
       .what = "a CP rank's partial dK/dV: each chunk's contribution overwrites the keys it reaches instead of adding",
       .indexer = false, .sdpa = true, .seams = seams<CpDkvOverwrite>(), .defect_class = K::WindowAlignment,
       .catches = {"dk_violations", "dv_violations"},
       .triggers = {{"op=sdpa pass=bwd docs=64,32 cp=2 rank=0 hq=2 dim=16", {"dk_violations", "dv_violations"}}},
       .outside = {{"op=sdpa pass=bwd docs=64,32 hq=2 dim=16", "no CP: one segment per document"}}},
      {.name = "bwd-no-empty-guard",
       .what = "backward without the guard of rows with no allowed key: exp(s - lse) at lse = -inf gives NaN",
       .indexer = false, .sdpa = true, .seams = seams<NoEmptyRowGuard>(), .defect_class = K::EmptyRows,
       .catches = {"dq_nonfinite_valid", "dk_nonfinite_valid", "dv_nonfinite_valid", "dq_violations", "dk_violations",
                   "dv_violations"},
       .triggers = {{"op=sdpa pass=bwd q_lens=70 kv_lens=40 mask=bottomright hq=2 dim=16", nonfinite}},
       .outside = {{"op=sdpa pass=bwd q_lens=70 kv_lens=40 mask=bottomright hq=2 dim=16 empty_rows=posinf",
                    "LSE = +inf: exp(s - lse) = 0"},
                   {"op=sdpa pass=bwd docs=70 hq=2 dim=16", "no row without keys"}}},
      {.name = "bwd-dq-offset-wrap",
       .what = "dQ accumulator offset row*hq*dim wraps (int32 in the kernel; 2^18 elements here): later rows land on early ones",
       .indexer = false, .sdpa = true, .seams = seams<DqOffsetWrap>(), .catalog = "[37]", .source = "FlashAttention PRs #1500, #2260",
       .defect_class = K::BoundaryMetadata, .catches = {"dq_violations", "unwritten_rows"},
       .triggers = {{"op=sdpa pass=bwd docs=16*2100 hq=2 dim=16 rows=256", {"dq_violations", "unwritten_rows"}}},
       .outside = {{"op=sdpa pass=bwd docs=16*300 hq=2 dim=16", "offsets below the wrap"}}},
      {.name = "bwd-padded-lengths",
       .what = "backward takes document lengths from the padded offsets (cu_seqlens differences), not the valid "
               "lengths (seqused): pad keys attended, the bottom-right band shifted",
       .indexer = false, .sdpa = true, .pass = Pass::Bwd, .seams = seams<PaddedLengths>(),
       .source = "FlashAttention #1990 (TransformerEngine padded THD through FA3 varlen)",
       .defect_class = K::PadLanes,
       .catches = {"dq_nonfinite_valid", "dk_nonfinite_valid", "dv_nonfinite_valid", "dq_violations", "dk_violations",
                   "dv_violations", "dk_clobbered_pad_slots", "dv_clobbered_pad_slots"},
       .triggers = {{"op=sdpa pass=bwd docs=30,20 pad=3 mask=none hq=2 dim=16", {"dq_nonfinite_valid"}},
                    {"op=sdpa pass=bwd docs=30,20 q_pad=0 kv_pad=3 mask=bottomright hq=2 dim=16 poison=none",
                     {"dq_violations", "dk_violations", "dv_violations", "dk_clobbered_pad_slots"}}},
       .outside = {{"op=sdpa pass=bwd docs=30,20 mask=bottomright hq=2 dim=16", "no padding: the lengths agree"},
                   {"op=sdpa pass=bwd docs=30,20 pad=3 hq=2 dim=16", "top-left causal: a valid row reaches no pad key"}}},
      {.name = "bwd-tile-pad-read",
       .what = "backward's 64-row query and key tiles read the pad slots past a sequence's end: masked P times "
               "NaN/Inf pad-slot K/V poisons dQ, pad-slot Q/dO/O/LSE rows poison the reached keys' dK/dV",
       .indexer = false, .sdpa = true, .pass = Pass::Bwd, .transform = bwd_tile_pad_read,
       .source = "FlashAttention-4 4.0.0b36 SM90 backward on the H200 (found by this project's fuzz; the FA #1990 "
                 "question, the forward's pad-slot reads one pass later)",
       .defect_class = K::PadLanes,
       .catches = {"dq_nonfinite_valid", "dk_nonfinite_valid", "dv_nonfinite_valid", "dq_violations", "dk_violations",
                   "dv_violations"},
       .triggers = {{"op=sdpa pass=bwd docs=1 tail=1 hq=2 dim=16", nonfinite},
                    {"op=sdpa pass=bwd docs=100,37 pad=11 hq=4 hkv=2 dim=16 poison=nan", nonfinite}},
       .outside = {{"op=sdpa pass=bwd docs=128,64 pad=5 hq=2 dim=16", "every document ends on a 64-row tile"},
                   {"op=sdpa pass=bwd docs=100,37 pad=11 hq=2 dim=16 poison=large", "finite pad slots"}}},
      {.name = "bwd-grad-pad-zeroed", .what = "zeros written into the pad-slot rows of the gradients (dQ, dK, dV; "
                                                "the indexer's dQ, dW, dK)", .indexer = true,
       .sdpa = true, .pass = Pass::Bwd, .transform = zero_grad_pads, .defect_class = K::PadLanes,
       .catches = {"dq_clobbered_pad_slots", "dk_clobbered_pad_slots", "dv_clobbered_pad_slots",
                   "clobbered_pad_slots"},
       .triggers = {{"op=sdpa pass=bwd docs=30,20 pad=3 hq=2 dim=16",
                     {"dq_clobbered_pad_slots", "dk_clobbered_pad_slots", "dv_clobbered_pad_slots"}},
                    {"op=indexer pass=bwd docs=30,20 pad=3 heads=2 dim=16 topk=4",
                     {"clobbered_pad_slots"}}},
       .outside = {{"op=sdpa pass=bwd docs=30,20 pad=3 hq=2 dim=16 grad_pad=zero", "grad_pad=zero accepts zeros"},
                   {"op=indexer pass=bwd docs=30,20 pad=3 heads=2 dim=16 topk=4 grad_pad=zero",
                    "grad_pad=zero accepts zeros"}}},
  };
}

}  // namespace ao::models
