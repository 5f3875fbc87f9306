// AO_ISA_CLONES: a hot loop compiled once per ISA (AVX-512, AVX2, baseline) and picked at load time, so
// that portable binaries still use the wide registers where the CPU has them. GCC only: clang 14 accepts
// target_clones but emits one body for its first target (AVX-512), which dies of SIGILL on a CPU without
// AVX-512 (seen in the libFuzzer build on an AMD EPYC). Clang builds get the baseline lowering; the
// clones compute the same bits, so only speed differs.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define AO_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AO_ISA_CLONES
#endif
