#!/usr/bin/env bash
# Packs what scripts/device/cudnn-campaign.sh runs on the device into the binary folder of
# scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin; name it in the device call's `carry`):
# attn-oracle, ao_cudnn_tests, and lib/ with the shared libraries they need that are not CUDA/cuDNN/glibc
# (fmt, OpenMP, OpenBLAS, ...), so they run on an image without Debian's -dev packages.
# Usage: scripts/device/cudnn-pack.sh [BUILD_DIR=build-cudnn]
set -euo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:-build-cudnn}
ao_pack "$build/attn-oracle" "$build/gpu_backends/ao_cudnn_tests"
