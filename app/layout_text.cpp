// `attn-oracle show` (layout_text.h).
#include "layout_text.h"

#include "attn_oracle/case/enum_names.h"

#include <algorithm>

#include <fmt/format.h>

namespace ao {

std::string describe_layout(const Layout& l) {
  const Case& c = l.c;
  std::string s = fmt::format("case: {}\n", print_case(c));
  s += fmt::format("buffers: Q {} rows, K/V {} rows, O {} rows, stats {} rows; {:.1f} MiB of tensors\n", l.q_rows,
                   l.kv_rows, l.o_rows, l.stats_rows, double(l.tensor_bytes) / (1 << 20));
  if (l.is_cp())
    s += fmt::format("context parallel: cp={} rank={} scheme={} (Q/O rows are this rank's local buffer; K/V are "
                     "the all-gathered global buffer)\n",
                     c.cp, c.rank, to_string(c.cp_scheme));
  s += "documents:\n";
  for (size_t b = 0; b < l.docs.size(); ++b) {
    const auto& d = l.docs[b];
    s += fmt::format("  doc {}: q_len {} kv_len {} | K/V rows [{}, {}) | global Q offset {} padded length {}\n", b,
                     d.q_len, d.kv_len, d.kv_off, d.kv_off + d.kv_len, l.is_cp() ? d.q_off : d.q_off, d.q_padded);
  }
  s += "query segments (q_causal_offset = pos0):\n";
  for (const auto& g : l.segments) {
    int64_t lo0, hi0, lo1, hi1;
    l.allowed_range(g.doc, g.pos0, lo0, hi0);
    l.allowed_range(g.doc, g.pos0 + std::max<int64_t>(g.valid, 1) - 1, lo1, hi1);
    s += fmt::format(
        "  doc {} chunk {:>3}: Q rows [{}, {}) valid {} | positions [{}, {}) | O rows from {} | stats rows from {} "
        "| first row keys [{}, {}), last valid row keys [{}, {}) | kernel key extent {}\n",
        g.doc, g.chunk, g.row0, g.row0 + g.rows, g.valid, g.pos0, g.pos0 + g.rows, g.o_row0, g.stats_row0, lo0, hi0,
        lo1, hi1, g.key_len);
  }
  int64_t seg_rows = 0;  // segments do not overlap
  for (const auto& g : l.segments) seg_rows += g.rows;
  int64_t kvvalid = 0;
  for (const auto& d : l.docs) kvvalid += d.kv_len;
  s += fmt::format("pad slots: Q {} rows outside segments, K/V {} rows\n", l.q_rows - seg_rows, l.kv_rows - kvvalid);
  s += fmt::format("checked rows: {} of {}\n", l.check_row_count, seg_rows);
  s += fmt::format("memory: about {:.1f} MiB at peak (estimate checked against --max-mem)\n",
                   double(l.mem_bytes) / (1 << 20));
  return s;
}

}  // namespace ao
