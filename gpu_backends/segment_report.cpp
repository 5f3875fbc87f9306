#include "segment_report.h"

namespace ao::gpu {

std::vector<SegmentVerdict> segment_verdicts(const Layout& l, const Inputs& in, const Outputs& got,
                                             const Outputs& ref) {
  std::vector<SegmentVerdict> out;
  for (size_t s = 0; s < l.segments.size(); ++s) {
    Layout ls = l;
    ls.check_rows.clear();
    for (int64_t r : l.check_rows)
      if (l.row_segment[size_t(r)] == int32_t(s)) ls.check_rows.push_back(r);
    SegmentVerdict v;
    v.doc = l.segments[s].doc;
    v.chunk = l.segments[s].chunk;
    v.pos0 = l.segments[s].pos0;
    v.rows_checked = int64_t(ls.check_rows.size());
    v.verdict = compare(ls, in, got, ref);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ao::gpu
