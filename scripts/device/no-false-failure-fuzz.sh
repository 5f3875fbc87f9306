#!/usr/bin/env bash
# A no-false-failure campaign on the device host's CPU cores (the GPU is not used): `attn-oracle fuzz
# --backend cpu-ref` (the CPU oracle in its fp32 mode, judged by the derived gates against the exact
# answer) as one shard per core, each for BUDGET; every case the generator draws, forward and backward
# (pass=bwd is drawn in about a fifth of the SDPA cases and a sixth of the indexer's). Any failure is a
# false failure of the gates: it is kept, shrunk, under OUT/found/. Writes OUT/summary.txt and OUT/env.txt.
# Usage: scripts/device/no-false-failure-fuzz.sh OUT   (env: BUDGET=5m SEED=1 JOBS=nproc DIMS=small)
# Binary: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/cpu-pack.sh and carried.
set -uo pipefail
out=${1:?OUT}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=$ao_bin
ao_use_bin
mkdir -p "$out/found"
jobs=${JOBS:-$(nproc)}
ao_versions > "$out/env.txt"
echo "budget: ${BUDGET:-5m} per shard, shards: $jobs, seed: ${SEED:-1}, dims: ${DIMS:-small}" >> "$out/env.txt"
for ((i = 0; i < jobs; ++i)); do
  OMP_NUM_THREADS=1 "$bin/attn-oracle" fuzz --backend cpu-ref --seed "${SEED:-1}" --shard "$i/$jobs" \
    --budget "${BUDGET:-5m}" --dims "${DIMS:-small}" --out "$out/found" > "$out/shard-$i.log" 2>&1 &
done
wait
grep -h '^fuzz-result' "$out"/shard-*.log | awk '
  { for (i = 2; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] += kv[2] } }
  END { printf "shards %d: cases=%d failed=%d unique=%d skipped=%d invalid=%d nondeterministic=%d\n",
        NR, v["cases"], v["failed"], v["unique"], v["skipped"], v["invalid"], v["nondeterministic"] }' \
  | tee "$out/summary.txt"
ls "$out/found" | head -20 | tee -a "$out/summary.txt"
