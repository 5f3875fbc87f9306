// Layout: the validated, derived view of a Case: where every document's rows live in each buffer,
// which query rows this CP rank holds (segments), and each row's causal position.
//
// Semantics (docs/case.md):
//  * Documents b have valid lengths q_len/kv_len and per-tensor ragged offsets (rows) into Q/K/V/O/stats
//    buffers. Rows of a buffer not covered by a valid row are pad slots (gaps, capacity).
//  * Positions: a document's q tokens t = 0..q_len-1 sit at positions shift + t. Top-left (and mask=none):
//    shift = 0. Bottom-right: the queries are the document's LAST q_len positions, shift = L - q_len,
//    where L = kv_len*ratio is the document's uncompressed length (each key compresses `ratio` tokens;
//    ratio is 1 for sdpa, so L = kv_len and shift = kv_len - q_len). shift < 0 when q_len > L: the first
//    rows see no key but are real tokens. With q_len == kv_len*ratio (queries = the whole document)
//    shift = 0. The same rule holds with and without CP (CP splits the tokens t, not the positions).
//  * cp == 1: one segment per document, row i = token i, pos0 = shift.
//  * cp > 1 (zigzag): the padded document length P (offset difference, a multiple of 2*cp) is cut into
//    2*cp chunks of c = P/(2cp); rank r holds chunks r and 2cp-1-r, stored locally at q_off/cp.
//    Their rows are tokens [r*c, (r+1)*c) and [(2cp-1-r)*c, (2cp-r)*c) (pos0 = shift + tok0); tokens
//    >= q_len are pad rows (the chunk is partly or wholly padding). Keys are the all-gathered global K
//    buffer. Contiguous CP: rank r holds tokens [r*P/cp, (r+1)*P/cp).
//  * Inputs of a Q row are keyed by its token (packed_q_off + t), never by its position.
//  * Positions: start_pos >= 0 (indexer) places every document's first query at start_pos instead.
//  * Allowed keys of a row at position p in document b (doc coordinates s):
//      indexer: s < clamp(floor((p+1)/ratio), 0, kv_len)    (mask=none: s < kv_len)
//      sdpa:    s <= p + window_right (-1: no right bound), and the left bound: s > p - window
//               (cudnn, window > 0) or s >= p - window (fa, window >= 0); window = -1: none.
//               (mask=none: all s < kv_len)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "attn_oracle/case/case.h"
#include "attn_oracle/internal/hd.h"

namespace ao {

struct DocLayout {
  int64_t q_len = 0, kv_len = 0;
  int64_t q_off = 0, kv_off = 0, o_off = 0, stats_off = 0;  // global rows (q/o/stats: local under CP)
  int64_t q_padded = 0;                                      // padded q length (CP partitions this)
  int64_t packed_q_off = 0, packed_kv_off = 0;               // prefix sums of valid lengths
};

// A contiguous run of query rows that this rank holds, with its causal offset (q_causal_offsets).
struct QuerySegment {
  int doc = 0;
  int chunk = -1;          // zigzag/contiguous chunk id, -1 without CP
  int64_t row0 = 0;        // first Q row in the (local) Q buffer
  int64_t o_row0 = 0, stats_row0 = 0;
  int64_t tok0 = 0;        // index of row0 among the document's q tokens (CP: chunk * rows)
  int64_t pos0 = 0;        // document position of row0: what q_causal_offsets must carry
  int64_t rows = 0;        // rows in the segment, pad rows included
  int64_t valid = 0;       // rows [0, valid) are real tokens, the rest are pad rows
  int64_t key_len = 0;     // keys the kernel sees for this segment (crop: pos0+rows, else kv_len)
};

// What the process holds before any case: binary, libraries, BLAS/OpenMP pools, CLI state (measured
// peak RSS of a tiny case: test_memory_cap.cpp). Part of every memory estimate.
inline constexpr int64_t kProcessBaselineBytes = int64_t(96) << 20;

// Bottom-right shift: position of the first of q_len queries that end a document of kv_len*ratio
// uncompressed tokens (negative when q_len > kv_len*ratio). Shared with the CUDA mask knobs.
AO_HD int64_t bottom_right_shift(int64_t q_len, int64_t kv_len, int64_t ratio) { return kv_len * ratio - q_len; }

struct Layout;

// Working memory that a stage above the layout holds per thread during a run (the reference's row
// blocks, the comparator's row sets): each stage's scratch_bytes(). Entries with the same `what` are
// one part of the estimate; it grows with the key of its largest entry (the first on a tie).
struct ScratchBytes {
  const char* what;        // the part's name in a refusal
  double per_thread = 0;   // bytes
  std::string grows_with;  // a case key; empty: the key that made the K/V buffer long
};

struct LayoutLimits {
  int64_t max_bytes = int64_t(8) << 30;  // refuse cases whose estimated peak memory (mem_bytes) exceeds this
  int threads = 0;                        // threads the per-thread scratch is counted for (0: one)
  // The stages' per-thread scratch, summed into the budget before anything of the case's size exists.
  // The pipeline supplies it with the threads of this machine (with_stage_memory, pipeline/memory_budget.h);
  // empty: the layout's own parts (tensors, metadata, artifacts) and the process baseline only.
  std::function<std::vector<ScratchBytes>(const Layout&)> scratch = {};
};

// Full: everything a run needs. Describe: validation, documents, segments and the memory estimate
// only; no per-row vectors (row_segment and check_rows stay empty, check_row_count is still set), so
// `show` and corpus validation cost O(documents + sampled rows), not O(buffer rows).
enum class LayoutMode { Full, Describe };

struct Layout {
  Case c;
  std::vector<DocLayout> docs;
  std::vector<QuerySegment> segments;
  int64_t q_rows = 0, kv_rows = 0, o_rows = 0, stats_rows = 0;  // buffer capacities in rows
  std::vector<int32_t> row_segment;  // per Q row: segment index or -1 (pad slot outside segments)
  std::vector<int64_t> check_rows;   // sorted Q rows the oracle checks (segment rows only)
  int64_t check_row_count = 0;       // check_rows.size() (also in Describe mode)
  double scale = 1;
  int64_t max_seqlen_q = 0, max_seqlen_kv = 0;  // the case's max_seqlen, or the longest lengths
  int64_t split_len = 1;             // keys per split-KV range: ceil(max_seqlen_kv / num_splits)
  int64_t tensor_bytes = 0;          // inputs + both output sets
  int64_t mem_bytes = 0;             // estimated peak memory of a run, what the cap was checked against:
                                     // tensors, row and document metadata, reference and comparator
                                     // scratch, failure artifacts, and the process baseline

