#!/usr/bin/env bash
# Packs what scripts/device/cudnn-campaign.sh runs on the device into .deps/device-bin (ignored; name it
# in the device call's `carry`): attn-oracle, ao_cudnn_tests, and lib/ with the shared libraries they
# need that are not CUDA/cuDNN/glibc (fmt, OpenMP, OpenBLAS, ...), so they run on an image without
# Debian's -dev packages. Usage: scripts/device/cudnn-pack.sh [BUILD_DIR=build-cudnn]
set -euo pipefail
build=${1:-build-cudnn}
dest=.deps/device-bin
rm -rf "$dest"; mkdir -p "$dest/lib"
cp "$build/attn-oracle" "$build/gpu_backends/ao_cudnn_tests" "$dest/"
for b in "$dest/attn-oracle" "$dest/ao_cudnn_tests"; do
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart*|libcudnn*|libnvrtc*|libnccl*) ;;  # the image has its own (or the torch wheels do)
      *) cp -L -n "$lib" "$dest/lib/" ;;
    esac
  done
done
du -sh "$dest"; ls "$dest" "$dest/lib"
