// Bug models that act on what a kernel stores rather than on what it computes: output transforms
// applied after the (exact) reference run. Each re-creates a real defect class of tiled GPU kernels:
// a grid that misses a tail tile, stores into pad slots, a top-k merge that double-counts a key.
#include <algorithm>
#include <cstring>

#include "models.h"

namespace ao::models {

namespace {

constexpr int64_t kTile = 64;  // query-row tile / key tile of the modelled kernels

void reset_topk_row(const Layout& l, Outputs& out, int64_t row) {
  const size_t K = size_t(l.c.topk);
  std::fill_n(out.topk.begin() + long(size_t(row) * K), K, kSentinelIndex);
  std::fill_n(out.scores.begin() + long(size_t(row) * K), K, sentinel_float());
}

void reset_sdpa_row(const Layout& l, Outputs& out, int64_t orow, int64_t srow) {
  const size_t w = size_t(l.c.hq) * size_t(l.c.dim_v);
  std::fill_n(out.o.begin() + long(size_t(orow) * w), w, sentinel_float());
  std::fill_n(out.lse.begin() + long(size_t(srow) * size_t(l.c.hq)), size_t(l.c.hq), sentinel_float());
}

// grid = floor(rows / 64) instead of ceil: the rows of each segment's last partial tile are never
// computed, so they keep whatever the buffer held (here the sentinel). Only sequences whose length
// is not a multiple of the tile expose it.
void grid_floor(const Layout& l, const Inputs&, Outputs& out) {
  for (const auto& s : l.segments) {
    for (int64_t i = s.rows / kTile * kTile; i < s.rows; ++i) {
      if (l.c.op == Op::Indexer)
        reset_topk_row(l, out, s.row0 + i);
      else
        reset_sdpa_row(l, out, s.o_row0 + i, s.stats_row0 + i);
    }
  }
}

// The whole output capacity is zero-filled (a memset of O / LSE / top-k before the launch, or a grid
// over the capacity that writes zeros for rows it does not own): pad slots, such as TE identifier-
// token rows in a shared buffer, are overwritten. FA3 is documented to leave garbage there instead.
void pad_rows_written(const Layout&, const Inputs&, Outputs& out) {
  for (auto& x : out.topk)
    if (x == kSentinelIndex) x = 0;
  for (auto* v : {&out.scores, &out.o, &out.lse})
    for (auto& x : *v)
      if (is_sentinel(x)) x = 0.f;
}

// The last partial tile of each sequence stores all 64 rows without a row mask: rows past the
// sequence's valid end, up to the tile boundary, receive the tile's stale registers (modelled as a
// copy of the last valid row) wherever they are pad slots. Rows owned by another sequence are left
// alone (on a GPU that is a race with that sequence's own store).
void store_overrun(const Layout& l, const Inputs&, Outputs& out) {
  const int64_t rows = l.c.op == Op::Indexer ? l.q_rows : l.o_rows;
  const std::vector<char> owned = valid_rows(l, l.c.op == Op::Indexer ? RowBuffer::Q : RowBuffer::O);
  for (const auto& s : l.segments) {
    if (s.valid == 0) continue;
    const int64_t end = (s.valid + kTile - 1) / kTile * kTile;
    for (int64_t i = s.valid; i < end; ++i) {
      if (l.c.op == Op::Indexer) {
        const int64_t src = s.row0 + s.valid - 1, dst = s.row0 + i;
        if (dst >= rows || owned[size_t(dst)]) continue;
        const size_t K = size_t(l.c.topk);
        std::copy_n(out.topk.begin() + long(size_t(src) * K), K, out.topk.begin() + long(size_t(dst) * K));
        std::copy_n(out.scores.begin() + long(size_t(src) * K), K, out.scores.begin() + long(size_t(dst) * K));
      } else {
        const int64_t src = s.o_row0 + s.valid - 1, dst = s.o_row0 + i;
        if (dst >= rows || owned[size_t(dst)]) continue;
        const size_t w = size_t(l.c.hq) * size_t(l.c.dim_v);
        std::copy_n(out.o.begin() + long(size_t(src) * w), w, out.o.begin() + long(size_t(dst) * w));
      }
    }
  }
}

// Per-key-tile partial top-k lists are merged, but the tiles' ranges overlap by one key (an
// inclusive tile end): a key at a tile boundary enters the merge twice and both copies are kept, so
// the row returns it twice and loses its k-th key (or a -1 fill).
void dup_merge(const Layout& l, const Inputs&, Outputs& out) {
  const size_t K = size_t(l.c.topk);
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const int64_t base = l.docs[size_t(l.seg_of(r).doc)].kv_off;
    int32_t* idx = out.topk.data() + size_t(r) * K;
    float* sc = out.scores.data() + size_t(r) * K;
    std::vector<int32_t> ni;
    std::vector<float> ns;
    for (size_t e = 0; e < K && ni.size() < K; ++e) {
      ni.push_back(idx[e]);
      ns.push_back(sc[e]);
      const int64_t s = int64_t(idx[e]) - base;
      if (idx[e] >= 0 && s > 0 && s % kTile == 0 && ni.size() < K) {
        ni.push_back(idx[e]);
        ns.push_back(sc[e]);
      }
    }
    std::copy(ni.begin(), ni.end(), idx);
    std::copy(ns.begin(), ns.end(), sc);
  }
}

// Rows with fewer than k allowed keys are padded with an end-of-range index (the KV buffer's row
// count, as index lists padded with S_k instead of -1 are): a consumer that gathers by index reads one
// row past the K/V buffer.
void fill_end(const Layout& l, const Inputs&, Outputs& out) {
  for (int64_t r : l.check_rows) {
    int32_t* idx = out.topk.data() + size_t(r) * size_t(l.c.topk);
    for (int e = 0; e < l.c.topk; ++e)
      if (idx[e] == -1) idx[e] = int32_t(l.kv_rows);
  }
}

// cuDNN frontend #1083: with s_q = 1 (decode) the ragged stats are written only for the first query
// head of each GQA group; the other heads' LSE stays unwritten.
void gqa_stats_first_head(const Layout& l, const Inputs&, Outputs& out) {
  const int G = l.group();
  if (G <= 1 || l.is_cp()) return;
  for (const auto& s : l.segments) {
    if (s.valid != 1) continue;
    for (int h = 0; h < l.c.hq; ++h)
      if (h % G != 0) out.lse[size_t(s.stats_row0 * l.c.hq + h)] = sentinel_float();
  }
}

}  // namespace

