#include <sstream>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/reference/reference.h"
#include "reference_gemm.h"
#include "reference_runtime.h"

namespace ao {

std::string reference_runtime() {
#if AO_BLAS
  // openblas_get_config(): "OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64": its name and
  // version; the kernels are the ones chosen for this CPU (or named by OPENBLAS_CORETYPE).
  std::istringstream config(AO_BLAS_FN(openblas_get_config)());
  std::string name, version;
  config >> name >> version;
  const std::string gemm = fmt::format("{} {}, {} kernels", name, version, AO_BLAS_FN(openblas_get_corename)());
#else
  const std::string gemm = "Eigen's GEMM";
#endif
  const int t = detail::reference_threads();
  return fmt::format("{}; {} thread{}", gemm, t, t == 1 ? "" : "s");
}

}  // namespace ao
