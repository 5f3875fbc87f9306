// The SDPA references' softmax passes over one row of scores: the finiteness check with the max,
// x = exp(x - m) (the forward with the row's sum, the backward's P = exp(s - lse)), and the division by the
// sum. The fp32 ones and the fp64 exp are cloned per ISA (AVX-512, AVX2, baseline) so that portable binaries
// still run them wide; every clone computes the same bits (16 fp32 or 8 fp64 fixed lanes summed in a fixed
// order, no FMA contraction), so the references' outputs depend neither on the clone a CPU picks nor on the
// thread count.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Dense>

namespace ao::detail {

// True when x[0, n) are all finite; then mx = their max (-inf for n = 0).
bool finite_max(const float* x, int64_t n, float& mx);
// x[i] = exp(x[i] - m), at most 1 ulp from the rounded exact value (NaN, infinities, overflow and
// subnormal results as std::exp gives them); exp_shift_sum also returns the sum of the new x.
float exp_shift_sum(float* x, int64_t n, float m);
void exp_shift(float* x, int64_t n, float m);
// x[i] /= d.
void divide_row(float* x, int64_t n, float d);

// fp64: the same exp contract (at most 2 ulp from the rounded exact value) and fixed lane order, 8 lanes.
double exp_shift_sum(double* x, int64_t n, double m);
void exp_shift(double* x, int64_t n, double m);
inline bool finite_max(const double* x, int64_t n, double& mx) {
  Eigen::Map<const Eigen::ArrayXd> seg(x, n);
  if (!seg.isFinite().all()) return false;
  mx = n ? seg.maxCoeff() : -std::numeric_limits<double>::infinity();
  return true;
}
inline void divide_row(double* x, int64_t n, double d) { Eigen::Map<Eigen::ArrayXd>(x, n) /= d; }

}  // namespace ao::detail
