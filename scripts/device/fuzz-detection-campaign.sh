#!/usr/bin/env bash
# scripts/fuzz-detection.sh on the device host's CPU cores (the GPU is not used): one single-threaded
# campaign per core, every (model, seed) pair. Writes OUT/detection.md, OUT/catalog/<model>.case (the
# shortest shrunk case per model, for corpus/catalog/) and OUT/env.txt.
# Usage: scripts/device/fuzz-detection-campaign.sh OUT [model,model,...]   (env: SEEDS=10 BUDGET=60s JOBS=nproc)
# Binary: AO_BIN_DIR (default .deps/cpu-bin, made by scripts/device/cpu-pack.sh and carried).
set -uo pipefail
out=${1:?OUT}
models=${2:-}
bin=${AO_BIN_DIR:-.deps/cpu-bin}
export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
  echo "attn-oracle: $(git rev-parse --short HEAD 2>/dev/null), models: $("$bin/attn-oracle" backends | grep -c "^cpu-bug:")"
  echo "seeds: ${SEEDS:-10} budget: ${BUDGET:-60s} jobs: ${JOBS:-$(nproc)}"
} > "$out/env.txt"
t0=$(date +%s)
bash scripts/fuzz-detection.sh --ao "$bin/attn-oracle" --seeds "${SEEDS:-10}" --budget "${BUDGET:-60s}" --dims small \
  --jobs "${JOBS:-$(nproc)}" ${models:+--models "$models"} --catalog-out "$out/catalog" > "$out/detection.md"
echo "wall: $(( $(date +%s) - t0 )) s" >> "$out/env.txt"
cat "$out/detection.md"
