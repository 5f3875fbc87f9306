// Host/device portability: headers marked AO_HD compile unchanged under nvcc, so CPU and GPU share
// the exact same integer/float recipes (input generation, dtype rounding).
#pragma once
#if defined(__CUDACC__)
#define AO_HD __host__ __device__ __forceinline__
#else
#define AO_HD inline
#endif
