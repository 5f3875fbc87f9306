// Hand-checked facts from the seeds and docs/field-facts.md.
#include <gtest/gtest.h>

#include "attn_oracle/pipeline/run_case.h"

using namespace ao;

TEST(SeedFacts, TePaddedExampleSequenceOneStartsAtRowFour) {
  // [a a a 1 b b 2 2 c c c c 3]: cu_seqlens = [0,3,5,9], cu_seqlens_padded = [0,4,8,13]
  auto l = make_layout(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"));
  ASSERT_EQ(l.docs.size(), 3u);
  EXPECT_EQ(l.docs[1].q_off, 4);
  EXPECT_EQ(l.docs[1].packed_q_off, 3);  // what the derived-offsets bug would use
  EXPECT_EQ(l.docs[2].q_off, 8);
  EXPECT_EQ(l.q_rows, 13);
  EXPECT_EQ(l.row_segment[3], -1);   // identifier token 1 is a pad slot
  EXPECT_EQ(l.row_segment[12], -1);  // identifier token 3
  EXPECT_EQ(l.row_segment[4], 1);
}

TEST(SeedFacts, Cp32Rank31HoldsChunks31And32) {
  auto l = make_layout(parse_case("op=indexer docs=8192 cp=32 rank=31"));
  ASSERT_EQ(l.segments.size(), 2u);
  EXPECT_EQ(l.segments[0].chunk, 31);
  EXPECT_EQ(l.segments[1].chunk, 32);
  EXPECT_EQ(l.segments[0].pos0, 31 * 128);
  EXPECT_EQ(l.segments[1].pos0, 32 * 128);
  EXPECT_EQ(l.q_rows, 256);
}

TEST(SeedFacts, MegatronCp2Example) {
  // cp=2, L=8: rank 0 rows [0,1,6,7], rank 1 rows [2,3,4,5]
  for (int rank = 0; rank < 2; ++rank) {
    auto l = make_layout(parse_case("op=indexer docs=8 cp=2 topk=4 rank=" + std::to_string(rank)));
    std::vector<int64_t> pos;
    for (int64_t r = 0; r < l.q_rows; ++r) pos.push_back(l.pos_of(r));
    EXPECT_EQ(pos, rank == 0 ? std::vector<int64_t>({0, 1, 6, 7}) : std::vector<int64_t>({2, 3, 4, 5}));
  }
}
