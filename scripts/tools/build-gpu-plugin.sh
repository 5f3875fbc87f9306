#!/usr/bin/env bash
# Builds the cuda-indexer plugin (gpu_backends/plugins/plugin_cuda_indexer.cu + indexer_kernel.cu) into
# a self-contained shared library (cudart linked statically). Usage: scripts/tools/build-gpu-plugin.sh [OUT.so]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/libao_cuda_indexer_plugin.so}
mkdir -p "$(dirname "$out")"
${NVCC:-nvcc} -std=c++20 -O2 -shared -Xcompiler -fPIC -Xcompiler -Wall --expt-relaxed-constexpr \
  -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
  -Ioracle/include -Igpu_backends -o "$out" \
  gpu_backends/plugins/plugin_cuda_indexer.cu gpu_backends/indexer_kernel.cu
echo "$out"