std::vector<BugModel> tile_store_models() {
  using K = DefectClass;
  const std::string te_padded = "lens=3,2,4 padded_offsets=0,4,8,13";
  return {
      {.name = "grid-floor", .what = "grid = floor(rows/64): each segment's last partial 64-row tile is never computed",
       .indexer = true, .sdpa = true, .transform = grid_floor, .catches = {"unwritten_rows"},
       .triggers = {{"op=indexer docs=100 topk=32", {"unwritten_rows"}}, {"op=sdpa docs=100", {"unwritten_rows"}}},
       .outside = {{"op=sdpa docs=128,64", "whole 64-row tiles"}, {"op=indexer docs=128 topk=16", "whole 64-row tiles"}}},
      {.name = "pad-rows-written",
       .what = "whole output capacity zero-filled: pad slots (TE identifier-token rows) overwritten", .indexer = true,
       .sdpa = true, .transform = pad_rows_written, .defect_class = K::PadLanes, .catches = {"clobbered_pad_slots"},
       .triggers = {{"op=indexer " + te_padded + " topk=4", {"clobbered_pad_slots"}},
                    {"op=sdpa " + te_padded, {"clobbered_pad_slots"}}},
       .outside = {{"op=sdpa docs=100,37", "packed: no pad slot"}}},
      {.name = "store-overrun",
       .what = "last partial 64-row tile stored without a row mask: pad rows after a sequence overwritten",
       .indexer = true, .sdpa = true, .transform = store_overrun, .defect_class = K::PadLanes,
       .catches = {"clobbered_pad_slots"},
       .triggers = {{"op=indexer docs=100,37 pad=5,0 tail=20 topk=48", {"clobbered_pad_slots"}}},
       .outside = {{"op=sdpa docs=100,37", "packed: the rows past a sequence are the next one's"}}},
      {.name = "dup-merge", .what = "per-tile top-k merge keeps a tile-boundary key twice and drops the k-th",
       .indexer = true, .sdpa = false, .transform = dup_merge, .defect_class = K::TopkBuffers,
       .catches = {"duplicates", "tie_aware_recall_min"},
       .triggers = {{"op=indexer docs=300 topk=32", {"duplicates"}}},
       .outside = {{"op=indexer docs=60,40 topk=8", "no key at a 64-key tile boundary"}}},
      {.name = "fill-end", .what = "short rows padded with the KV row count (one past the buffer) instead of -1",
       .indexer = true, .sdpa = false, .transform = fill_end, .defect_class = K::EmptyRows,
       .catches = {"out_of_range", "wrong_fill_rows"},
       .triggers = {{"op=indexer docs=40,25 topk=64", {"out_of_range"}}},
       .outside = {{"op=indexer docs=100,37 mask=none topk=32", "every row has k keys"}}},
      {.name = "gqa-stats-first-head",
       .what = "s_q = 1: LSE written only for the first head of each GQA group (cudnn-frontend #1083)",
       .indexer = false, .sdpa = true, .transform = gqa_stats_first_head, .source = "cudnn-frontend #1083",
       .defect_class = K::BoundaryMetadata, .catches = {"unwritten_rows"},
       .triggers = {{"op=sdpa q_lens=1,1 kv_lens=40,17 mask=bottomright hq=8 hkv=2", {"unwritten_rows"}}},
       .outside = {{"op=sdpa q_lens=1,1 kv_lens=40,17 mask=bottomright hq=4 hkv=4", "MHA"},
                   {"op=sdpa docs=70,50 hq=8 hkv=2", "not decode"}}},
  };
}

}  // namespace ao::models
