// cudnn-sdpa's Layout -> cuDNN ragged problem mapping and its dtype/sentinel codecs. Host only: these
// run everywhere, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/internal/rng.h"
#include "attn_oracle/inputs/tensors.h"
#include "cudnn_ragged.h"
#include "cudnn_sdpa.h"

using namespace ao;
using namespace ao::cudnn;

namespace {
RaggedProblem problem(const std::string& line) { return make_ragged_problem(make_layout(parse_case(line))); }
}  // namespace

TEST(CudnnRagged, TePaddedExampleBindsThePaddedOffsetsInElements) {
  // [a a a 1 b b 2 2 c c c c 3]: cu_seqlens_padded = [0,4,8,13]; prefix sums of lens would be [0,3,5,9].
  const auto p = problem("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=16 dim_v=8");
  ASSERT_EQ(p.batch(), 3);
  EXPECT_EQ(p.q_off, (std::vector<int64_t>{0, 4 * 4 * 16, 8 * 4 * 16, 13 * 4 * 16}));
  EXPECT_EQ(p.k_off, (std::vector<int64_t>{0, 4 * 2 * 16, 8 * 2 * 16, 13 * 2 * 16}));
  EXPECT_EQ(p.v_off, (std::vector<int64_t>{0, 4 * 2 * 8, 8 * 2 * 8, 13 * 2 * 8}));
  EXPECT_EQ(p.o_off, (std::vector<int64_t>{0, 4 * 4 * 8, 8 * 4 * 8, 13 * 4 * 8}));
  EXPECT_EQ(p.stats_off, (std::vector<int64_t>{0, 4 * 4, 8 * 4, 13 * 4}));
  EXPECT_EQ(p.seq_q, (std::vector<int32_t>{3, 2, 4}));
  EXPECT_EQ(p.seq_kv, (std::vector<int32_t>{3, 2, 4}));
  EXPECT_EQ(p.max_q, 4);
  EXPECT_EQ(p.mask, CudnnMask::TopLeft);
  EXPECT_FALSE(p.int64_offsets);
}

TEST(CudnnRagged, EachTensorKeepsItsOwnOffsets) {
  const auto l = make_layout(parse_case(
      "op=sdpa q_lens=5,3 kv_lens=7,2 q_offsets=2,11,20 kv_offsets=0,9,16 o_offsets=0,6,20 "
      "stats_offsets=1,8,20 hq=2 hkv=1 dim=8 mask=bottomright"));
  const auto p = make_ragged_problem(l);
  ASSERT_EQ(p.batch(), 2);
  for (int b = 0; b < 2; ++b) {
    const auto& d = l.docs[size_t(b)];
    EXPECT_EQ(p.q_off[size_t(b)], d.q_off * 2 * 8);
    EXPECT_EQ(p.k_off[size_t(b)], d.kv_off * 1 * 8);
    EXPECT_EQ(p.o_off[size_t(b)], d.o_off * 2 * 8);
    EXPECT_EQ(p.stats_off[size_t(b)], d.stats_off * 2);
  }
  EXPECT_NE(p.q_off, p.o_off);
  EXPECT_EQ(p.q_off.back(), l.q_rows * 2 * 8);  // the (B+1)-th entry is the capacity
  EXPECT_EQ(p.k_off.back(), l.kv_rows * 8);
  EXPECT_EQ(p.seq_kv, (std::vector<int32_t>{7, 2}));
  EXPECT_EQ(p.mask, CudnnMask::BottomRight);
}

