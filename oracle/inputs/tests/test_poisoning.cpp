// Poisoning and sentinels: poison fills exactly the input pad slots; contamination (non-finite values
// in valid rows), unwritten rows and clobbered pad slots are told apart on crafted outputs.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/backends/external.h"
#include "attn_oracle/internal/npy.h"
#include "attn_oracle/reference/reference.h"
#include "verdict_probe.h"

using namespace ao;
using ao::test::failed;
using ao::test::metric;
using ao::test::reference;

namespace {

// Which K/V rows and Q rows are valid, from the layout alone.
std::vector<char> kv_valid(const Layout& l) {
  std::vector<char> v(size_t(l.kv_rows), 0);
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) v[size_t(d.kv_off + s)] = 1;
  return v;
}

bool is_poison(Poison p, DType t, float x) {
  switch (p) {
    case Poison::NaN: return std::isnan(x);
    case Poison::Inf: return std::isinf(x) && x > 0;
    case Poison::Large: return x == poison_value(Poison::Large, t) && std::isfinite(x);
    default: return false;
  }
}

}  // namespace

TEST(Poisoning, EachPoisonFillsExactlyThePadSlots) {
  // Q/O padding differs from K/V padding, with capacity past the last sequence.
  const char* layouts[] = {"op=sdpa docs=10,7 q_pad=3,0 kv_pad=0,5 tail=4 hq=2 hkv=1 dim=8",
                           "op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4 heads=2 dim=8",
                           "op=indexer docs=70 pad=58 cp=4 rank=3 topk=8 heads=2 dim=8"};
  for (const char* base : layouts)
    for (const char* p : {"nan", "inf", "large", "none"}) {
      const std::string line = fmt::format("{} poison={}", base, p);
      SCOPED_TRACE(line);
      const Layout l = make_layout(parse_case(line));
      const Inputs in = make_inputs(l);
      const Poison poison = l.c.poison;
      const auto kvv = kv_valid(l);
      auto check = [&](const std::vector<float>& t, int64_t rows, auto valid, const char* name) -> int64_t {
        EXPECT_EQ(t.size() % size_t(rows), 0u);
        const size_t w = t.size() / size_t(rows);
        int64_t pad_rows = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const bool ok = valid(r);
          pad_rows += !ok;
          for (size_t e = 0; e < w; ++e) {
            const float x = t[size_t(r) * w + e];
            if (ok) {
              EXPECT_TRUE(std::isfinite(x) && std::fabs(x) <= 1) << name << " valid row " << r;
            } else if (poison == Poison::None) {
              EXPECT_TRUE(std::isfinite(x) && std::fabs(x) <= 1) << name << " pad row " << r;  // realistic data
            } else {
              EXPECT_TRUE(is_poison(poison, l.c.dtype, x)) << name << " pad row " << r << " holds " << x;
            }
          }
        }
        return pad_rows;
      };
      const int64_t qpad = check(in.q, l.q_rows, [&](int64_t r) { return l.valid_row(r); }, "q");
      const int64_t kpad = check(in.k, l.kv_rows, [&](int64_t r) { return kvv[size_t(r)] != 0; }, "k");
      EXPECT_GT(qpad + kpad, 0) << "the layout must have pad slots";
      if (l.c.op == Op::Sdpa) check(in.v, l.kv_rows, [&](int64_t r) { return kvv[size_t(r)] != 0; }, "v");
      else check(in.w, l.q_rows, [&](int64_t r) { return l.valid_row(r); }, "w");
    }
}

