// The SDPA references' softmax passes (reference_softmax.h) on fresh random rows: the fp32 exp within 1 ulp of the
// rounded exact value (NaN, infinities, overflow and subnormal results included), the sum in its fixed 16-lane order (so every ISA clone and every row length gives the
// same bits), the fp64 exp within 2 ulp with its sum in 8 fixed lanes, the finiteness check catching a non-finite value wherever it sits (the partial last vector
// included), and the division.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../reference_softmax.h"

namespace {

using namespace ao::detail;

uint64_t fresh_seed() { return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000007u; }

int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

const std::vector<int64_t> kLengths = {0, 1, 2, 15, 16, 17, 31, 33, 255, 1000, 4097};

TEST(ReferenceSoftmax, ExpWithinOneUlpAndSumInFixedLaneOrder) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : kLengths) {
    for (bool specials : {false, true}) {  // a softmax row (x <= m), or any argument the backward's P may see
      const float m = std::uniform_real_distribution<float>(-300.f, 300.f)(g);
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = m - std::uniform_real_distribution<float>(specials ? -95.f : 0.f, 110.f)(g);
      if (n > 2) x[size_t(n / 2)] = m;  // the row's max: exp(0) = 1
      if (specials && n > 0)
        for (float v : {nan, inf, -inf, m + 88.5f, m - 100.f, m - 87.f})
          x[size_t(g() % uint64_t(n))] = v;
      std::vector<float> y = x, z = x;
      const float sum = exp_shift_sum(y.data(), n, m);
      exp_shift(z.data(), n, m);
      float lanes[16] = {};
      for (int64_t i = 0; i < n; ++i) {
        const float d = x[size_t(i)] - m;
        const float want = float(std::exp(double(d)));
        const float got = y[size_t(i)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "n=" << n << " x-m=" << d << " got " << got;
        } else {
          EXPECT_LE(ulps(got, want), 1) << "n=" << n << " x-m=" << d << " got " << got << " want " << want;
        }
        EXPECT_EQ(ulps(z[size_t(i)], got), 0) << "exp_shift and exp_shift_sum differ at n=" << n << " i=" << i;
        float one = x[size_t(i)];  // a single element through the partial-vector path: the same bits
        exp_shift(&one, 1, m);
        EXPECT_EQ(ulps(one, got), 0) << "n=" << n << " i=" << i;
        lanes[i % 16] += got;
      }
      for (int w = 8; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
      if (!std::isnan(sum) || !std::isnan(lanes[0])) {
        EXPECT_EQ(ulps(sum, lanes[0]), 0) << "n=" << n;
      }
    }
  }
}

int64_t ulps(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  return ia > ib ? ia - ib : ib - ia;  // same sign here: exp is never negative
}

// The fp64 exp (the exact answers' weights, the fp64 backward's P) against expl rounded to double: within
// 2 ulp over softmax rows and any argument (NaN, infinities, overflow, subnormal and zero results), the
// sum in its 8-lane order, exp_shift equal to exp_shift_sum's values, and one element alone the same bits.
TEST(ReferenceSoftmax, Fp64ExpWithinTwoUlpAndSumInFixedLaneOrder) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n : kLengths) {
    for (bool specials : {false, true}) {
      const double m = std::uniform_real_distribution<double>(-3e3, 3e3)(g);
      std::vector<double> x(static_cast<size_t>(n));
      for (auto& v : x) v = m - std::uniform_real_distribution<double>(specials ? -720.0 : 0.0, 760.0)(g);
      if (n > 2) x[size_t(n / 2)] = m;
      if (specials && n > 0)
        for (double v : {nan, inf, -inf, m + 709.9, m + 709.7, m - 708.5, m - 745.0, m - 800.0, m - 1e300})
          x[size_t(g() % uint64_t(n))] = v;
      std::vector<double> y = x, z = x;
      const double sum = exp_shift_sum(y.data(), n, m);
      exp_shift(z.data(), n, m);
      double lanes[8] = {};
      for (int64_t i = 0; i < n; ++i) {
        const double d = x[size_t(i)] - m;
        const double want = double(std::exp((long double)d));
        const double got = y[size_t(i)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "n=" << n << " x-m=" << d << " got " << got;
        } else {
          EXPECT_LE(ulps(got, want), 2) << "n=" << n << " x-m=" << d << " got " << got << " want " << want;
        }
        EXPECT_EQ(ulps(z[size_t(i)], got), 0) << "exp_shift and exp_shift_sum differ at n=" << n << " i=" << i;
        double one = x[size_t(i)];
        exp_shift(&one, 1, m);
        EXPECT_EQ(ulps(one, got), 0) << "n=" << n << " i=" << i;
        lanes[i % 8] += got;
      }
      for (int w = 4; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
      if (!std::isnan(sum) || !std::isnan(lanes[0])) {
        EXPECT_EQ(ulps(sum, lanes[0]), 0) << "n=" << n;
      }
    }
  }
}

TEST(ReferenceSoftmax, FiniteMaxFindsTheMaxAndEveryNonFiniteValue) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (int64_t n : kLengths) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = std::uniform_real_distribution<float>(-1e30f, 1e30f)(g);
    float mx = 0;
    ASSERT_TRUE(finite_max(x.data(), n, mx)) << "n=" << n;
    EXPECT_EQ(mx, n ? *std::max_element(x.begin(), x.end()) : -std::numeric_limits<float>::infinity()) << "n=" << n;
    if (n == 0) continue;
    for (float b : bad) {  // at the start, the end (the partial vector) and a random place
      for (int64_t at : {int64_t(0), n - 1, int64_t(g() % uint64_t(n))}) {
        std::vector<float> z = x;
        z[size_t(at)] = b;
        EXPECT_FALSE(finite_max(z.data(), n, mx)) << "n=" << n << " at=" << at << " value=" << b;
      }
    }
  }
}

TEST(ReferenceSoftmax, DivideRowIsTheElementwiseQuotient) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  for (int64_t n : kLengths) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = std::uniform_real_distribution<float>(0.f, 1.f)(g);
    const float d = std::uniform_real_distribution<float>(1.f, 5000.f)(g);
    std::vector<float> y = x;
    divide_row(y.data(), n, d);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[size_t(i)], x[size_t(i)] / d) << "n=" << n << " i=" << i;
  }
}

}  // namespace
