// The judged region (judged_region.h) on generated layouts from recorded seeds (padded THD, CP, TE
// offsets; both ops; pad_writes forbid and allow): for every output buffer row, one change to that row
// must be judged alike by the rule as documented, by the comparator (compare: the verdict fails) and by
// the selftest's observability (outputs_differ), and explain's units must count it. A comparator and the
// selftest that disagreed about a row (a pad slot one of them skips, a -1 fill one of them counts as a
// write, a checked row one of them ignores) fail here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/compare/compare.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

struct Change {
  const char* what;
  bool fill;  // the indexer's -1: a value in a checked row, not a write in a pad slot
};

// The rule as documented, independent of the region's code: is a change to row `row` of this output
// buffer judged?
bool judged_by_rule(const Layout& l, RowBuffer b, int64_t row, const Change& ch) {
  const bool forbid = l.c.pad_writes == PadWrites::Forbid;
  if (b == RowBuffer::Q && l.c.pass == Pass::Fwd) {  // indexer top-k: every checked segment row; pad slots are rows outside segments
    if (l.row_segment[size_t(row)] < 0) return forbid && !ch.fill;
    return std::binary_search(l.check_rows.begin(), l.check_rows.end(), row);
  }
  // SDPA O / LSE, the backward's Q-row gradients: the checked rows of valid tokens; K/V-row gradients: every
  // valid K/V row; every other row of the buffer is a pad slot.
  const std::vector<char> valid = valid_rows(l, b);
  if (!valid[size_t(row)]) return forbid;
  if (b == RowBuffer::KV) return true;
  bool checked = false;
  for_each_valid_row(l, b, [&](int64_t q, int64_t r) {
    if (r == row) checked = std::binary_search(l.check_rows.begin(), l.check_rows.end(), q);
  });
  return checked;
}

// Rows of a buffer to change: all of a small buffer, else its first and last rows, every segment's
// first and last rows (boundaries and pad rows) and a spread between.
std::vector<int64_t> rows_to_change(const Layout& l, int64_t n) {
  std::vector<int64_t> v;
  if (n <= 32) {
    for (int64_t r = 0; r < n; ++r) v.push_back(r);
    return v;
  }
  for (int64_t r = 0; r < n; r += std::max<int64_t>(1, n / 16)) v.push_back(r);
  v.push_back(n - 1);
  for (const auto& s : l.segments)
    for (int64_t r : {s.row0, s.row0 + s.valid - 1, s.row0 + s.valid, s.row0 + s.rows - 1, s.o_row0 + s.valid})
      if (r >= 0 && r < n) v.push_back(r);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  if (v.size() > 32) v.resize(32);
  return v;
}

}  // namespace

