// The references' large products, in one place: row-major C = alpha * A * op(B) + beta * C over raw
// strided buffers. With AO_BLAS (default) they go to OpenBLAS through cblas, run single-threaded
// inside the caller's OpenMP row-block loop (BlasSingleThread); without it, Eigen's own GEMM.
// Either way a product's result depends only on its operands and shape, never on the thread count.
#pragma once
#include <cstdint>

#include <Eigen/Dense>

#if AO_BLAS
#include <cblas.h>
#endif

namespace ao::detail {

// While alive, BLAS calls run in the calling thread (the references parallelise over row blocks).
class BlasSingleThread {
 public:
#if AO_BLAS
  BlasSingleThread() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~BlasSingleThread() { openblas_set_num_threads(saved_); }
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

// C[m x n] = alpha * A[m x k] * B[n x k]^T + beta * C   (all row-major, leading dims lda/ldb/ldc)
template <class T>
void gemm_abt(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb,
              T beta, T* C, int64_t ldc) {
#if AO_BLAS
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k), alpha, A,
                blasint(lda), B, blasint(ldb), beta, C, blasint(ldc));
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k), alpha, A,
                blasint(lda), B, blasint(ldb), beta, C, blasint(ldc));
#else
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::OuterStride<>;
  Eigen::Map<const M, 0, S> a(A, m, k, S(lda)), b(B, n, k, S(ldb));
  Eigen::Map<M, 0, S> c(C, m, n, S(ldc));
  if (beta == T(0)) c.noalias() = alpha * (a * b.transpose());
  else { c *= beta; c.noalias() += alpha * (a * b.transpose()); }
#endif
}

// C[m x n] = alpha * A[m x k] * B[k x n] + beta * C   (all row-major)
template <class T>
void gemm_ab(int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta,
             T* C, int64_t ldc) {
#if AO_BLAS
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), alpha, A,
                blasint(lda), B, blasint(ldb), beta, C, blasint(ldc));
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), alpha, A,
                blasint(lda), B, blasint(ldb), beta, C, blasint(ldc));
#else
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::OuterStride<>;
  Eigen::Map<const M, 0, S> a(A, m, k, S(lda)), b(B, k, n, S(ldb));
  Eigen::Map<M, 0, S> c(C, m, n, S(ldc));
  if (beta == T(0)) c.noalias() = alpha * (a * b);
  else { c *= beta; c.noalias() += alpha * (a * b); }
#endif
}

}  // namespace ao::detail