TEST(Poisoning, ValidValuesDependOnTokensNotOnPlacement) {
  const Layout a = make_layout(parse_case("op=sdpa docs=10,7 q_pad=3,0 kv_pad=0,5 tail=4 hq=2 hkv=1 dim=8"));
  const Layout b = make_layout(parse_case("op=sdpa docs=10,7 hq=2 hkv=1 dim=8 poison=none"));
  const Inputs ia = make_inputs(a), ib = make_inputs(b);
  const size_t wq = 16, wk = 8;
  for (size_t d = 0; d < 2; ++d)
    for (int64_t i = 0; i < a.docs[d].q_len; ++i) {
      for (size_t e = 0; e < wq; ++e)
        EXPECT_EQ(ia.q[size_t(a.docs[d].q_off + i) * wq + e], ib.q[size_t(b.docs[d].q_off + i) * wq + e]);
      for (size_t e = 0; e < wk; ++e)
        EXPECT_EQ(ia.k[size_t(a.docs[d].kv_off + i) * wk + e], ib.k[size_t(b.docs[d].kv_off + i) * wk + e]);
    }
}

TEST(Sentinels, OutputsStartAsSentinelsThatNoComputedValueEquals) {
  const Layout l = make_layout(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"));
  const Outputs o = make_sentinel_outputs(l);
  for (float x : o.o) EXPECT_TRUE(is_sentinel(x));
  for (float x : o.lse) EXPECT_TRUE(is_sentinel(x));
  EXPECT_FALSE(is_sentinel(std::nanf("")));
  EXPECT_FALSE(is_sentinel(0.f * INFINITY));
  EXPECT_FALSE(is_sentinel(poison_value(Poison::NaN, DType::F32)));
}

TEST(Poisoning, ContaminationUnwrittenAndClobberingAreSeparateMetrics) {
  // TE's [a a a 1 b b 2 2 c c c c 3]: rows 3, 6, 7 and 12 are identifier-token slots.
  const Layout l = make_layout(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 poison=nan seed=4"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  const size_t W = size_t(l.c.hq * l.c.dim_v);
  ASSERT_EQ(compare(l, in, ref, ref).kind, Verdict::Pass);
  auto verdict = [&](auto edit) {
    Outputs o = ref;
    edit(o);
    return compare(l, in, o, ref);
  };
  const Verdict contaminated = verdict([&](Outputs& o) { o.o[5 * W + 2] = std::nanf(""); });  // NaN in row 5 (b)
  EXPECT_TRUE(failed(contaminated, "nonfinite_valid"));
  EXPECT_EQ(metric(contaminated, "nonfinite_valid"), 1);
  EXPECT_FALSE(failed(contaminated, "unwritten_rows"));
  EXPECT_FALSE(failed(contaminated, "clobbered_pad_slots"));

  const Verdict unwritten = verdict([&](Outputs& o) { o.o[9 * W + 1] = sentinel_float(); });  // row 9 (c) left
  EXPECT_TRUE(failed(unwritten, "unwritten_rows"));
  EXPECT_FALSE(failed(unwritten, "nonfinite_valid"));
  EXPECT_FALSE(failed(unwritten, "clobbered_pad_slots"));

  const Verdict clobbered = verdict([&](Outputs& o) {  // identifier tokens 1 and 2 overwritten
    o.o[3 * W] = 0.f;
    o.lse[size_t(7 * l.c.hq)] = 0.f;
  });
  EXPECT_TRUE(failed(clobbered, "clobbered_pad_slots"));
  EXPECT_EQ(metric(clobbered, "clobbered_pad_slots"), 2);
  EXPECT_FALSE(failed(clobbered, "nonfinite_valid"));
  EXPECT_FALSE(failed(clobbered, "unwritten_rows"));
  EXPECT_FALSE(failed(clobbered, "tol_violations"));

  // pad_writes=allow: the same write is reported but not gated.
  const Layout la = make_layout(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 poison=nan seed=4 pad_writes=allow"));
  Outputs o = ref;
  o.o[3 * W] = 0.f;
  EXPECT_EQ(compare(la, in, o, ref).kind, Verdict::Pass);
}

TEST(Poisoning, IndexerUnwrittenAndClobberingAreSeparateMetrics) {
  const Layout l = make_layout(parse_case("op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4 seed=4"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  ASSERT_EQ(compare(l, in, ref, ref).kind, Verdict::Pass);
  Outputs o = ref;
  o.topk[12 * 4] = 0;  // identifier token 3's row written
  Verdict v = compare(l, in, o, ref);
  EXPECT_TRUE(failed(v, "clobbered_pad_slots"));
  EXPECT_FALSE(failed(v, "unwritten_rows"));
  EXPECT_FALSE(failed(v, "tie_aware_recall_min"));
  o = ref;
  for (int e = 0; e < 4; ++e) o.topk[3 * 4 + e] = -1;  // -1 in a pad row is not a write
  EXPECT_EQ(compare(l, in, o, ref).kind, Verdict::Pass);
  o = ref;
  o.topk[9 * 4 + 1] = kSentinelIndex;  // row 9 (c) partly unwritten
  v = compare(l, in, o, ref);
  EXPECT_TRUE(failed(v, "unwritten_rows"));
  EXPECT_FALSE(failed(v, "clobbered_pad_slots"));
}

TEST(Poisoning, NanTailsReachValidRowsOnlyThroughTheTailReadBug) {
  // cudnn-frontend #624: masked P times NaN pad-row V. cpu-ref never reads pad slots.
  const Layout l = make_layout(parse_case("op=sdpa docs=100,37 pad=11 tail=64 poison=nan seed=8"));
  const Inputs in = make_inputs(l);
  const Outputs ref = reference(l, in);
  Outputs bad = make_sentinel_outputs(l);
  make_backend("cpu-bug:tail-read")->run(l, in, bad);
  const Verdict v = compare(l, in, bad, ref);
  EXPECT_TRUE(failed(v, "nonfinite_valid"));
  EXPECT_FALSE(failed(v, "unwritten_rows"));
  EXPECT_FALSE(failed(v, "clobbered_pad_slots"));
  for (float x : ref.o) EXPECT_TRUE(std::isfinite(x) || is_sentinel(x));
}

// poison=large is one value per dtype on every path: the dtype's largest finite value (fp16 65504,
// bf16 (2 - 2^-7) 2^127, fp32 FLT_MAX), the same in process and in the exec: case directory (it was
// 1e30 in process, and +inf in an fp16 .npy file).
TEST(Poisoning, LargeIsTheDtypesLargestFiniteValueEverywhere) {
  const std::pair<const char*, float> want[] = {{"fp16", 65504.f}, {"bf16", 3.38953139e38f}, {"fp32", FLT_MAX}};
  for (auto [dt, value] : want) {
    const std::string line = fmt::format("op=indexer docs=5,3 pad=2 heads=2 dim=4 topk=2 dtype={} poison=large", dt);
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_inputs(l);
    const auto kvv = kv_valid(l);
    int64_t pads = 0, bad = 0;
    for (int64_t r = 0; r < l.kv_rows; ++r)
      if (!kvv[size_t(r)])
        for (int e = 0; e < l.c.dim; ++e, ++pads) bad += f32_bits(in.k[size_t(r * l.c.dim + e)]) != f32_bits(value);
    EXPECT_GT(pads, 0);
    EXPECT_EQ(bad, 0) << "in-process poison";
    // The exec: path: k.npy in the case dtype, decoded back to float.
    const std::string dir = ::testing::TempDir() + fmt::format("ao_poison_large_{}", dt);
    std::filesystem::create_directories(dir);
    write_case_dir(dir, l, in);
    const npy::Array a = npy::read(dir + "/k.npy");
    int64_t file_bad = 0;
    for (int64_t r = 0; r < l.kv_rows; ++r) {
      if (kvv[size_t(r)]) continue;
      for (int e = 0; e < l.c.dim; ++e) {
        const size_t i = size_t(r * l.c.dim + e);
        float x;
        if (a.descr == "<f4") std::memcpy(&x, a.data.data() + 4 * i, 4);
        else {
          uint16_t b;
          std::memcpy(&b, a.data.data() + 2 * i, 2);
          x = a.descr == "<u2" ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
        }
        file_bad += f32_bits(x) != f32_bits(value);
      }
    }
    EXPECT_EQ(file_bad, 0) << "poison in " << dir << "/k.npy (" << a.descr << ")";
    std::filesystem::remove_all(dir);
  }
}
