// The references' large products, in one place: row-major C = alpha * A * op(B) + beta * C over raw
// strided buffers. With AO_BLAS (default) they go to OpenBLAS through cblas, run single-threaded
// inside the caller's OpenMP row-block loop (BlasSingleThread); without it, Eigen's own GEMM.
// The OpenBLAS is the build's target ao_blas (CMakeLists.txt): scipy-openblas32, whose symbols carry the
// prefix scipy_, or the system's, unprefixed; AO_BLAS_FN names a symbol either way.
// Either way a product's result depends only on its operands and shape, never on the thread count.
#pragma once
#include <cstdint>
#include <string>

#include <Eigen/Dense>

#if AO_BLAS || defined(AO_BLAS_SYMBOL_PREFIX)
#include <cblas.h>
#define AO_BLAS_CAT2(a, b) a##b
#define AO_BLAS_CAT(a, b) AO_BLAS_CAT2(a, b)
#define AO_BLAS_FN(f) AO_BLAS_CAT(AO_BLAS_SYMBOL_PREFIX, f)
#endif

namespace ao::detail {

// While alive, BLAS calls run in the calling thread (the references parallelise over row blocks).
class BlasSingleThread {
 public:
#if AO_BLAS
  BlasSingleThread() : saved_(AO_BLAS_FN(openblas_get_num_threads)()) { AO_BLAS_FN(openblas_set_num_threads)(1); }
  ~BlasSingleThread() { AO_BLAS_FN(openblas_set_num_threads)(saved_); }
#else
  BlasSingleThread() {}   // user-provided, so a guard object is not an "unused variable"
  ~BlasSingleThread() {}
#endif
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
#if AO_BLAS
  int saved_;
#endif
};

inline constexpr const char* gemm_backend_name() { return AO_BLAS ? "OpenBLAS (cblas)" : "Eigen"; }

#if AO_BLAS || defined(AO_BLAS_SYMBOL_PREFIX)
// The linked OpenBLAS's build line and the kernel set it chose for this CPU (what a benchmark reports).
inline std::string blas_config() {
  return std::string(AO_BLAS_FN(openblas_get_config)()) + "; kernels: " + AO_BLAS_FN(openblas_get_corename)();
}
#endif

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major: op(A) is m x k (A stored k x m when TA),
// op(B) is k x n (B stored n x k when TB). One body for every transpose pair, OpenBLAS and Eigen alike.
template <bool TA, bool TB, class T>
void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
          int64_t ldc) {
#if AO_BLAS
  const auto ta = TA ? CblasTrans : CblasNoTrans, tb = TB ? CblasTrans : CblasNoTrans;
  if constexpr (sizeof(T) == 4)
    AO_BLAS_FN(cblas_sgemm)(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, A, blasint(lda), B,
                            blasint(ldb), beta, C, blasint(ldc));
  else
    AO_BLAS_FN(cblas_dgemm)(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, A, blasint(lda), B,
                            blasint(ldb), beta, C, blasint(ldc));
#else
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::OuterStride<>;
  Eigen::Map<const M, 0, S> a(A, TA ? k : m, TA ? m : k, S(lda)), b(B, TB ? n : k, TB ? k : n, S(ldb));
  Eigen::Map<M, 0, S> c(C, m, n, S(ldc));
  const auto run = [&](const auto& opa, const auto& opb) {
    if (beta == T(0)) c.noalias() = alpha * (opa * opb);
    else { c *= beta; c.noalias() += alpha * (opa * opb); }
  };
  if constexpr (TA && TB) run(a.transpose(), b.transpose());
  else if constexpr (TA) run(a.transpose(), b);
  else if constexpr (TB) run(a, b.transpose());
  else run(a, b);
#endif
}

// The three shapes the references use, by name.
template <class T>  // C = alpha * A[m x k] * B[n x k]^T + beta * C
void gemm_abt(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
              T* C, int64_t ldc) {
  gemm<false, true>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
template <class T>  // C = alpha * A[m x k] * B[k x n] + beta * C
void gemm_ab(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
             T* C, int64_t ldc) {
  gemm<false, false>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
template <class T>  // C = alpha * A^T * B + beta * C, A stored [k x m], B [k x n]
void gemm_atb(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
              T* C, int64_t ldc) {
  gemm<true, false>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace ao::detail
