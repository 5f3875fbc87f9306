// cuda-indexer against cpu-ref on small random cases (fresh inputs from recorded seeds): the correct
// mask passes every layout family (single doc and multi-doc zigzag CP, padded CP with pad chunks,
// ties, fp32/fp16/bf16, -1 fill, the radix path with many more keys than k, ratio, mask=none), and
// each bug knob is caught where it must be and only there.
#include <cstring>

#include "gpu_test_util.h"
#include "segment_report.h"

namespace ao::gpu {
namespace {

using gputest::run_line;
using gputest::run_raw;

const char* kPassLines[] = {
    "op=indexer docs=512 cp=4 rank=0 heads=4 dim=32 topk=16 seed=1",
    "op=indexer docs=512 cp=4 rank=3 heads=4 dim=32 topk=16 seed=2",
    "op=indexer docs=256,128 cp=2 rank=1 heads=4 dim=32 topk=24 seed=3",
    "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=3 heads=4 dim=32 topk=16 seed=4",
    "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=1 heads=4 dim=32 topk=16 seed=4",  // chunk 6 partly pad
    "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=0 heads=4 dim=32 topk=16 seed=4 crop=1",
    "op=indexer docs=1024 cp=2 rank=1 heads=4 dim=32 topk=64 levels=6 seed=5",
    "op=indexer docs=384 cp=2 rank=0 heads=3 dim=20 topk=32 dtype=fp32 seed=6",
    "op=indexer docs=384 cp=2 rank=1 heads=3 dim=24 topk=32 dtype=fp16 seed=7",
    "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64 seed=8",
    "op=indexer docs=6000 heads=2 dim=16 topk=2048 rows=24 seed=9",
    "op=indexer docs=5000 heads=2 dim=16 topk=100 rows=40 levels=3 seed=10",
    "op=indexer q_lens=256 kv_lens=128 ratio=2 heads=4 dim=32 topk=16 seed=11",
    "op=indexer docs=300 mask=none heads=2 dim=16 topk=40 seed=12",
    "op=indexer docs=64*20 cp=2 rank=1 heads=2 dim=16 topk=8 seed=13",
};

class IndexerPasses : public ::testing::TestWithParam<const char*> {};

TEST_P(IndexerPasses, MaskOffsetsMatchesCpuRef) {
  AO_REQUIRE_GPU();
  const auto r = run_line(GetParam(), "cuda-indexer");
  EXPECT_EQ(r.verdict.kind, Verdict::Pass) << gputest::describe(r);
  EXPECT_GT(r.verdict.find("rows_checked")->value, 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, IndexerPasses, ::testing::ValuesIn(kPassLines), gputest::case_name);

// The seed PR's bug: right on rank 0's front chunk (it starts at position 0), wrong on every other chunk.
TEST(CudaIndexer, TopLeftIsCaughtOnEveryChunkButRankZeroFront) {
  AO_REQUIRE_GPU();
  for (int rank : {0, 1, 3}) {
    std::string line = "op=indexer docs=1024 cp=4 heads=4 dim=32 topk=32 seed=21 rank=";
    line += std::to_string(rank);
    auto raw = run_raw(line, "cuda-indexer:bug=topleft-cp");
    ASSERT_EQ(raw.got.status.kind, RunStatus::Ok) << raw.got.status.reason;
    EXPECT_EQ(raw.trial.judge(raw.got, raw.ref).kind, Verdict::Fail) << line;
    for (const auto& sv : segment_verdicts(raw.trial, raw.got, raw.ref)) {
      const bool front0 = rank == 0 && sv.chunk == 0;
      EXPECT_EQ(sv.verdict.kind, front0 ? Verdict::Pass : Verdict::Fail)
          << line << " chunk " << sv.chunk << ": " << sv.verdict.reason;
    }
  }
}

TEST(CudaIndexer, TopLeftIsCaughtOnMultiDocPacks) {
  AO_REQUIRE_GPU();
  const auto r = run_line("op=indexer docs=256,128 cp=2 rank=1 heads=4 dim=32 topk=24 seed=3", "cuda-indexer:bug=topleft-cp");
  EXPECT_EQ(r.verdict.kind, Verdict::Fail) << gputest::describe(r);
  EXPECT_LT(r.verdict.find("tie_aware_recall_min")->value, 1.0);
}

// Bottom-right over the segment's key extent: right only when keys are cropped to the chunk end.
TEST(CudaIndexer, BottomRightIsRightWithCropAndWrongWithout) {
  AO_REQUIRE_GPU();
  for (const char* base : {"op=indexer docs=512 cp=4 rank=1 heads=4 dim=32 topk=16 seed=31",
                           "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=2 heads=4 dim=32 topk=16 seed=32"}) {
    const std::string b = base;
    const auto cropped = run_line(b + " crop=1", "cuda-indexer:mask=bottomright");
    EXPECT_EQ(cropped.verdict.kind, Verdict::Pass) << gputest::describe(cropped);
    const auto uncropped = run_line(b, "cuda-indexer:mask=bottomright");
    EXPECT_EQ(uncropped.verdict.kind, Verdict::Fail) << gputest::describe(uncropped);
    EXPECT_GT(uncropped.verdict.find("out_of_causal")->value, 0) << "later keys than allowed are selected";
  }
}

// Single document, no CP, bottom-right case mask: top-left drops the offset kv_len - q_len.
TEST(CudaIndexer, TopLeftIsCaughtOnBottomRightQueriesWithoutCp) {
  AO_REQUIRE_GPU();
  const auto r = run_line("op=indexer q_lens=64 kv_lens=256 heads=4 dim=32 topk=16 seed=41", "cuda-indexer:bug=topleft-cp");
  EXPECT_EQ(r.verdict.kind, Verdict::Fail) << gputest::describe(r);
  const auto ok = run_line("op=indexer q_lens=64 kv_lens=256 heads=4 dim=32 topk=16 seed=41", "cuda-indexer");
  EXPECT_EQ(ok.verdict.kind, Verdict::Pass) << gputest::describe(ok);
}

// Uploaded host inputs and device-generated inputs give the same bits out.
TEST(CudaIndexer, DeviceInputsEqualHostInputs) {
  AO_REQUIRE_GPU();
  const char* line = "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=1 heads=4 dim=32 topk=16 seed=51";
  auto a = run_raw(line, "cuda-indexer");
  auto b = run_raw(line, "cuda-indexer:inputs=host");
  ASSERT_EQ(a.got.status.kind, RunStatus::Ok) << a.got.status.reason;
  ASSERT_EQ(b.got.status.kind, RunStatus::Ok) << b.got.status.reason;
  EXPECT_EQ(a.got.out.topk, b.got.out.topk);
  EXPECT_EQ(0, std::memcmp(a.got.out.scores.data(), b.got.out.scores.data(), a.got.out.scores.size() * sizeof(float)));
}

// Rows outside every segment keep the sentinel; pad rows inside a segment are all -1.
TEST(CudaIndexer, PadRowsAreFilledOrUntouched) {
  AO_REQUIRE_GPU();
  auto raw = run_raw("op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=8 seed=61", "cuda-indexer");
  ASSERT_EQ(raw.got.status.kind, RunStatus::Ok) << raw.got.status.reason;
  const size_t K = 8;
  for (int64_t r = 100; r < 103; ++r)
    for (size_t e = 0; e < K; ++e) EXPECT_EQ(raw.got.out.topk[size_t(r) * K + e], kSentinelIndex) << "row " << r;
  // rank 0 holds chunk 7 of both documents: wholly padding in doc 0, half padding in doc 1
  auto cp = run_raw("op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=0 heads=4 dim=32 topk=16 seed=4",
                    "cuda-indexer");
  int64_t pad_rows = 0;
  for (int64_t r = 0; r < cp.trial.layout().q_rows; ++r) {
    if (cp.trial.layout().row_segment[size_t(r)] < 0 || cp.trial.layout().valid_row(r)) continue;
    ++pad_rows;
    for (size_t e = 0; e < 16; ++e) EXPECT_EQ(cp.got.out.topk[size_t(r) * 16 + e], -1) << "pad row " << r;
  }
  EXPECT_GT(pad_rows, 0);
}

TEST(CudaIndexer, DeclinesWhatItCannotServe) {
  auto be = make_backend("cuda-indexer");
  EXPECT_FALSE(be->declines(make_layout(parse_case("op=indexer docs=4096 topk=4096 heads=2 dim=16"))).empty());
  EXPECT_FALSE(be->declines(make_layout(parse_case("op=indexer docs=64 dim=30 heads=2 topk=8"))).empty());
  EXPECT_FALSE(be->declines(make_layout(parse_case("op=sdpa docs=64"))).empty());
  EXPECT_TRUE(be->declines(make_layout(parse_case("op=indexer docs=4096 topk=2048 heads=32 dim=128"))).empty());
  // Forward kernels: a backward case is declined (skipped with the reason), never run as a forward.
  EXPECT_NE(be->declines(make_layout(parse_case("op=indexer pass=bwd docs=64 topk=8 heads=2 dim=16"))).find("pass=bwd"),
            std::string::npos);
  EXPECT_NE(make_backend("cuda-sdpa")->declines(make_layout(parse_case("op=sdpa pass=bwd docs=64"))).find("pass=bwd"),
            std::string::npos);
}

}  // namespace
}  // namespace ao::gpu
