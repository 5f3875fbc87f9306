// Deterministic inputs (rng.h, dtype.h, tensors.cpp):
//  * the counter-based RNG is the published splitmix64 and is order-independent: make_inputs equals
//    elements generated one by one in shuffled order from (seed, tensor, token * width + e), with the
//    token (packed prefix of valid lengths + index among the document's q tokens) derived here
//    independently, and is the same on one thread and on several;
//  * the same (document, token index) token gets the same values under any padding or CP split;
//  * bf16 / fp16 round-to-nearest-even agrees with independent implementations (exact double
//    arithmetic, and the compiler's _Float16) on every uniform_pm1 grid value, every half-precision
//    bit pattern, ties, subnormals, overflow, NaN and random floats;
//  * poison fills exactly the input pad slots; output buffers start all sentinel;
//  * a large tensor sized with its pages faulted in by the team (prefault.h) holds what assign would give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include <fmt/format.h>
#include <omp.h>

#include "attn_oracle/internal/prefault.h"
#include "attn_oracle/internal/rng.h"
#include "naive_reference.h"

using namespace ao;

namespace {

// --- independent rounding references -------------------------------------------------------------

// Round a finite float to `sig` significant bits with minimum normal exponent `emin` (subnormals
// below it keep the quantum 2^(emin - sig + 1)) and largest finite value `maxv`; ties to even.
// Every step is exact in double: x / q is a power-of-two scaling, nearbyint rounds to even.
float round_sig(float x, int sig, int emin, double maxv) {
  if (std::isnan(x)) return x;
  if (std::isinf(x) || x == 0) return x;
  int e;
  (void)std::frexp(double(x), &e);  // |x| in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, emin);
  const double q = std::ldexp(1.0, exp - sig + 1);
  const double r = std::nearbyint(double(x) / q) * q;
  if (std::fabs(r) > maxv) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return float(r);
}
float ref_bf16(float x) { return round_sig(x, 8, -126, std::ldexp(255.0, 120)); }  // (2 - 2^-7) 2^127
float ref_f16(float x) { return round_sig(x, 11, -14, 65504.0); }

bool same(float a, float b) {  // bit-equal, or both NaN with the same sign
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
  return f32_bits(a) == f32_bits(b);
}

int check_rounding(float x) {  // number of disagreements for one input
  int bad = 0;
  const float b = bf16_bits_to_f32(f32_to_bf16_bits(x)), h = f16_bits_to_f32(f32_to_f16_bits(x));
  if (!same(b, ref_bf16(x))) ++bad;
  if (!same(h, ref_f16(x))) ++bad;
  if (!same(round_to(DType::BF16, x), b) || !same(round_to(DType::F16, x), h) || !same(round_to(DType::F32, x), x)) ++bad;
#ifdef __FLT16_MAX__
  if (!same(h, float(static_cast<_Float16>(x)))) ++bad;
#endif
  return bad;
}

TEST(Rounding, EveryUniformGridValue) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  int64_t bad = 0;
  float first_bad = 0;
  for (int64_t i = 0; i < (int64_t(1) << 24); ++i) {
    const float x = float(i - (1 << 23)) * (1.0f / float(1 << 23));
    const int b = check_rounding(x);
    if (b && !bad) first_bad = x;
    bad += b;
  }
  EXPECT_EQ(bad, 0) << "first disagreement at " << fmt::format("{:a}", first_bad);
}

