// cuda-indexer kernels: DSA lightning-indexer scores and per-row top-k (radix select).
//   score(row, s) = scale * sum_h w[row,h] * ReLU(q[row,h] . k[kv_off + s]), fp32 accumulation,
//   for the keys s in [0, hi) that the row's mask allows (indexer_row_keys, shared with the host).
// Rows are processed in tiles of kIdxTileRows rows of one query segment (q_causal_offset = pos0).
// Top-k: exact k-th largest by a 4-pass 8-bit radix select, then the larger scores and the ties in
// ascending key order (the oracle's tie rule), sorted by (score desc, key asc); -1 / -inf fill.
// Returned indices are K/V buffer rows. Only rows of segments are written; pad rows get all -1.
// Bug knobs (IdxBug) re-create catalog defects in the top-k's fill of rows with fewer candidates than k.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "attn_oracle/internal/hd.h"
#include "device_inputs.h"

namespace ao::gpu {

inline constexpr int kIdxTileRows = 64, kIdxTileKeys = 128, kIdxMaxTopk = 2048, kIdxMaxDim = 256,
                     kIdxMaxHeads = 128;

// Mask modes (the knob mask=...): how a kernel row finds its causal position.
enum class IdxMask : int {
  Offsets = 0,     // p = q_causal_offset + i (per-segment offsets: correct)
  TopLeft = 1,     // p = i (chunk-local top-left: the seed PR's bug)
  BottomRight = 2  // p = bottom_right_shift(valid, key_len, ratio) + i: layout.h's bottom-right rule over
                   // the segment's key extent (right without CP; under CP right only with crop=1, ratio 1)
};

// Top-k defects of valid rows (the knob bug=...; pad rows always get the -1 fill):
enum class IdxBug : int {
  None = 0,
  // [3] sglang PR #38829: a row with n < k keys: the lane just past the row (doc key hi) carries the
  // sentinel -FLT_MAX, which outranks the masked -inf lanes: slot n gets buffer row kv_off + hi with
  // score -FLT_MAX, slots n+1..k-1 are never written.
  SentinelLanes = 1,
  // [4] cudnn-frontend #446: scores below -65504 share the fp16 -inf bin with the out-of-bounds lanes
  // past the row: when fewer than k keys score >= -65504, the slots after them get the lanes hi, hi+1,
  // ... (buffer rows kv_off + hi + j, score -inf) instead of the low-score keys or -1.
  MaskedKeyFill = 2
};
inline constexpr float kFp16Lowest = -65504.f;  // below it a score rounds into fp16's -inf bin

struct IdxSeg {
  int64_t row0 = 0, rows = 0, valid = 0, pos0 = 0, key_len = 0, kv_off = 0;
};
struct IdxTile {
  int32_t seg = 0, pad_ = 0;
  int64_t i0 = 0;  // first segment row of the tile
};

AO_HD int64_t idx_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Keys [lo, hi) (doc coordinates, lo is always 0) that segment row i may select under the mask mode.
// Rows i >= valid are pad rows: no keys. causal = false (case mask=none): all key_len keys.
AO_HD void indexer_row_keys(const IdxSeg& s, int64_t i, IdxMask m, bool causal, int ratio, int64_t& lo, int64_t& hi) {
  lo = 0;
  if (i >= s.valid) { hi = 0; return; }
  if (!causal) { hi = s.key_len; return; }
  const int64_t p = m == IdxMask::Offsets  ? s.pos0 + i
                    : m == IdxMask::TopLeft ? i
                                            : bottom_right_shift(s.valid, s.key_len, ratio) + i;
  hi = idx_floor_div(p + 1, ratio);
  hi = hi < 0 ? 0 : hi > s.key_len ? s.key_len : hi;
}

struct IdxProblem {
  const IdxSeg* segs = nullptr;
  const IdxTile* tiles = nullptr;
  int64_t tile0 = 0, ntiles = 0;  // this batch: tiles [tile0, tile0 + ntiles)
  const void* q = nullptr;        // [q_rows, heads, dim] in `st`
  const float* w = nullptr;       // [q_rows, heads]
  const void* k = nullptr;        // [kv_rows, dim] in `st`
  Storage st = Storage::F32;
  int heads = 0, dim = 0, topk = 0, ratio = 1;
  float scale = 1;
  IdxMask mask = IdxMask::Offsets;
  bool causal = true;
  IdxBug bug = IdxBug::None;
  float* scores = nullptr;        // [ntiles * kIdxTileRows, ld] scratch
  int64_t ld = 0;                 // multiple of kIdxTileKeys, >= every segment's key_len
  int32_t* out_idx = nullptr;     // [q_rows, topk]
  float* out_score = nullptr;     // [q_rows, topk]
};

// Appends a query segment and its kIdxTileRows-row tiles (pad rows included: they get -1 fill).
inline void add_indexer_segment(const IdxSeg& g, std::vector<IdxSeg>& segs, std::vector<IdxTile>& tiles) {
  for (int64_t i0 = 0; i0 < g.rows; i0 += kIdxTileRows) {
    IdxTile t;
    t.seg = int32_t(segs.size());
    t.i0 = i0;
    tiles.push_back(t);
  }
  segs.push_back(g);
}
// Row stride of the score scratch: a multiple of kIdxTileKeys covering every segment's key extent.
inline int64_t indexer_scores_ld(const std::vector<IdxSeg>& segs) {
  int64_t ext = 1;
  for (const auto& g : segs) ext = std::max(ext, g.key_len);
  return (ext + kIdxTileKeys - 1) / kIdxTileKeys * kIdxTileKeys;
}

void launch_indexer_scores(const IdxProblem& p, cudaStream_t s);
void launch_indexer_topk(const IdxProblem& p, cudaStream_t s);

}  // namespace ao::gpu
