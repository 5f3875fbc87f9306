#include "segment_report.h"

namespace ao::gpu {

std::vector<SegmentVerdict> segment_verdicts(const Trial& t, const TrialRun& got, const TrialRun& ref) {
  const Layout& l = t.layout();
  std::vector<SegmentVerdict> out;
  for (size_t s = 0; s < l.segments.size(); ++s) {
    std::vector<int64_t> rows;
    for (int64_t r : l.check_rows)
      if (l.row_segment[size_t(r)] == int32_t(s)) rows.push_back(r);
    SegmentVerdict v;
    v.doc = l.segments[s].doc;
    v.chunk = l.segments[s].chunk;
    v.pos0 = l.segments[s].pos0;
    v.rows_checked = int64_t(rows.size());
    v.verdict = t.judge_rows(got, ref, std::move(rows));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ao::gpu