TEST(Rounding, TiesSubnormalsOverflowNaNAndRandomFloats) {
  std::vector<float> xs;
  // Exact ties and their neighbours for bf16 (low 16 bits) and fp16 normals (low 13 bits) and fp16
  // subnormals (the half-quantum 2^-25 multiples) over every exponent.
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t hi : {0u, 1u, 2u, 0x3ffu, 0x7fu, 0x155u})
      for (uint32_t lo : {0x8000u, 0x7fffu, 0x8001u, 0x1000u, 0x0fffu, 0x1001u, 0u, 0xffffu})
        for (uint32_t s : {0u, 0x80000000u}) xs.push_back(f32_from_bits(s | (e << 23) | (hi << 16 & 0x7fffffu) | lo));
  for (int k = -40; k <= -14; ++k)
    for (int m = 0; m < 64; ++m) xs.push_back(float(std::ldexp(0.5 + m, k)));  // odd/even multiples of half-quanta
  for (float v : {65504.f, 65519.f, 65519.996f, 65520.f, 65536.f, 1e30f, 3.3895314e38f, 3.4028235e38f, 1e-45f,
                  1.17549435e-38f, 5.96046448e-8f, 2.98023224e-8f, 2.98023259e-8f, 6.09755516e-5f, 6.10351562e-5f})
    for (float s : {1.f, -1.f}) xs.push_back(s * v);
  for (float v : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  f32_from_bits(0x7f800001u), f32_from_bits(0xffbfffffu), f32_from_bits(0x7fc00001u), 0.f, -0.f})
    xs.push_back(v);
  // A stride through all 2^32 bit patterns and random ones.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) xs.push_back(f32_from_bits(uint32_t(u)));
  std::mt19937 rng(77);
  for (int i = 0; i < 1000000; ++i) xs.push_back(f32_from_bits(rng()));
  int64_t bad = 0;
  for (float x : xs) {
    const int b = check_rounding(x);
    if (b && bad < 8) ADD_FAILURE() << fmt::format("{:a} (bits {:08x}): bf16 {:a} ref {:a}; fp16 {:a} ref {:a}", x,
                                                   f32_bits(x), bf16_bits_to_f32(f32_to_bf16_bits(x)), ref_bf16(x),
                                                   f16_bits_to_f32(f32_to_f16_bits(x)), ref_f16(x));
    bad += b;
  }
  EXPECT_EQ(bad, 0) << "of " << xs.size();
}

TEST(Rounding, EveryHalfPrecisionBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    // fp16 -> fp32, against the value formula and (when available) the compiler.
    const uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const double mag = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + double(m) / 1024.0, int(e) - 15);
    const float want = e == 31 ? (m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity())
                               : float(mag);
    const float got = f16_bits_to_f32(uint16_t(h));
    ASSERT_TRUE(same(got, s ? -want : want)) << fmt::format("fp16 bits {:04x}", h);
#ifdef __FLT16_MAX__
    _Float16 f;
    const uint16_t hb = uint16_t(h);
    std::memcpy(&f, &hb, 2);
    ASSERT_TRUE(same(got, float(f))) << fmt::format("fp16 bits {:04x}", h);
#endif
    // bf16 -> fp32 is the top half of the fp32 pattern.
    ASSERT_EQ(f32_bits(bf16_bits_to_f32(uint16_t(h))), h << 16);
    // Round trips of representable values are exact.
    if (!(e == 31 && m)) {
      ASSERT_EQ(f32_to_f16_bits(got), h) << fmt::format("fp16 bits {:04x}", h);
    }
    if (((h >> 7) & 0xff) != 0xff || (h & 0x7f) == 0) {
      ASSERT_EQ(f32_to_bf16_bits(bf16_bits_to_f32(uint16_t(h))), h);
    }
  }
}

// --- the RNG --------------------------------------------------------------------------------------

TEST(Rng, IsThePublishedSplitmix64) {
  // Reference stream of splitmix64 seeded with 0 (Vigna's splitmix64.c): state += golden; mix.
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(splitmix64(2 * 0x9E3779B97F4A7C15ull), 0x06C45D188009454Full);
}

TEST(Rng, UniformGridAndLevels) {
  std::set<float> seen_levels[3];
  const uint32_t levels[3] = {3, 4, 16};
  for (uint64_t i = 0; i < 200000; ++i) {
    const float u = generated_value(5, kTensorQ, i, 0);
    ASSERT_GE(u, -1.f);
    ASSERT_LT(u, 1.f);
    ASSERT_EQ(u * float(1 << 23), std::trunc(u * float(1 << 23)));  // on the 2^-23 grid: exact in any dtype path
    for (int j = 0; j < 3; ++j) seen_levels[j].insert(generated_value(5, kTensorQ, i, levels[j]));
  }
  for (int j = 0; j < 3; ++j) {
    // levels=N quantises to the N+1 points round(u * N/2) / (N/2), endpoints included.
    EXPECT_LE(seen_levels[j].size(), size_t(levels[j]) + 1) << "levels=" << levels[j];
    EXPECT_GE(seen_levels[j].size(), size_t(levels[j])) << "levels=" << levels[j];
  }
  // Different tensors / seeds are different streams.
  EXPECT_NE(generated_value(5, kTensorQ, 7, 0), generated_value(5, kTensorK, 7, 0));
  EXPECT_NE(generated_value(5, kTensorQ, 7, 0), generated_value(6, kTensorQ, 7, 0));
}

