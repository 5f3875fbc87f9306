#!/usr/bin/env bash
# Packs a CPU-only attn-oracle (for CPU-heavy device runs such as fuzz-detection-campaign.sh) into the
# binary folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin; name it in the device
# call's `carry`) with lib/ holding the shared libraries it needs beyond glibc/libstdc++ (fmt, OpenMP,
# OpenBLAS, gfortran).
# Usage: scripts/device/cpu-pack.sh [BUILD_DIR=build-cpu]
set -euo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:-build-cpu}
ao_pack "$build/attn-oracle"
