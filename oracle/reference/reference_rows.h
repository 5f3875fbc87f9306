// Shared by the references: how check rows are grouped into blocks, and the key ranges a row reads
// (the seams' ranges, clipped into the KV buffer).
#pragma once
#include <algorithm>
#include <vector>

#include "attn_oracle/reference/reference_seams.h"

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

// The key ranges row r reads, as the seams address them; keys outside the KV buffer are dropped (a
// real kernel would read out of bounds; the CPU model must not), so a model re-creates the kernel's
// wrong answer without its memory error, and nothing is sized by a max_seqlen beyond what the buffer
// holds. Every range, empty ones included, ends up inside the buffer: 0 <= base + lo <= base + hi <=
// kv_rows (a base past the buffer's end, as a capacity-derived stride gives, leaves an empty range at
// the end).
inline std::vector<KeyRange> row_key_ranges(const Layout& l, int64_t r, const ReferenceSeams& s) {
  std::vector<KeyRange> out = s.key_ranges(l, r);
  for (auto& k : out) {
    k.hi = std::min(k.hi, l.kv_rows - k.base);
    k.lo = std::clamp(k.lo, -k.base, std::max(k.hi, -k.base));
    k.hi = std::max(k.hi, k.lo);
  }
  return out;
}

}  // namespace ao::detail