// Canonical token of (doc, token index), derived here: packed prefix of the valid lengths + index.
int64_t token(const std::vector<int64_t>& lens, int doc, int64_t tok) {
  int64_t t = 0;
  for (int b = 0; b < doc; ++b) t += lens[size_t(b)];
  return t + tok;
}

struct Tensor {
  const std::vector<float>* data;
  uint32_t id;
  int64_t width;
  bool kv;
};

std::vector<Tensor> tensors_of(const Case& c, const Inputs& in) {
  if (c.op == Op::Indexer)
    return {{&in.q, kTensorQ, int64_t(c.heads) * c.dim, false}, {&in.w, kTensorW, c.heads, false},
            {&in.k, kTensorK, c.dim, true}};
  return {{&in.q, kTensorQ, int64_t(c.hq) * c.dim, false}, {&in.k, kTensorK, int64_t(c.hkv) * c.dim, true},
          {&in.v, kTensorV, int64_t(c.hkv) * c.dim_v, true}};
}

const char* kLayouts[] = {
    "op=indexer docs=37,0,50 q_pad=3,2,0 kv_pad=1,4,2 tail=5 heads=3 dim=8 dtype=bf16",
    "op=indexer docs=30,17 q_pad=6,7 kv_pad=2 cp=3 rank=0 heads=2 dim=16 dtype=fp16 levels=16",
    "op=indexer q_lens=40,24 kv_lens=10,6 ratio=4 q_offsets=8,56,80 kv_offsets=3,20 cp=2 rank=1 heads=2 dim=8",
    "op=sdpa q_lens=20,5,9 kv_lens=7,11,0 q_offsets=2,30,40 kv_offsets=0,9,25 q_capacity=52 hq=4 hkv=2 dim=8 "
    "dim_v=4 dtype=fp32",
    "op=sdpa docs=29,3 q_pad=3,13 kv_pad=0,5 cp=4 rank=1 cp_scheme=contiguous hq=2 dim=8 dtype=bf16",
};

TEST(Inputs, OrderIndependentAndKeyedByToken) {
  for (const char* line : kLayouts) {
    for (Poison p : {Poison::NaN, Poison::None}) {
      Case c = parse_case(line);
      c.poison = p;
      SCOPED_TRACE(print_case(c));
      const Layout l = make_layout(c);
      // One thread, then the process's team: the rows are filled in parallel, the values must not move.
      const int team = omp_get_max_threads();
      omp_set_num_threads(1);
      const Inputs in = make_inputs(l);
      omp_set_num_threads(std::max(team, 2));
      const Inputs again = make_inputs(l);
      omp_set_num_threads(team);
      for (auto [a, b] : {std::pair{&in.q, &again.q}, {&in.k, &again.k}, {&in.v, &again.v}, {&in.w, &again.w}})
        EXPECT_TRUE(a->size() == b->size() && std::memcmp(a->data(), b->data(), 4 * a->size()) == 0);
      const naive::NaiveLayout nl = naive::derive(c);
      for (const Tensor& t : tensors_of(c, in)) {
        // Every (row, element) of the valid slots, generated in shuffled order.
        std::vector<std::pair<int64_t, int64_t>> elems;  // (buffer index, generator index)
        if (t.kv) {
          for (int64_t r = 0; r < nl.kv_cap; ++r) {
            const int b = nl.kv_owner[size_t(r)];
            if (b < 0) continue;
            const int64_t tok = token(c.kv_lens, b, r - nl.kv_off[size_t(b)]);
            for (int64_t e = 0; e < t.width; ++e) elems.push_back({r * t.width + e, tok * t.width + e});
          }
        } else {
          for (const auto& row : nl.rows) {
            if (!row.valid) continue;
            const int64_t tok = token(c.q_lens, row.doc, row.tok);
            for (int64_t e = 0; e < t.width; ++e) elems.push_back({row.row * t.width + e, tok * t.width + e});
          }
        }
        ASSERT_FALSE(elems.empty());
        std::shuffle(elems.begin(), elems.end(), std::mt19937_64(c.seed));
        int64_t bad = 0;
        for (auto [at, gi] : elems) {
          const float want = round_to(c.dtype, generated_value(c.seed, t.id, uint64_t(gi), c.levels));
          bad += f32_bits((*t.data)[size_t(at)]) != f32_bits(want);
        }
        EXPECT_EQ(bad, 0) << "tensor " << t.id;
      }
    }
  }
}

