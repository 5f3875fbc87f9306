// Shared by the references: how check rows are grouped into blocks, and which keys a row reads
// (through the bound offsets, or through a bug model's wrong ones).
#pragma once
#include <algorithm>
#include <vector>

#include "attn_oracle/reference.h"

namespace ao::detail {

struct RowBlock {
  int seg = 0;
  std::vector<int64_t> rows;  // Q rows, all of one segment
};

// Check rows grouped by segment, at most `max_rows` per block (deterministic).
inline std::vector<RowBlock> row_blocks(const Layout& l, size_t max_rows) {
  std::vector<RowBlock> out;
  for (int64_t r : l.check_rows) {
    const int seg = l.row_segment[size_t(r)];
    if (out.empty() || out.back().seg != seg || out.back().rows.size() >= max_rows) out.push_back({seg, {}});
    out.back().rows.push_back(r);
  }
  return out;
}

// A run of keys a row may attend: KV buffer rows base + [lo, hi).
struct KeyRange {
  int64_t base, lo, hi;
};

// The key ranges a row reads, as the (possibly buggy) kernel addresses them; keys outside the
// KV buffer are dropped (a real kernel would read out of bounds; the CPU model must not).
inline std::vector<KeyRange> row_key_ranges(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  const auto& d = l.docs[size_t(seg.doc)];
  const int64_t p = qk.topleft_cp ? (r - seg.row0) : l.pos_of(r);
  int64_t lo, hi;
  l.allowed_range(seg.doc, p, lo, hi);
  if (qk.off_by_one && l.c.mask != MaskKind::None && hi < d.kv_len) hi += 1;
  auto base_of = [&](const DocLayout& x) {
    if (qk.derived_offsets) return x.packed_kv_off;
    if (qk.shared_qkv_offsets) return x.q_off;
    return x.kv_off;
  };
  std::vector<KeyRange> out;
  if (qk.cross_doc)
    for (int b = 0; b < seg.doc; ++b) out.push_back({base_of(l.docs[size_t(b)]), 0, l.docs[size_t(b)].kv_len});
  out.push_back({base_of(d), lo, hi});
  for (auto& k : out) {
    k.hi = std::min(k.hi, l.kv_rows - k.base);
    k.lo = std::min(k.lo, k.hi);
  }
  return out;
}

// Where a row's outputs go (Q row for the indexer's top-k, O row, stats row).
inline int64_t q_read_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if (qk.derived_offsets && !l.is_cp()) return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return r;
}
inline int64_t o_write_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if (qk.derived_offsets && !l.is_cp()) return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return seg.o_row0 + (r - seg.row0);
}
inline int64_t stats_write_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if ((qk.derived_offsets || qk.stats_packed) && !l.is_cp())
    return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return seg.stats_row0 + (r - seg.row0);
}

}  // namespace ao::detail