  bool is_cp() const { return c.cp > 1; }
  int group() const { return c.hq / c.hkv; }
  // Row helpers (r is a Q row inside a segment).
  const QuerySegment& seg_of(int64_t r) const { return segments[size_t(row_segment[size_t(r)])]; }
  int64_t pos_of(int64_t r) const { const auto& s = seg_of(r); return s.pos0 + (r - s.row0); }
  bool valid_row(int64_t r) const {
    return row_segment[size_t(r)] >= 0 && r - seg_of(r).row0 < seg_of(r).valid;
  }
  // Number of allowed keys (doc coordinates [lo, hi)) for a row at position p of document b.
  void allowed_range(int doc, int64_t p, int64_t& lo, int64_t& hi) const;
};

// The SDPA window band [lo, hi) of a row at position p among kv keys, for the bounds (left, right) in
// the convention conv (Case::window: -1 = unbounded). The one definition: allowed_range, the bug models
// that re-read the bounds, and the port in python/attn_oracle/adapters/protocol.py (window_band) use it.
void sdpa_window_band(WindowConvention conv, int64_t kv, int64_t p, int64_t left, int64_t right, int64_t& lo,
                      int64_t& hi);

Layout make_layout(const Case& c, const LayoutLimits& lim = {}, LayoutMode mode = LayoutMode::Full);

// The case as a kernel is given it: l.c with the values the layout resolved from their defaults filled in
// (scale, max_seqlen_q, max_seqlen_kv). The key table's kernel values (CaseKey::kernel) read it: meta.json
// and the plugin's ao_layout.
Case kernel_case(const Layout& l);

// Which rows of a result buffer hold a valid token's result (everything else is a pad slot or a
// segment's pad row, which a kernel must leave alone). The one definition that comparators, bug
// models, selftest and report pictures use. Q: the indexer's top-k/score rows (they follow Q rows).
// KV: the K/V buffer's rows (the backward's dK/dV): its valid rows are the K rows of valid tokens,
// of every document (under CP the all-gathered buffer: a rank's partial gradient covers all of it);
// they follow no Q row.
enum class RowBuffer { Q, O, Stats, KV };
int64_t buffer_rows(const Layout& l, RowBuffer b);
// Calls f(q_row, buffer_row) for every valid row of every segment, in segment order; for KV,
// f(-1, kv_row) for every valid K row, document by document.
template <class F>
void for_each_valid_row(const Layout& l, RowBuffer b, F&& f) {
  if (b == RowBuffer::KV) {
    for (const auto& d : l.docs)
      for (int64_t i = 0; i < d.kv_len; ++i) f(int64_t(-1), d.kv_off + i);
    return;
  }
  for (const auto& s : l.segments) {
    const int64_t row0 = b == RowBuffer::Q ? s.row0 : b == RowBuffer::O ? s.o_row0 : s.stats_row0;
    for (int64_t i = 0; i < s.valid; ++i) f(s.row0 + i, row0 + i);
  }
}
// Per row of the buffer: 1 where a valid token's result lives, else 0.
std::vector<char> valid_rows(const Layout& l, RowBuffer b);

}  // namespace ao
