// cuda-sdpa kernel: a straightforward tiled SDPA forward over padded THD (fp32 arithmetic, online
// softmax). Per-tensor ragged offsets: Q rows, O rows, stats rows and K/V rows each have their own.
// A block takes 16 query rows of one segment and one query head (4 warps, 4 rows each); K/V tiles
// of 32 keys go through shared memory, lane j scores key j. GQA: kv head = h / (hq / hkv).
// Masks: none, causal top-left / bottom-right (q position = offset + i), optional sliding window;
// under CP the segment's q_causal_offset is used. Rows with no allowed key: O = 0, LSE = -inf.
// Only valid rows are written (O and LSE); pad slots are never touched. Split-KV (num_splits > 1):
// grid.z = split, partial states (O_j, LSE_j) per split, merged by a combine kernel (-inf guarded).
// Bug knobs: derived_offsets (every base row from prefix(lens), the bound offsets ignored;
// cudnn-frontend #737) and tail_read (whole key tiles loaded past the sequence end, their V not
// masked, so 0 * NaN poisons P@V; cudnn-frontend #624), decode_tile_unmasked (mask=none, a document
// with q_len = 1: its keys run to the end of the 256-wide key tile of a decode kernel, lanes past kv_len
// unmasked; flashinfer #3716), split_max_seqlen and split_combine_stride0 (split-KV only: below). All
// stay inside the buffers.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "device_inputs.h"

namespace ao::gpu {

inline constexpr int kSdpaTileRows = 16, kSdpaTileKeys = 32, kSdpaMaxDim = 256;
inline constexpr int kSdpaMaxSplits = 1024;  // grid.z
inline constexpr int kSdpaDecodeTileKeys = 256;  // the decode kernel's key tile (decode_tile_unmasked)

struct SdpaDoc {
  int64_t q_off = 0, kv_off = 0, o_off = 0, stats_off = 0, q_len = 0, kv_len = 0;
};
struct SdpaSeg {
  int32_t doc = 0, pad_ = 0;
  int64_t row0 = 0, o_row0 = 0, stats_row0 = 0, pos0 = 0, rows = 0, valid = 0;
};
struct SdpaTile {
  int32_t seg = 0, pad_ = 0;
  int64_t i0 = 0;
};

struct SdpaProblem {
  const SdpaDoc* docs = nullptr;
  const SdpaSeg* segs = nullptr;
  const SdpaTile* tiles = nullptr;
  int64_t ntiles = 0;
  const void* q = nullptr;  // [q_rows, hq, dim]
  const void* k = nullptr;  // [kv_rows, hkv, dim]
  const void* v = nullptr;  // [kv_rows, hkv, dim_v]
  Storage st = Storage::F32;
  int hq = 0, hkv = 0, dim = 0, dim_v = 0;
  float scale = 1;
  int mask = 1;             // 0 none, 1 causal top-left, 2 causal bottom-right
  int64_t window = 0;
  bool cp = false;          // positions from the segment's q_causal_offset (pos0)
  bool derived_offsets = false, tail_read = false, decode_tile_unmasked = false;
  // Split-KV (num_splits > 1): split j of a document takes its keys [j * split_keys, (j + 1) * split_keys),
  // split_keys = ceil(max_seqlen_kv / num_splits); each writes a partial (O_j, LSE_j) into part_o /
  // part_lse (indexed by split, tile, tile row), and a combine kernel merges them into o / lse.
  int num_splits = 1;
  int64_t max_seqlen_kv = 0, split_keys = 0;
  bool split_max_seqlen = false;       // bug: the key extent (split range end, bottom-right shift) = max_seqlen_kv
  bool split_combine_stride0 = false;  // bug: the combine writes O with batch stride 0 (onto document 0's rows)
  float* part_o = nullptr;             // [num_splits, ntiles * kSdpaTileRows, hq, dim_v]
  float* part_lse = nullptr;           // [num_splits, ntiles * kSdpaTileRows, hq]
  int64_t kv_rows = 0;
  float* o = nullptr;       // [o_rows, hq, dim_v]
  float* lse = nullptr;     // [stats_rows, hq]
};

void launch_sdpa(const SdpaProblem& p, cudaStream_t s);

}  // namespace ao::gpu
