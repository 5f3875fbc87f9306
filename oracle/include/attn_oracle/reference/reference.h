// Exact CPU references (Eigen, fp32 or fp64 per case precision). They read inputs only from valid
// slots, compute only layout.check_rows, and write outputs at the bound offsets.
// Quirks turn the reference into a bug model: each is a small variation of the same path that
// re-creates one real defect class (see bug_models() in oracle/backends/cpu_backends.cpp). The default Quirks{} is the oracle.
#pragma once
#include "attn_oracle/inputs/tensors.h"

namespace ao {

struct Quirks {
  bool topleft_cp = false;          // chunk-local top-left causal mask (pos0 ignored)
  bool derived_offsets = false;     // address every tensor by prefix(lens), ignoring bound offsets
  bool shared_qkv_offsets = false;  // read K/V through the Q offsets
  int tail_read_tile = 0;           // >0: P@V over whole key tiles, reading pad rows past the end
  bool off_by_one = false;          // keeps key p+1
  bool cross_doc = false;           // causal over the whole pack, ignoring document boundaries
  bool gqa_modulo = false;          // kv head = h % hkv instead of h / group
  bool lse_log2 = false;            // LSE written in log2
  bool stats_packed = false;        // LSE written at packed prefix rows, ignoring stats offsets
  bool fill_zero = false;           // short rows filled with 0 instead of -1
  // issue 15 (win)
  bool cp_drops_window = false;          // cp > 1: the sliding window is dropped (plain causal)
  bool cp_local_keys = false;            // cp > 1: only the keys at this rank's own chunks' positions
  bool topleft_for_bottomright = false;  // mask=bottomright built as top-left (shift 0, CP chunk offsets kept)
  int decode_tile = 0;                   // >0: mask=none, q_len=1: keys up to the end of the last tile this wide
  bool batch_stride_max_seqlen = false;  // document b's keys at b * max_seqlen_kv instead of its offset
  bool window_left_only = false;         // a two-sided band loses its right bound (window_right > 0 -> -1)
  bool sentinel_widen = false;           // window + window_right < 0 widened to full attention
  bool sentinel_empty_band = false;      // the unbounded sentinel -1 used as a number ((-1, 0): empty band)
  bool clamp_right_before_shift = false; // window_right > max_seqlen_kv clamped to it before the bottom-right shift
  // issue 15 (split)
  int num_splits = 0;               // > 0: split-KV path (partial (O, LSE) per key split, merged); see kCaseSplits
  bool merge_unguarded = false;     // split-KV merge without the -inf guard: two empty partial states give NaN
  bool finite_neg_inf = false;      // the running max starts at the finite -5e4 instead of -inf
  bool split_max_seqlen = false;    // num_splits > 1: key bound and bottom-right shift from max_seqlen_kv, not kv_len
  // issue 15 (idx): indexer catalog models (catalog_indexer_models.cpp)
  bool row_start_ignored = false;   // [1] keys ranked from buffer row 0 up to the row's end
  int64_t long_row_keys = 0;        // [2] > 0: rows with more allowed keys rank buffer rows [0, n)
  int64_t start_align = 0;          // [3] > 0: the row's key start aligned down to this many buffer rows
  bool compressed_tail_zero = false;  // [8] ratio > 1, q_len = 1: the last allowed key's K row read as 0
  int swizzle_bytes = 0;            // [11] > 0: K rows shorter than this read through its XOR swizzle
  int64_t radix_bin_cap = 0;        // > 0: the k-th score's radix bin keeps this many keys, in index order
  bool chunk_keys_only = false;     // [9] allowed end also capped at floor(q_len / ratio): the chunk's keys
};

// Quirks::num_splits: the split-KV path with the case's num_splits.
inline constexpr int kCaseSplits = -1;
// Quirks::finite_neg_inf: flashinfer's finite "-inf" (flashinfer #4267).
inline constexpr double kFiniteNegInf = -5e4;

void reference_indexer(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk = {});
// One key's indexer score in fp64 (scale * sum_h w_h ReLU(q_h . k)): the comparator's exact score, and
// under ties=strict the reference's order of tied keys (equal fp64 scores ascend by index).
double exact_indexer_score(const Layout& l, const Inputs& in, int64_t row, int64_t key_row);
void reference_sdpa(const Layout& l, const Inputs& in, Outputs& out, const Quirks& qk = {});

}  // namespace ao
