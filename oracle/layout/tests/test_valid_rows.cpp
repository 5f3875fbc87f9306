// valid_rows / for_each_valid_row (layout.h), the one definition of "which result rows hold a valid
// token", against the four per-file versions it replaced (copied here as they were at a930b7e), on
// generated layouts of both ops from recorded seeds (CP, padded, explicit O/stats offsets included).
#include <gtest/gtest.h>

#include <algorithm>

#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/layout/layout.h"

using namespace ao;

namespace {

// compare_sdpa.cpp (clobbered_pad_slots) and selftest.cpp (outputs_differ) had this same loop.
std::pair<std::vector<char>, std::vector<char>> old_compare_sdpa(const Layout& l) {
  std::vector<char> o_valid(size_t(l.o_rows), 0), s_valid(size_t(l.stats_rows), 0);
  for (const auto& s : l.segments)
    for (int64_t i = 0; i < s.valid; ++i) {
      o_valid[size_t(s.o_row0 + i)] = 1;
      s_valid[size_t(s.stats_row0 + i)] = 1;
    }
  return {o_valid, s_valid};
}

// oracle/backends/models/tile_stores.cpp (store_overrun).
std::vector<char> old_store_overrun_owned(const Layout& l) {
  std::vector<char> owned(size_t(std::max(l.o_rows, l.q_rows)), 0);
  for (const auto& s : l.segments)
    for (int64_t i = 0; i < s.valid; ++i) owned[size_t((l.c.op == Op::Indexer ? s.row0 : s.o_row0) + i)] = 1;
  return owned;
}

// svg_error_map.cpp (owners): the Q row each O/stats row holds, -1 for none.
std::vector<int64_t> old_svg_owner(const Layout& l, bool stats) {
  std::vector<int64_t> owner(size_t(stats ? l.stats_rows : l.o_rows), -1);
  for (const auto& s : l.segments)
    for (int64_t i = 0; i < s.valid; ++i) owner[size_t((stats ? s.stats_row0 : s.o_row0) + i)] = s.row0 + i;
  return owner;
}

}  // namespace

TEST(ValidRows, SameAsThePerFileVersionsOnGeneratedLayouts) {
  int layouts = 0, with_pad_rows = 0, cp = 0;
  for (uint64_t seed : {5u, 20261203u})
    for (uint64_t i = 0; i < 300; ++i) {
      const Case c = generate_case(seed, i);
      const Layout l = make_layout(c, LayoutLimits{int64_t(1) << 40});
      ++layouts;
      cp += l.is_cp();
      const auto [o_old, s_old] = old_compare_sdpa(l);
      const auto o = valid_rows(l, RowBuffer::O), st = valid_rows(l, RowBuffer::Stats), q = valid_rows(l, RowBuffer::Q);
      ASSERT_EQ(o, o_old) << print_case(c);
      ASSERT_EQ(st, s_old) << print_case(c);
      // store_overrun's vector was sized for both buffers; the rows past the op's buffer were never set.
      const auto owned = old_store_overrun_owned(l);
      const auto& mine = c.op == Op::Indexer ? q : o;
      ASSERT_TRUE(std::equal(mine.begin(), mine.end(), owned.begin())) << print_case(c);
      ASSERT_TRUE(std::all_of(owned.begin() + long(mine.size()), owned.end(), [](char x) { return x == 0; }));
      for (bool stats : {false, true}) {
        std::vector<int64_t> owner(size_t(stats ? l.stats_rows : l.o_rows), -1);
        for_each_valid_row(l, stats ? RowBuffer::Stats : RowBuffer::O, [&](int64_t qr, int64_t b) { owner[size_t(b)] = qr; });
        ASSERT_EQ(owner, old_svg_owner(l, stats)) << print_case(c);
      }
      with_pad_rows += std::count(q.begin(), q.end(), 0) > 0;
    }
  EXPECT_EQ(layouts, 600);
  EXPECT_GT(with_pad_rows, 100);  // the generator's padded layouts: pad slots and CP pad rows
  EXPECT_GT(cp, 50);
}
