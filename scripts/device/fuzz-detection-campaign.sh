#!/usr/bin/env bash
# scripts/tools/fuzz-detection.sh on the device host's CPU cores (the GPU is not used): one single-threaded
# campaign per core, every (model, seed) pair. Writes OUT/detection.md, OUT/catalog/<model>.case (the
# shortest shrunk case per model, for corpus/catalog/) and OUT/env.txt.
# Usage: scripts/device/fuzz-detection-campaign.sh OUT [model,model,...]   (env: SEEDS=10 BUDGET=60s JOBS=nproc)
# Binary: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/cpu-pack.sh and carried.
set -uo pipefail
out=${1:?OUT}
models=${2:-}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=$ao_bin
ao_use_bin
mkdir -p "$out"
{
  ao_versions
  echo "models: $("$bin/attn-oracle" backends | grep -c "^cpu-bug:")"
  echo "seeds: ${SEEDS:-10} budget: ${BUDGET:-60s} jobs: ${JOBS:-$(nproc)}"
} > "$out/env.txt"
t0=$(date +%s)
bash scripts/tools/fuzz-detection.sh --ao "$bin/attn-oracle" --seeds "${SEEDS:-10}" --budget "${BUDGET:-60s}" --dims small \
  --jobs "${JOBS:-$(nproc)}" ${models:+--models "$models"} --catalog-out "$out/catalog" > "$out/detection.md"
echo "wall: $(( $(date +%s) - t0 )) s" >> "$out/env.txt"
cat "$out/detection.md"
