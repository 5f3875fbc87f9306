// Device-generated inputs are bit-identical to ao::make_inputs (valid slots and poisoned pad slots),
// for every dtype, poison kind, tie quantisation, padded and CP layout; and the skip path without a GPU.
#include <cmath>
#include <cstring>

#include "attn_oracle/case/dtype.h"
#include "device_inputs.h"
#include "gpu_test_util.h"

namespace ao::gpu {
namespace {

const char* kLines[] = {
    "op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=3 heads=4 dim=32 topk=16 seed=11",
    "op=indexer docs=512 cp=4 rank=1 heads=3 dim=20 topk=8 dtype=fp32 seed=5 poison=inf",
    "op=indexer docs=96,64 pad=5 heads=2 dim=16 topk=8 dtype=fp16 levels=7 poison=large seed=3",
    "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 seed=2",
    "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright poison=none seed=9",
    "op=sdpa docs=64,40 pad=8 hq=4 hkv=1 dim=32 dim_v=16 dtype=fp32 poison=nan seed=4",
};

// Bitwise comparison; `expect` is what the stored dtype makes of the host value.
void expect_bits(const std::vector<float>& dev, const std::vector<float>& host, bool bf16, const char* what,
                 const std::string& line) {
  ASSERT_EQ(dev.size(), host.size()) << what << " size, " << line;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < dev.size(); ++i) {
    const float want = bf16 ? round_to(DType::BF16, host[i]) : host[i];
    if (f32_bits(dev[i]) != f32_bits(want) && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements differ, first at " << first << " (device bits 0x" << std::hex
                     << f32_bits(dev[first]) << ", host 0x" << f32_bits(host[first]) << std::dec << "), " << line;
}

TEST(GpuInputs, BitIdenticalToHostGenerator) {
  AO_REQUIRE_GPU();
  int64_t pad_elems = 0;
  for (const char* line : kLines) {
    const Layout l = make_layout(parse_case(line));
    const Inputs host = make_inputs(l);
    for (Storage st : {Storage::F32, Storage::BF16}) {
      if (st == Storage::BF16 && l.c.dtype != DType::BF16) continue;  // bf16 storage only holds bf16 inputs
      const DeviceInputs d = make_device_inputs(l, st, false, nullptr);
      const bool bf = st == Storage::BF16;
      expect_bits(download_f32(d.q), host.q, bf, "q", line);
      expect_bits(download_f32(d.k), host.k, bf, "k", line);
      if (l.c.op == Op::Indexer)
        expect_bits(download_f32(d.w), host.w, false, "w", line);
      else
        expect_bits(download_f32(d.v), host.v, bf, "v", line);
    }
    for (float x : host.k) pad_elems += std::isnan(x) || std::isinf(x) || x == poison_value(Poison::Large, l.c.dtype);
  }
  EXPECT_GT(pad_elems, 0) << "the cases must include poisoned pad slots, or the comparison proves less";
}

// The generator is keyed by token, not buffer row: a case and its re-padded variant put the same values
// at the same tokens (so the host generator is not trivially equal to itself by construction only).
TEST(GpuInputs, DeviceValuesFollowTokensNotRows) {
  AO_REQUIRE_GPU();
  const Layout a = make_layout(parse_case("op=sdpa docs=30,20 hq=2 dim=16 seed=8"));
  const Layout b = make_layout(parse_case("op=sdpa docs=30,20 pad=7 hq=2 dim=16 seed=8"));
  const auto qa = download_f32(make_device_inputs(a, Storage::BF16, false, nullptr).q);
  const auto qb = download_f32(make_device_inputs(b, Storage::BF16, false, nullptr).q);
  const int64_t w = 2 * 16;
  // doc 1 starts at row 30 in a, row 37 in b
  EXPECT_EQ(0, std::memcmp(qa.data() + 30 * w, qb.data() + 37 * w, size_t(20 * w) * sizeof(float)));
  EXPECT_TRUE(std::isnan(qb[size_t(30 * w)])) << "pad slot of b holds the poison";
}

TEST(GpuAvailability, BackendsReportSkippedWithReasonWithoutGpu) {
  if (unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present: the no-GPU path is not exercised here";
  for (const char* b : {"cuda-indexer", "cuda-sdpa"}) {
    const auto r = gputest::run_line(b == std::string("cuda-sdpa") ? kLines[3] : kLines[0], b);
    EXPECT_EQ(r.verdict.kind, Verdict::Skipped) << b;
    EXPECT_NE(r.verdict.reason.find("CUDA"), std::string::npos) << r.verdict.reason;
    EXPECT_EQ(exit_code({r}), 125);
  }
}

TEST(GpuKnobs, BadKnobsAreBadInputNamingTheBackend) {
  // Refused: bad values, unknown knobs, misuse of the old spelling, a bug id the backend does not re-create.
  for (const char* spec : {"cuda-indexer:mask=diagonal", "cuda-indexer:foo=1", "cuda-indexer:mask",
                           "cuda-sdpa:tail-read=2",                           // old spelling, bad value
                           "cuda-sdpa:derived-offsets=1,derived-offsets=0",  // old spelling, given twice
                           "cuda-sdpa:inputs=disk", "cuda-indexer:scratch_gib=-1",
                           "cuda-indexer:bug=topleft",  // old spelling of the value: only mask=topleft is kept
                           "cuda-sdpa:bug=topleft-cp", "cuda-indexer:bug=topleft-cp,mask=bottomright",
                           "cuda-sdpa:bug=tail-read,bug=none"}) {
    try {
      make_backend(spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const BadInput& e) {
      EXPECT_EQ(e.key, "backend") << spec;
      EXPECT_EQ(e.value, spec);
    }
  }
  EXPECT_EQ(make_backend("cuda-indexer:bug=topleft-cp")->name(), "cuda-indexer:bug=topleft-cp");
  EXPECT_EQ(make_backend("cuda-sdpa:bug=tail-read")->name(), "cuda-sdpa:bug=tail-read");
  // The old spellings are aliases, named by their canonical spelling.
  EXPECT_EQ(make_backend("cuda-indexer:mask=topleft")->name(), "cuda-indexer:bug=topleft-cp");  // old spelling
  EXPECT_EQ(make_backend("cuda-sdpa:tail-read=1")->name(), "cuda-sdpa:bug=tail-read");          // old spelling
  EXPECT_EQ(make_backend("cuda-sdpa:derived-offsets=1,inputs=host")->name(),  // old spelling
            "cuda-sdpa:bug=derived-offsets,inputs=host");
}

// Every GPU bug knob value is a cpu-bug model id (the registry refuses anything else at start-up).
TEST(GpuKnobs, BugKnobsNameCpuBugModels) {
  for (const char* name : {"cuda-indexer", "cuda-sdpa"}) {
    bool found = false;
    for (const auto& b : registered_backends())
      if (b.name == name) {
        found = true;
        EXPECT_FALSE(b.implemented_defects().empty()) << name;
        for (const auto& id : b.implemented_defects()) EXPECT_NO_THROW(make_backend("cpu-bug:" + id)) << id;
      }
    EXPECT_TRUE(found) << name;
  }
}

}  // namespace
}  // namespace ao::gpu
