// Explicit O/stats offsets (layout.cpp): B entries place the sequences in a buffer of the Q buffer's
// rows; B+1 entries give the buffer's own capacity last (like cu_seqlens_padded). A sequence that does
// not fit is refused with a message that says which buffer, how many rows, and how to give more.
#include <gtest/gtest.h>

#include <string>

#include "attn_oracle/layout/layout.h"

using namespace ao;

namespace {

std::string layout_error(const std::string& line, std::string& key) {
  try {
    (void)make_layout(parse_case(line));
  } catch (const CaseError& e) {
    key = e.key;
    return e.what();
  }
  return "";
}

TEST(OutputOffsets, CapacityLastEntryIsTheBuffersCapacity) {
  const Layout l = make_layout(parse_case("op=sdpa docs=4,4 o_offsets=0,100,104 stats_offsets=0,50,60"));
  EXPECT_EQ(l.o_rows, 104);
  EXPECT_EQ(l.stats_rows, 60);
  EXPECT_EQ(l.segments[1].o_row0, 100);
  EXPECT_EQ(l.segments[1].stats_row0, 50);
}

TEST(OutputOffsets, SequencePastTheBufferSaysWhichBufferAndHowToGrowIt) {
  std::string key;
  std::string msg = layout_error("op=sdpa docs=4,4 o_offsets=0,100", key);
  EXPECT_EQ(key, "o_offsets");
  EXPECT_NE(msg.find("ends at row 104"), std::string::npos) << msg;
  EXPECT_NE(msg.find("O buffer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8 rows of the Q buffer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 entries"), std::string::npos) << msg;  // how to give the O capacity
  msg = layout_error("op=sdpa docs=4,4 stats_offsets=0,100", key);
  EXPECT_EQ(key, "stats_offsets");
  EXPECT_NE(msg.find("stats buffer"), std::string::npos) << msg;
  // The capacity given as the last entry is too small: say so, in those words.
  msg = layout_error("op=sdpa docs=4,4 o_offsets=0,4,7", key);
  EXPECT_EQ(key, "o_offsets");
  EXPECT_NE(msg.find("ends at row 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("capacity of 7 rows (the last entry)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("disagrees"), std::string::npos) << msg;
}

}  // namespace
