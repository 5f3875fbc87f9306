#!/usr/bin/env bash
# Packs a CPU-only attn-oracle (for CPU-heavy device runs such as fuzz-detection-campaign.sh) into
# .deps/cpu-bin (ignored; name it in the device call's `carry`) with lib/ holding the shared libraries it
# needs beyond glibc/libstdc++ (fmt, OpenMP, OpenBLAS, gfortran).
# Usage: scripts/device/cpu-pack.sh [BUILD_DIR=build-cpu]
set -euo pipefail
build=${1:-build-cpu}
dest=.deps/cpu-bin
rm -rf "$dest"; mkdir -p "$dest/lib"
cp "$build/attn-oracle" "$dest/"
ldd "$dest/attn-oracle" | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    *) cp -L -n "$lib" "$dest/lib/" ;;
  esac
done
du -sh "$dest"; ls "$dest" "$dest/lib"
