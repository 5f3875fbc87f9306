// How cudnn-sdpa expresses an oracle Layout as one cuDNN ragged (THD) SDPA call. Host code only, no
// cuDNN include, so the mapping is unit-tested on machines without a GPU.
//
// Promises:
//  * One cuDNN batch entry per query segment with at least one valid row (cp == 1: one per document).
//    Entry b reads Q rows [q_row0, q_row0 + q_len) and K/V rows [kv_row0, kv_row0 + kv_len), writes O at
//    o_row0 and stats at stats_row0: the layout's own ragged offsets, never prefix sums of lengths.
//  * cp > 1 (or any segment whose first row sits at pos0 > 0): the CP key-prefix shape. The entry's keys
//    are the document's first min(kv_len, pos0 + valid) keys under a bottom-right causal mask, which puts
//    row i at position pos0 + i — exactly the oracle's allowed keys (layout.h). mask=none keeps all keys.
//  * Ragged offsets are in ELEMENTS (cuDNN's unit), B+1 entries, the last one the buffer capacity:
//    Q = row * hq * d, K = row * hkv * d, V = row * hkv * dv, O = row * hq * dv, stats = row * hq.
//    INT32 unless a value exceeds INT32_MAX, then INT64.
//  * Device output buffers start as sentinels: O in bf16/fp16 holds a NaN with a payload no GPU
//    arithmetic produces (bf16 0x7fe5, fp16 0x7fa5; canonical NaNs are 0x7fc0/0x7fff and 0x7e00/0x7fff)
//    and is mapped back to the oracle's fp32 sentinel on the way back; stats are fp32 and hold the
//    oracle's sentinel bits 0x7fe5a5a5 directly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn_oracle/layout/layout.h"

namespace ao::cudnn {

struct RaggedEntry {
  int doc = 0, segment = 0;
  int64_t q_row0 = 0, kv_row0 = 0, o_row0 = 0, stats_row0 = 0;
  int64_t q_len = 0, kv_len = 0;
};

enum class CudnnMask { None, TopLeft, BottomRight };

struct RaggedProblem {
  std::vector<RaggedEntry> entries;
  int64_t hq = 0, hkv = 0, d = 0, dv = 0;
  int64_t max_q = 0, max_kv = 0;         // the s_q / s_kv dims of the cuDNN tensors
  int64_t q_rows = 0, kv_rows = 0, o_rows = 0, stats_rows = 0;  // buffer capacities (rows)
  CudnnMask mask = CudnnMask::None;
  int64_t window = 0;                    // left bound (keys in (p - window, p]); 0 = none
  double scale = 1;
  bool int64_offsets = false;
  // Ragged offsets in elements, B+1 entries each; sequence lengths, B entries.
  std::vector<int64_t> q_off, k_off, v_off, o_off, stats_off;
  std::vector<int32_t> seq_q, seq_kv;

  int64_t batch() const { return int64_t(entries.size()); }
};

// Empty when cudnn-sdpa can express the case; otherwise why not (the backend's skip reason).
std::string unsupported_reason(const Layout& l);
// Precondition: unsupported_reason(l) is empty.
// derived_offsets: the offsets as prefix sums of the lengths instead of the bound ones (the
// derived-offsets defect, re-created on real cuDNN output; cp == 1 only).
RaggedProblem make_ragged_problem(const Layout& l, bool derived_offsets = false);
// One line for logs and reports: "b=3 s_q=4 s_kv=4 hq=2 hkv=1 d=64 mask=topleft q_off=[0,256,...]".
std::string describe(const RaggedProblem& p);

// Where the backward's dK/dV rows go. cuDNN writes each batch entry's dK/dV rows through their ragged
// offsets; it never adds to what is there. Entries with disjoint key rows (cp == 1: one entry per
// document) write straight into the oracle's K-row buffers, so a write into a pad slot between documents
// is seen. Entries that share a document's keys (a CP rank's two zigzag chunks, each over its own key
// prefix) would overwrite each other: each writes its own rows of a scratch buffer instead, and the host
// sums the entries' partials in fp32, as a CP framework sums a step's partial dK/dV. Valid key rows that
// no entry covers (keys past every chunk's prefix) hold 0, what a caller's zero-initialised gradient holds.
struct GradKvPlacement {
  bool accumulate = false;            // scratch rows summed on the host (entries share key rows)
  std::vector<int64_t> row0;          // per entry: its first dK/dV row in the device buffer
  int64_t rows = 0;                   // rows of the device dK/dV buffers (guard band not included)
  std::vector<int64_t> dk_off, dv_off;  // ragged offsets in elements, B+1 entries (the last: `rows`)
  std::vector<char> zero_rows;        // per K-buffer row: a valid key row no entry covers (set to 0)
};
GradKvPlacement grad_kv_placement(const Layout& l, const RaggedProblem& p);

// The backward's dO rows follow the Q buffer ([q_rows, hq, dim_v], tensors.h): offsets in elements.
std::vector<int64_t> dout_offsets(const RaggedProblem& p);

// 16-bit device encodings of the case dtype (bf16 or fp16), with the output sentinel.
uint16_t to_half_bits(DType t, float x);
uint16_t half_sentinel_bits(DType t);
// Device half -> oracle fp32; the half sentinel becomes the oracle's fp32 sentinel.
float from_half_bits(DType t, uint16_t bits);

}  // namespace ao::cudnn
