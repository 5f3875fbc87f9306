#!/usr/bin/env bash
# PyTorch SDPA backward diagnosis on the device: scripts/device/torch-bwd-diag.case through
# torch_varlen_sdpa --impl sdpa under each kernel PyTorch can pick (--sdpa-backend), so a failure the
# automatic choice gave is pinned to one kernel (or to all of them: then it is the inputs' precision).
# Usage (repo root): scripts/device/torch-bwd-diag.sh OUT [BACKENDS]   (default "auto math efficient cudnn")
#   AO_BIN_DIR (scripts/device/lib.sh): attn-oracle; PY (default python3) with torch.
# Writes OUT/torch-diag-<backend>.txt and OUT/torch-diag.tgz (each gate's report.json).
# The same campaign as a plan, with the verdicts of 2026-12-05 as its expectations:
# scripts/device/plans/torch-bwd-diag.toml (scripts/device/runner.py); this script stays until that plan has
# run on a GPU and given them.
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out=${1:?OUT}
backends=${2:-auto math efficient cudnn}
PY=${PY:-python3}
mkdir -p "$out/torch-diag"
ao_use_bin
for be in $backends; do
  log=$out/torch-diag-$be.txt
  timeout 240 "$ao_bin/attn-oracle" gate scripts/device/torch-bwd-diag.case \
    --backend "exec:$PY scripts/adapters/torch_varlen_sdpa.py --impl sdpa --sdpa-backend $be" \
    --report-dir "$out/torch-diag/$be" >"$log" 2>&1
  echo "exit: $?" >>"$log"
  echo "== $be"; grep -E "^(PASS|FAIL|SKIP|ERROR)" "$log" | cut -c1-40,90-250
done
tar -czf "$out/torch-diag.tgz" -C "$out" torch-diag && rm -rf "$out/torch-diag"