TEST(JudgedRegion, ComparatorSelftestAndRuleAgreeOnEveryChangedRow) {
  auto ref_backend = make_backend("cpu-ref");
  int cases = 0, cp = 0, padded = 0, forbid = 0, allow = 0, judged = 0, unjudged = 0, fills_in_pads = 0;
  for (uint64_t seed : {7u, 20261204u})
    for (uint64_t i = 0, here = 0; i < 600 && here < 16; ++i) {
      Case c = generate_case(seed, i);
      c.pad_writes = i % 2 ? PadWrites::Allow : PadWrites::Forbid;
      Layout probe;
      try {
        probe = make_layout(c, LayoutLimits{int64_t(1) << 40}, LayoutMode::Describe);
      } catch (const CaseError&) {
        continue;
      }
      // Small cases only: every change below re-runs the comparator (SDPA: its exact answer on every checked row).
      if (probe.check_row_count * std::max<int64_t>(probe.kv_rows, 1) > 300000 || probe.q_rows > 4000 ||
          probe.o_rows > 4000)
        continue;
      Trial t(c);
      const Layout& l = t.layout();
      const TrialRun ref = t.run(*ref_backend);
      ASSERT_TRUE(ref.ok()) << print_case(c);
      ASSERT_EQ(compare(l, t.inputs(), ref.out, ref.out).kind, Verdict::Pass) << print_case(c);
      const JudgedRegion region(l);
      ASSERT_FALSE(region.any_differs(ref.out, ref.out));
      ++cases, ++here;
      cp += l.is_cp();
      forbid += c.pad_writes == PadWrites::Forbid;
      allow += c.pad_writes == PadWrites::Allow;
      const auto q_valid = valid_rows(l, RowBuffer::Q);
      padded += std::count(q_valid.begin(), q_valid.end(), 0) > 0;

      const auto outs = output_specs(c);
      for (size_t o = 0; o < outs.size(); ++o) {
        const OutputSpec& s = outs[o];
        const bool index = s.compare != RowCompare::Floats;
        std::vector<Change> changes = {{"a write", false}};
        if (index) changes.push_back({"a -1 fill", true});
        for (int64_t row : rows_to_change(l, buffer_rows(l, s.rows)))
          for (const Change& ch : changes) {
            Outputs got = ref.out;
            const size_t at = size_t(row) * size_t(s.width);
            if (index) {
              got.topk[at] = ch.fill ? -1 : int32_t(l.kv_rows + 7);  // -1, or an index out of the KV buffer
            } else {
              // A computed NaN: contamination in a judged row, a write in a pad slot.
              (got.*s.floats)[at] = std::numeric_limits<float>::quiet_NaN();
            }
            const float was = index ? 0.f : (ref.out.*s.floats)[at];
            const bool changed = index ? got.topk[at] != ref.out.topk[at] : is_sentinel(was) || !std::isnan(was);
            const bool rule = changed && judged_by_rule(l, s.rows, row, ch);
            const bool comparator = compare(l, t.inputs(), got, ref.out).kind != Verdict::Pass;
            const bool selftest = outputs_differ(l, got, ref.out);
            const auto d = region.differs(got, ref.out);
            const bool explain = std::find(d.begin(), d.end(), char(1)) != d.end();
            const std::string where =
                fmt::format("{} in {} row {} of {} ({} rows)", ch.what, s.name, row, print_case(c), buffer_rows(l, s.rows));
            ASSERT_EQ(comparator, rule) << "comparator vs rule: " << where;
            ASSERT_EQ(selftest, rule) << "selftest vs rule: " << where;
            ASSERT_EQ(explain, rule) << "explain vs rule: " << where;
            (rule ? judged : unjudged) += 1;
            fills_in_pads += ch.fill && index && l.row_segment[size_t(row)] < 0 && c.pad_writes == PadWrites::Forbid;
          }
      }
    }
  // The seeds reach what the region distinguishes.
  std::printf("  %d cases (%d CP, %d padded, %d forbid, %d allow): %d changes judged, %d not, %d fills in pad slots\n",
              cases, cp, padded, forbid, allow, judged, unjudged, fills_in_pads);
  EXPECT_EQ(cases, 32);
  EXPECT_GT(cp, 2);
  EXPECT_GT(padded, 4);
  EXPECT_GT(forbid, 8);
  EXPECT_GT(allow, 8);
  EXPECT_GT(judged, 200);
  EXPECT_GT(unjudged, 40);
  EXPECT_GT(fills_in_pads, 5);
}

// A pad slot is judged on whether it was written, not on its order: two clobbers that write the same
// indices in another order are the same clobber; the value rows of ties=strict compare in order.
TEST(JudgedRegion, IndexRowsCompareAsSetsUnlessStrictAndPadsAsWrites) {
  for (const char* ties : {"", " ties=strict"}) {
    const Layout l = make_layout(parse_case(std::string("op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4") + ties));
    const JudgedRegion r(l);
    ASSERT_EQ(r.value_rows(), l.check_rows);
    ASSERT_EQ(r.size(), l.check_rows.size() + 4);  // Q rows 3, 6, 7, 12 are outside every segment
    Outputs a = make_sentinel_outputs(l), b = a;
    for (int e = 0; e < 4; ++e) a.topk[size_t(e)] = b.topk[size_t(3 - e)] = e < 2 ? e : -1;
    EXPECT_EQ(r.equal(0, a, b), std::string(ties).empty());
    a.topk[3 * 4] = 1, a.topk[3 * 4 + 1] = 2;  // Q pad row 3
    b.topk[3 * 4] = 2, b.topk[3 * 4 + 1] = 1;
    const size_t pad = l.check_rows.size();
    ASSERT_TRUE(r.is_pad(pad));
    EXPECT_EQ(r.unit(pad).row, 3);
    EXPECT_TRUE(r.equal(pad, a, b));
    EXPECT_TRUE(r.pad_written(pad, a));
    b.topk[3 * 4 + 1] = -1;
    EXPECT_FALSE(r.equal(pad, a, b));
    EXPECT_EQ(r.clobbered_pad_slots(b), 1);
  }
}
