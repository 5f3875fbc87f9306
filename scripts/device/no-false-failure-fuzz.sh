#!/usr/bin/env bash
# The no-false-failure campaign (cpu-ref under fuzz, one shard a core, on the device host's CPUs): the plan
# scripts/device/plans/no-false-failure-fuzz.toml run by scripts/device/runner.py, with the old knobs.
# Usage: scripts/device/no-false-failure-fuzz.sh OUT   (env: BUDGET=5m SEED=1 JOBS=0 (a shard a core) DIMS=small)
# Writes OUT/results.json (the summed fuzz-result counts), env.txt, runner.log, logs.tgz (the shards' logs and
# the shrunk false failures).
set -uo pipefail
out=${1:?OUT}
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
s=cpu-ref
exec python3 scripts/device/runner.py run scripts/device/plans/no-false-failure-fuzz.toml --out "$out" \
  --set "$s.budget=${BUDGET:-5m}" --set "$s.seed=${SEED:-1}" --set "$s.shards=${JOBS:-0}" --set "$s.dims=${DIMS:-small}"
