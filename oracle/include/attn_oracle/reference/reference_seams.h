// The places where attention kernels go wrong, as named seams of the exact references: which keys a
// row sees, where a row is read from and its outputs land, which KV head a query head reads, how a K
// tile is read, how the top-k is selected, how split-KV partial states merge, how values are stored.
// Every virtual's default is the exact behaviour; a bug model (oracle/backends/models/) overrides one
// to re-create a kernel's wrong answer on the reference's own path. The references call them per row,
// per head or per tile, never per key: per-key work sits behind a predicate (alters_key_reads,
// filters_candidates) that the exact path answers false.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "attn_oracle/inputs/tensors.h"

namespace ao {

// A run of keys a row attends: KV buffer rows base + [lo, hi) (lo may be negative: a base that is the
// document's while the keys start in an earlier buffer row).
struct KeyRange {
  int64_t base, lo, hi;
};

// How a row's keys are cut into split-KV partial states and merged (reference_sdpa.cpp merge_partials).
struct KeySplits {
  int n = 1;                   // key splits of ceil(max_seqlen_kv / n) keys (1: one softmax over the row)
  bool guard = true;           // the merge keeps two empty states (max -inf) empty; without it: NaN
  bool nan_rows_only = false;  // only the rows whose merged state is NaN take the split result (a correct
                               // merge differs from the exact path by rounding alone)
};

class ReferenceSeams {
 public:
  virtual ~ReferenceSeams() = default;

  // Which keys row r attends, in order: the exact answer is one range, the document's bound KV offset
  // and Layout::allowed_range. The reference clips every range into the KV buffer (a model re-creates
  // a kernel's wrong answer, never its out-of-buffer read).
  virtual std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const;
  // Where row r's Q (and indexer weights) are read from, and where its outputs land: the top-k/score
  // row (the indexer's follow Q rows), the O row, the stats (LSE) row.
  virtual int64_t q_read_row(const Layout& l, int64_t r) const;
  virtual int64_t topk_write_row(const Layout& l, int64_t r) const { return q_read_row(l, r); }
  virtual int64_t o_write_row(const Layout& l, int64_t r) const;
  virtual int64_t stats_write_row(const Layout& l, int64_t r) const;
  // The KV head query head h reads.
  virtual int kv_head(const Layout& l, int h) const;

  // Indexer K reads. alters_key_reads: the kernel reads some K tiles other than they are stored (the
  // exact path reads them in place and decides near-ties exactly; a model that alters reads does not).
  virtual bool alters_key_reads(const Layout&) const { return false; }
  // Only when alters_key_reads: K rows base + [t0, t0 + n) as the kernel reads them into dst (n x dim);
  // last_range: the row's last key range (the document's own keys).
  virtual void read_key_tile(const Layout& l, const Inputs& in, int doc, bool last_range, int64_t base, int64_t t0,
                             int64_t n, float* dst) const;
  // A buffer row among row r's keys whose K row the kernel reads as zeros, -1 for none; last: the
  // row's last key range, clipped.
  virtual int64_t zeroed_key(const Layout&, int64_t /*r*/, const KeyRange& /*last*/) const { return -1; }

  // Indexer top-k selection. filters_candidates: the kernel drops some scored keys before the top-k;
  // filter_candidates removes them from a row's scored keys (score, buffer row), in index order.
  virtual bool filters_candidates(const Layout&) const { return false; }
  virtual void filter_candidates(std::vector<std::pair<float, int32_t>>& keys, size_t k) const;
  virtual void filter_candidates(std::vector<std::pair<double, int32_t>>& keys, size_t k) const;

  // SDPA P @ V runs over whole key tiles of this many rows: the rows past the last range's end up to
  // the tile's end have probability 0, but their V values enter the product (0 * NaN = NaN).
  virtual int64_t pv_key_tile(const Layout&) const { return 1; }
  // SDPA split-KV: the key splits of a row and their merge (n = 1: the exact single softmax).
  virtual KeySplits key_splits(const Layout&) const { return {}; }
  // SDPA running max's start value: -inf; a finite start m0 never moves for a row whose every logit is
  // below it, and exp(x - m0) underflows in fp32 below m0 - 104 (the row's sum stays 0).
  virtual double initial_max() const;
  // The stored LSE is ln(sum exp) divided by this (ln 2: an LSE in base 2).
  virtual double lse_divisor() const { return 1.0; }

  // SDPA backward (pass=bwd; reference_sdpa_bwd.cpp). Its key ranges, KV heads and Q/dO reads are the
  // forward's seams above. Which saved rows row r reads back: its LSE (P = exp(s - lse)) and its O
  // (D = rowsum(dO o O)).
  virtual int64_t stats_read_row(const Layout& l, int64_t r) const { return stats_write_row(l, r); }
  virtual int64_t o_read_row(const Layout& l, int64_t r) const { return o_write_row(l, r); }
  // Where row r's dQ lands, and where K/V buffer row k's dK/dV land.
  virtual int64_t dq_write_row(const Layout& l, int64_t r) const { return q_read_row(l, r); }
  virtual int64_t dkv_write_row(const Layout&, int64_t k) const { return k; }
  // The factors of dQ = f * dS K and dK = f * dS^T Q: the softmax scale.
  virtual double dq_scale(const Layout& l) const;
  virtual double dk_scale(const Layout& l) const;
  // How the dK/dV contributions of a K/V row combine: summed over a GQA group's query heads (false: the
  // group's first query head's alone), and over the segments (CP chunks) whose rows reach it (false:
  // each segment's contribution replaces what earlier segments gave the keys it reaches).
  virtual bool dkv_sums_group(const Layout&) const { return true; }
  virtual bool dkv_sums_segments(const Layout&) const { return true; }
  // A row whose saved LSE is infinite (no allowed key) contributes nothing and gets dQ = 0 (false:
  // exp(s - lse) over its masked scores, -inf - -inf = NaN).
  virtual bool guards_empty_rows(const Layout&) const { return true; }
};

// The exact references' seams (every default).
const ReferenceSeams& exact_seams();

}  // namespace ao