TEST(Inputs, SameTokenSameValuesUnderAnyPaddingOrCpSplit) {
  // Baseline: packed, no CP. Then padded / explicit offsets / every rank of zigzag and contiguous CP.
  struct Variant { std::string extra; int cp; };
  for (const char* op : {"op=indexer heads=2 dim=8 topk=4", "op=sdpa hq=2 hkv=1 dim=8 dim_v=4"}) {
    const std::string docs = "docs=45,19,0,30";
    const Case base = parse_case(fmt::format("{} {} dtype=bf16 seed=99", op, docs));
    const Layout bl = make_layout(base);
    const Inputs bin = make_inputs(bl);
    const naive::NaiveLayout bnl = naive::derive(base);
    std::vector<Variant> variants = {{" q_pad=3,1,4,2 kv_pad=0,2,0,9 tail=6", 1},
                                     {" q_offsets=5,60,90,95 kv_offsets=1,50,70,71", 1}};
    for (int cp : {2, 4})
      for (int r = 0; r < cp; ++r) {
        // Pad every document up to a multiple of 2*cp (the empty one to a whole padding chunk set).
        std::vector<int64_t> L = {45, 19, 0, 30};
        std::string pad;
        for (size_t b = 0; b < L.size(); ++b) {
          const int64_t P = std::max<int64_t>(2 * cp, (L[b] + 2 * cp - 1) / (2 * cp) * (2 * cp));
          pad += fmt::format("{}{}", b ? "," : "", P - L[b]);
        }
        variants.push_back({fmt::format(" q_pad={} kv_pad=3 cp={} rank={}", pad, cp, r), cp});
        variants.push_back({fmt::format(" q_pad={} cp={} rank={} cp_scheme=contiguous", pad, cp, r), cp});
      }
    for (const auto& v : variants) {
      const Case c = parse_case(fmt::format("{} {} dtype=bf16 seed=99{}", op, docs, v.extra));
      SCOPED_TRACE(print_case(c));
      const Layout l = make_layout(c);
      const Inputs in = make_inputs(l);
      const naive::NaiveLayout nl = naive::derive(c);
      const auto ts = tensors_of(c, in), bts = tensors_of(base, bin);
      int64_t compared = 0, bad = 0;
      for (size_t ti = 0; ti < ts.size(); ++ti) {
        const int64_t w = ts[ti].width;
        if (ts[ti].kv) {
          for (size_t b = 0; b < nl.kv_len.size(); ++b)
            for (int64_t s = 0; s < nl.kv_len[b]; ++s)
              for (int64_t e = 0; e < w; ++e, ++compared)
                bad += f32_bits((*ts[ti].data)[size_t((nl.kv_off[b] + s) * w + e)]) !=
                       f32_bits((*bts[ti].data)[size_t((bnl.kv_off[b] + s) * w + e)]);
        } else {
          for (const auto& row : nl.rows) {
            if (!row.valid) continue;
            const int64_t brow = bnl.q_off[size_t(row.doc)] + row.tok;
            for (int64_t e = 0; e < w; ++e, ++compared)
              bad += f32_bits((*ts[ti].data)[size_t(row.row * w + e)]) != f32_bits((*bts[ti].data)[size_t(brow * w + e)]);
          }
        }
      }
      EXPECT_GT(compared, 0);
      EXPECT_EQ(bad, 0) << "of " << compared;
    }
  }
}

TEST(Inputs, PoisonFillsExactlyThePadSlots) {
  for (const char* line : kLayouts) {
    for (Poison p : {Poison::NaN, Poison::Inf, Poison::Large, Poison::None}) {
      Case c = parse_case(line);
      c.poison = p;
      SCOPED_TRACE(print_case(c));
      const Layout l = make_layout(c);
      const Inputs in = make_inputs(l);
      const naive::NaiveLayout nl = naive::derive(c);
      int64_t pad_slots = 0, bad = 0;
      for (const Tensor& t : tensors_of(c, in)) {
        const int64_t rows = t.kv ? nl.kv_cap : nl.q_rows;
        ASSERT_EQ(int64_t(t.data->size()), rows * t.width);
        for (int64_t r = 0; r < rows; ++r) {
          bool valid;
          if (t.kv) {
            valid = nl.kv_owner[size_t(r)] >= 0;
          } else {
            const int o = nl.row_owner[size_t(r)];
            valid = o >= 0 && nl.rows[size_t(o)].valid;
          }
          for (int64_t e = 0; e < t.width; ++e) {
            const float x = (*t.data)[size_t(r * t.width + e)];
            if (valid) {  // real data: finite, on the dtype grid, within [-1, 1]
              bad += !(std::fabs(x) <= 1.f) || round_to(c.dtype, x) != x;
              continue;
            }
            ++pad_slots;
            switch (p) {
              case Poison::NaN: bad += !std::isnan(x); break;
              case Poison::Inf: bad += x != std::numeric_limits<float>::infinity(); break;
              case Poison::Large: bad += x != poison_value(Poison::Large, c.dtype) || !std::isfinite(x); break;
              default:  // realistic pad content: finite generated data from the pad stream
                bad += f32_bits(x) !=
                       f32_bits(round_to(c.dtype, generated_value(c.seed, t.id | 0x10u, uint64_t(r * t.width + e), c.levels)));
            }
          }
        }
      }
      EXPECT_GT(pad_slots, 0);
      EXPECT_EQ(bad, 0);
    }
  }
}

