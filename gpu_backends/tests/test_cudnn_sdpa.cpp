// cudnn-sdpa on a real GPU: end-to-end cases through the harness against the exact CPU reference.
// Without a GPU (or cuDNN) every test here SKIPS with the backend's reason.
#include <gtest/gtest.h>

#include "attn_oracle/pipeline/run_case.h"
#include "cudnn_sdpa.h"

using namespace ao;

namespace {

// The backend, or a skip with the reason it cannot run here.
#define NEED_CUDNN(spec)                                                       \
  auto backend = make_backend(spec);                                           \
  if (auto why = backend->unavailable_reason(); !why.empty()) GTEST_SKIP() << why; \
  auto ref = make_backend("cpu-ref")

CaseResult run(Backend& b, Backend& ref, const std::string& line) { return run_case(parse_case(line), b, ref); }

}  // namespace

TEST(CudnnSdpa, ServesPaddedThdCasesCorrectly) {
  NEED_CUDNN("cudnn-sdpa");
  for (const char* line : {
           "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16 seed=11",  // TE's [a a a 1 b b 2 2 c c c c 3]
           "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=fp16 seed=12",
           "op=sdpa docs=100,37,64 pad=3,7,0 tail=40 hq=8 hkv=2 dim=64 poison=nan seed=13",
           "op=sdpa docs=129,65 pad=11,0 tail=70 hq=4 hkv=1 dim=128 mask=none poison=nan seed=14",
       }) {
    const auto r = run(*backend, *ref, line);
    EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
  }
}

TEST(CudnnSdpa, HonoursQOffsetsThatDifferFromKvOffsets) {
  NEED_CUDNN("cudnn-sdpa");
  const auto r = run(*backend, *ref,
                     "op=sdpa q_lens=40,33 kv_lens=40,33 q_offsets=5,70,120 kv_offsets=0,45,100 hq=4 hkv=4 "
                     "dim=64 poison=nan seed=15");
  EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
}

TEST(CudnnSdpa, BottomRightWithShortQueries) {
  NEED_CUDNN("cudnn-sdpa");
  const auto r = run(*backend, *ref,
                     "op=sdpa q_lens=16,1,33 kv_lens=100,64,90 q_pad=4,0,3 kv_pad=2,5,0 hq=8 hkv=2 dim=64 "
                     "mask=bottomright poison=nan seed=16");
  EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
}

TEST(CudnnSdpa, ZigzagCpRankAsKeyPrefixes) {
  NEED_CUDNN("cudnn-sdpa");
  const auto r = run(*backend, *ref, "op=sdpa docs=256,128 cp=4 rank=1 hq=4 hkv=2 dim=64 seed=17");
  EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
}

TEST(CudnnSdpa, RealOutputsWithDerivedOffsetsFail) {
  // Teeth on real cuDNN output (the SDPA verdict is taken against the comparator's exact answer, so a
  // buggy --vs cannot show them): cuDNN given prefix(lens) offsets (the cudnn-frontend #737 lowering,
  // bug=derived-offsets) must fail on padded THD, and equal the knobless run where offsets are packed.
  NEED_CUDNN("cudnn-sdpa");
  auto derived = make_backend("cudnn-sdpa:bug=derived-offsets");
  const char* padded = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16 seed=11";
  EXPECT_EQ(run(*backend, *ref, padded).verdict.kind, Verdict::Pass);
  const auto r = run(*derived, *ref, padded);
  EXPECT_EQ(r.verdict.kind, Verdict::Fail) << format_result(r);
  EXPECT_EQ(run(*derived, *ref, "op=sdpa lens=3,2,4 dtype=bf16 seed=11").verdict.kind, Verdict::Pass);
}

TEST(CudnnSdpa, DeclinedGraphsAreSkippedWithCudnnsMessage) {
  // pad_mask=0 on unequal lengths cannot be expressed: skipped with the reason, never passed.
  NEED_CUDNN("cudnn-sdpa:pad_mask=0");
  const auto r = run(*backend, *ref, "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13");
  EXPECT_EQ(r.verdict.kind, Verdict::Skipped) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("uniform"), std::string::npos) << r.verdict.reason;
  // The unified SDPA_FWD operation with a causal mask: cuDNN < 9.21 has no causal attributes on it, so
  // the frontend declines at validate; newer cuDNN may run it, and then it must be right.
  auto unified = make_backend("cudnn-sdpa:impl=unified");
  const auto u = run(*unified, *ref, "op=sdpa lens=64,64 pad=16 mask=causal hq=2 hkv=2 dim=64");
  if (u.verdict.kind == Verdict::Skipped)
    EXPECT_NE(u.verdict.reason.find("cudnn_frontend::graph::Graph::"), std::string::npos) << u.verdict.reason;
  else
    EXPECT_EQ(u.verdict.kind, Verdict::Pass) << format_result(u);
}

TEST(CudnnSdpa, PaddedStatsLayoutScattersBackToTheStatsRows) {
  NEED_CUDNN("cudnn-sdpa:ragged_stats=0");
  const auto r = run(*backend, *ref, "op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 seed=31");
  EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
}

TEST(CudnnSdpa, BackwardOnPaddedThdGqaAndCpRanks) {
  NEED_CUDNN("cudnn-sdpa");
  for (const char* line : {
           "op=sdpa pass=bwd lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16 seed=41",
           "op=sdpa pass=bwd docs=100,37,64 pad=3,7,0 tail=40 hq=8 hkv=2 dim=64 poison=nan seed=42",
           "op=sdpa pass=bwd q_lens=16,1,33 kv_lens=100,64,90 q_pad=4,0,3 kv_pad=2,5,0 hq=8 hkv=2 dim=64 "
           "mask=bottomright poison=nan seed=43",
           "op=sdpa pass=bwd docs=256,128 cp=4 rank=1 hq=4 hkv=2 dim=64 seed=44",  // chunks summed on the host
           "op=sdpa pass=bwd docs=256,128 cp=4 rank=3 hq=4 hkv=2 dim=128 window=50 seed=45",
       }) {
    const auto r = run(*backend, *ref, line);
    EXPECT_EQ(r.verdict.kind, Verdict::Pass) << line << "\n" << format_result(r);
  }
}

TEST(CudnnSdpa, RealGradientsWithOverwrittenCpPartialsFail) {
  // Teeth on real cuDNN gradients: keeping one zigzag chunk's dK/dV instead of their sum
  // (bug=bwd-cp-dkv-overwrite, the host's accumulation stored) must fail where the sum passes.
  NEED_CUDNN("cudnn-sdpa");
  const char* line = "op=sdpa pass=bwd docs=64,32 cp=2 rank=0 hq=2 dim=64 seed=46";
  auto overwrite = make_backend("cudnn-sdpa:bug=bwd-cp-dkv-overwrite");
  EXPECT_EQ(run(*backend, *ref, line).verdict.kind, Verdict::Pass);
  const auto r = run(*overwrite, *ref, line);
  EXPECT_EQ(r.verdict.kind, Verdict::Fail) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("dk_violations"), std::string::npos) << r.verdict.reason;
}