TEST(CudnnRagged, ZigzagChunksBecomeBottomRightKeyPrefixes) {
  // cp=2, L=16: rank 0 holds chunks 0 (positions 0..3) and 3 (12..15).
  const auto p = problem("op=sdpa docs=16 cp=2 rank=0 hq=2 hkv=2 dim=8");
  ASSERT_EQ(p.batch(), 2);
  EXPECT_EQ(p.mask, CudnnMask::BottomRight);
  EXPECT_EQ(p.seq_q, (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(p.seq_kv, (std::vector<int32_t>{4, 16}));  // row i of chunk 3 sees keys <= 12 + i
  EXPECT_EQ(p.q_off[1], 4 * 2 * 8);
  EXPECT_EQ(p.k_off[0], 0);
  EXPECT_EQ(p.k_off[1], 0);  // both chunks read the same document's keys
}

TEST(CudnnRagged, WhollyPaddingChunksAreNotSent) {
  // Padded length 16, 5 valid tokens, cp=2: rank 1 holds chunks 1 (positions 4..7, 1 valid) and 2 (none).
  const auto l = make_layout(parse_case("op=sdpa lens=5 padded_offsets=0,16 cp=2 rank=1 hq=1 hkv=1 dim=8"));
  const auto p = make_ragged_problem(l);
  ASSERT_EQ(p.batch(), 1);
  EXPECT_EQ(p.seq_q[0], 1);
  EXPECT_EQ(p.seq_kv[0], 5);
}

TEST(CudnnRagged, MaskNoneKeepsEveryKeyUnderCp) {
  const auto p = problem("op=sdpa docs=16 cp=2 rank=0 mask=none hq=1 hkv=1 dim=8");
  EXPECT_EQ(p.mask, CudnnMask::None);
  EXPECT_EQ(p.seq_kv, (std::vector<int32_t>{16, 16}));
}

TEST(CudnnRagged, BackwardWritesDisjointDocumentsStraightIntoTheKRows) {
  // cp == 1: one entry per document, disjoint key rows: dK/dV land at K's own offsets (pad slots between
  // documents observable), nothing to sum, every valid key covered.
  const auto l = make_layout(parse_case("op=sdpa pass=bwd lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=16 dim_v=8"));
  const auto p = make_ragged_problem(l);
  const auto g = grad_kv_placement(l, p);
  EXPECT_FALSE(g.accumulate);
  EXPECT_EQ(g.row0, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(g.rows, l.kv_rows);
  EXPECT_EQ(g.dk_off, p.k_off);
  EXPECT_EQ(g.dv_off, p.v_off);
  EXPECT_EQ(std::count(g.zero_rows.begin(), g.zero_rows.end(), 1), 0);
  EXPECT_EQ(dout_offsets(p), (std::vector<int64_t>{0, 4 * 4 * 8, 8 * 4 * 8, 13 * 4 * 8}));  // dO follows Q's rows
}

TEST(CudnnRagged, BackwardSumsZigzagChunksThatShareKeys) {
  // cp=2, L=16, rank 0: chunks 0 (keys 0..3) and 3 (keys 0..15) both write rows 0..3: each entry gets its
  // own scratch rows, summed on the host.
  const auto l0 = make_layout(parse_case("op=sdpa pass=bwd docs=16 cp=2 rank=0 hq=2 hkv=2 dim=8"));
  const auto g0 = grad_kv_placement(l0, make_ragged_problem(l0));
  EXPECT_TRUE(g0.accumulate);
  EXPECT_EQ(g0.row0, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(g0.rows, 20);
  EXPECT_EQ(g0.dk_off, (std::vector<int64_t>{0, 4 * 2 * 8, 20 * 2 * 8}));
  EXPECT_EQ(std::count(g0.zero_rows.begin(), g0.zero_rows.end(), 1), 0);
  // Rank 1: chunks 1 (positions 4..7, keys 0..7) and 2 (8..11, keys 0..11): keys 12..15 get no gradient
  // from this rank, and are zeroed.
  const auto l1 = make_layout(parse_case("op=sdpa pass=bwd docs=16 cp=2 rank=1 hq=2 hkv=2 dim=8"));
  const auto g1 = grad_kv_placement(l1, make_ragged_problem(l1));
  EXPECT_TRUE(g1.accumulate);
  EXPECT_EQ(g1.rows, 8 + 12);
  std::vector<char> want(size_t(l1.kv_rows), 0);
  for (int64_t r = 12; r < 16; ++r) want[size_t(l1.docs[0].kv_off + r)] = 1;
  EXPECT_EQ(g1.zero_rows, want);
}

TEST(CudnnRagged, IndexerCasesAreDeclined) {
  EXPECT_NE(unsupported_reason(make_layout(parse_case("op=indexer docs=64 heads=2 dim=8 topk=4"))), "");
  EXPECT_EQ(unsupported_reason(make_layout(parse_case("op=sdpa lens=3,2"))), "");
}

TEST(CudnnRagged, HalfCodecsRoundLikeTheOracleAndKeepTheSentinelApart) {
  for (DType t : {DType::BF16, DType::F16}) {
    for (uint64_t i = 0; i < 4096; ++i) {
      const float x = 8.f * generated_value(20261202, 7, i, 0);
      EXPECT_EQ(f32_bits(from_half_bits(t, to_half_bits(t, x))), f32_bits(round_to(t, x))) << to_string(t) << " " << x;
    }
    const uint16_t s = half_sentinel_bits(t);
    EXPECT_TRUE(is_sentinel(from_half_bits(t, s)));
    EXPECT_TRUE(std::isnan(t == DType::F16 ? f16_bits_to_f32(s) : bf16_bits_to_f32(s)));
    // Canonical NaNs a GPU produces, and the oracle's own NaN rounding, must not read as "unwritten".
    for (uint16_t nan : {uint16_t(0x7fff), uint16_t(0xffff), uint16_t(0x7fc0), uint16_t(0x7e00),
                         to_half_bits(t, std::nanf(""))})
      EXPECT_FALSE(is_sentinel(from_half_bits(t, nan))) << std::hex << nan;
  }
}

TEST(CudnnRagged, KnobsAreParsedAndBadOnesNamed) {
  auto o = parse_knobs("impl=unified,pad_mask=auto,guard=8,log=1");
  EXPECT_EQ(o.impl, Impl::Unified);
  EXPECT_EQ(o.pad_mask, PadMask::Auto);
  EXPECT_EQ(o.guard_rows, 8);
  EXPECT_TRUE(o.log);
  EXPECT_EQ(parse_knobs("").impl, Impl::Composite);
  EXPECT_THROW(parse_knobs("impl=fast"), BadInput);
  EXPECT_THROW(parse_knobs("guard=-1"), BadInput);
  EXPECT_THROW(parse_knobs("colour=red"), BadInput);
  EXPECT_TRUE(parse_knobs("").ragged_stats);
  EXPECT_FALSE(parse_knobs("ragged_stats=0").ragged_stats);
  EXPECT_THROW(parse_knobs("ragged_stats=2"), BadInput);
  EXPECT_TRUE(parse_knobs("").max_total);
  EXPECT_FALSE(parse_knobs("max_total=0").max_total);
  EXPECT_TRUE(parse_knobs("deterministic=1").deterministic);
  EXPECT_THROW(parse_knobs("deterministic=yes"), BadInput);
}
