#!/usr/bin/env bash
# Packs bench/run.sh's binaries for the device host's CPU: attn-oracle and ao_bench (CPU-only,
# linked against the build's BLAS) with the shared libraries they need (scripts/device/lib.sh's ao_pack), plus
# the sgemm candidates bench/sgemm_probe.py compares (Debian's OpenBLAS with its gfortran
# runtime, Debian's BLIS, where installed), all compressed into .deps/cpu-bench.tar.xz: name that in the
# device call's `carry` (the folder itself is over the carry limit). scripts/device/cpu-bench.sh unpacks it.
# Usage: scripts/device/cpu-bench-pack.sh [BUILD_DIR=build-bench]   (an existing build dir is only rebuilt)
set -euo pipefail
# Its own binary folder, so that packing or unpacking it leaves the GPU campaigns' .deps/device-bin alone.
export AO_BIN_DIR=${AO_BIN_DIR:-.deps/cpu-bench-bin}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:-build-bench}
[[ -f "$build/CMakeCache.txt" ]] ||
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAO_WITH_CUDA=OFF -DAO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target attn-oracle ao_bench >/dev/null
ao_pack "$build/attn-oracle" "$build/bench/ao_bench"
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libblis.so.4; do
  f=$(ldconfig -p | awk -v n="$lib" '$1 == n && /x86-64/ {print $NF; exit}')
  [[ -n "$f" ]] && cp -L -n "$f" "$ao_bin/lib/"
done
tar -C "$ao_bin" -cf - . | xz -6 -T2 > .deps/cpu-bench.tar.xz
ls -la .deps/cpu-bench.tar.xz