TEST(Inputs, OutputsStartAsSentinel) {
  for (const char* line : kLayouts) {
    const Case c = parse_case(line);
    const Layout l = make_layout(c);
    const Outputs o = make_sentinel_outputs(l);
    const naive::NaiveLayout nl = naive::derive(c);
    if (c.op == Op::Indexer) {
      ASSERT_EQ(o.topk.size(), size_t(nl.q_rows * c.topk));
      ASSERT_EQ(o.scores.size(), o.topk.size());
      for (int32_t x : o.topk) ASSERT_EQ(x, kSentinelIndex);
      for (float x : o.scores) ASSERT_TRUE(is_sentinel(x));
    } else {
      ASSERT_EQ(o.o.size(), size_t(nl.q_rows * c.hq * c.dim_v));
      ASSERT_EQ(o.lse.size(), size_t(nl.q_rows * c.hq));
      for (float x : o.o) ASSERT_TRUE(is_sentinel(x));
      for (float x : o.lse) ASSERT_TRUE(is_sentinel(x));
    }
  }
  // The sentinel is a NaN no arithmetic produces by default, and told apart from a computed NaN.
  EXPECT_TRUE(std::isnan(sentinel_float()));
  EXPECT_FALSE(is_sentinel(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(is_sentinel(0.f * std::numeric_limits<float>::infinity()));
}

// Sizes below, at and above the threshold, from empty, smaller and larger storage holding other values,
// on one thread and on a team: every element is the value, the size n.
TEST(Inputs, PrefaultedTensorsHoldWhatAssignGives) {
  const size_t at = kPrefaultMinBytes / sizeof(float);
  const int team = omp_get_max_threads();
  for (int threads : {1, std::max(team, 2)})
    for (size_t n : {size_t(1000), at - 1, at, at + 4097, 3 * at + 5})
      for (size_t before : {size_t(0), n / 2, n + 100}) {
        omp_set_num_threads(threads);
        std::vector<float> f(before, -7.f);
        assign_prefaulted(f, n, sentinel_float());
        ASSERT_EQ(f.size(), n);
        size_t bad = 0;
        for (float x : f) bad += !is_sentinel(x);
        EXPECT_EQ(bad, 0u) << "n " << n << " from " << before << ", " << threads << " threads";
        std::vector<int32_t> i(before, 7);
        assign_prefaulted(i, n, kSentinelIndex);
        ASSERT_EQ(i.size(), n);
        EXPECT_EQ(size_t(std::count(i.begin(), i.end(), kSentinelIndex)), n);
        std::vector<float> r(before, -7.f);
        reserve_prefaulted(r, n);
        EXPECT_TRUE(r.empty());
        EXPECT_GE(r.capacity(), n);
      }
  omp_set_num_threads(team);
  // A case whose O and Q are above the threshold: the sentinel outputs and the inputs are those of one thread.
  const Layout l = make_layout(parse_case("op=sdpa docs=4096,4000 hq=8 hkv=2 dim=128 q_pad=100 kv_pad=30 poison=nan seed=5"));
  ASSERT_GE(size_t(l.o_rows * 8 * 128) * sizeof(float), kPrefaultMinBytes);
  const Outputs o = make_sentinel_outputs(l);
  EXPECT_EQ(size_t(std::count_if(o.o.begin(), o.o.end(), [](float x) { return is_sentinel(x); })), o.o.size());
  const Inputs many = make_inputs(l);
  omp_set_num_threads(1);
  const Inputs one = make_inputs(l);
  omp_set_num_threads(team);
  for (auto t : {&Inputs::q, &Inputs::k, &Inputs::v})
    EXPECT_EQ(0, std::memcmp((many.*t).data(), (one.*t).data(), (one.*t).size() * sizeof(float)));
}

}  // namespace
