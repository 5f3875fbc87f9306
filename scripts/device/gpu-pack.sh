#!/usr/bin/env bash
# Packs what scripts/device/gpu-campaign.sh runs into .deps/gpu-bin (ignored; name it in the device
# call's `carry`): attn-oracle, ao_gpu_tests, ao-gpu-campaign and lib/ with the non-CUDA, non-glibc
# shared libraries they need (fmt, OpenMP, OpenBLAS, ...; not CUDA, cuDNN, NCCL), for a device image without Debian -dev
# packages. Build first without NCCL/cuDNN so nothing the image may lack is linked:
#   cmake -S . -B build-gpu -DAO_NCCL_LIBRARY=OFF -DAO_CUDNN_FRONTEND_INCLUDE_DIR=/nonexistent
#   cmake --build build-gpu -j2 --target attn-oracle ao_gpu_tests ao-gpu-campaign
# Usage: scripts/device/gpu-pack.sh [BUILD_DIR=build-gpu]
set -euo pipefail
build=${1:-build-gpu}
dest=.deps/gpu-bin
rm -rf "$dest"; mkdir -p "$dest/lib"
cp "$build/attn-oracle" "$build/gpu_backends/ao_gpu_tests" "$build/gpu_backends/ao-gpu-campaign" "$dest/"
for b in "$dest"/attn-oracle "$dest"/ao_gpu_tests "$dest"/ao-gpu-campaign; do
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libstdc++*|libgcc_s*|libcudart*|libcudnn*|libnvrtc*|libnccl*) ;;  # the image has its own (or the torch wheels do)
      *) cp -L -n "$lib" "$dest/lib/" ;;
    esac
  done
done
du -sh "$dest"; ls "$dest" "$dest/lib"
