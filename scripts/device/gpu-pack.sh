#!/usr/bin/env bash
# Packs what scripts/device/gpu-campaign.sh, catalog-knobs.sh, gate-margins-campaign.sh and
# cp-run-campaign.sh run into the binary folder of scripts/device/lib.sh (AO_BIN_DIR, default
# .deps/device-bin; name it in the device call's `carry`): attn-oracle, ao_gpu_tests, ao-gpu-campaign and
# lib/ with the non-CUDA, non-glibc shared libraries they need (fmt, OpenMP, OpenBLAS, ...; not CUDA,
# cuDNN, NCCL), for a device image without Debian -dev packages. Build first without NCCL/cuDNN so nothing
# the image may lack is linked (cp-run-campaign.sh wants NCCL: leave -DAO_NCCL_LIBRARY out for it):
#   cmake -S . -B build-gpu -DAO_NCCL_LIBRARY=OFF -DAO_CUDNN_FRONTEND_INCLUDE_DIR=/nonexistent
#   cmake --build build-gpu -j2 --target attn-oracle ao_gpu_tests ao-gpu-campaign
# Usage: scripts/device/gpu-pack.sh [BUILD_DIR=build-gpu]
set -euo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:-build-gpu}
ao_pack "$build/attn-oracle" "$build/gpu_backends/ao_gpu_tests" "$build/gpu_backends/ao-gpu-campaign"
