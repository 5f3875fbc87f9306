#!/usr/bin/env bash
# The training path (pass=bwd) on the seed's layouts, on the device host's CPU cores (the GPU is not used):
# each line under cpu-ref (must pass) and under every backward bug model of its op (must fail where its
# trigger is in the case; a model that declines the case is listed as skipped), with the verdict, the
# failing metrics and the seconds of each run. Writes OUT/training-path.md and OUT/env.txt.
# Usage: scripts/device/training-path-campaign.sh OUT [lines-file]   (default lines: below)
#   A line may end in " | model,model": only those models run on it (the largest cases). Runs that would
#   start after DEADLINE seconds (default 540, under a device call's 600) are listed as not run.
# A model whose trigger the line lacks (scale=1 for the scale models, no -1 slot, no pad row) equals
# cpu-ref there by construction: its PASS is not a miss.
# Binary: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/cpu-pack.sh and carried.
set -uo pipefail
out=${1:?OUT}
lines_file=${2:-}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=$ao_bin
ao_use_bin
mkdir -p "$out"
ao_versions > "$out/env.txt"
# The seed's layouts (README "Seed cases"): cp=32 ranks 0/15/31 of an 8k and a 32k document, the packs
# [8192,4096] and [65536,65536]; reduced indexer dims where CPU time needs it, GLM dims on the 8k rank.
default_lines=(
  "op=indexer pass=bwd docs=8192 cp=32 rank=0 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=8192 cp=32 rank=15 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=8192 cp=32 rank=31 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=8192 cp=32 rank=31 heads=32 dim=128 topk=2048"
  "op=indexer pass=bwd docs=32768 cp=32 rank=0 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=32768 cp=32 rank=15 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=32768 cp=32 rank=31 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=8192,4096 heads=4 dim=32 topk=256"
  "op=indexer pass=bwd docs=8192 cp=32 rank=15 heads=4 dim=32 topk=256 scale=0.125 loss_mean=valid"
  "op=indexer pass=bwd docs=65536,65536 heads=2 dim=16 topk=64 | batch-offset-missing,dk-overwrite,target-slot-order"
  "op=sdpa pass=bwd docs=8192 cp=32 rank=0 hq=8 hkv=2 dim=64"
  "op=sdpa pass=bwd docs=8192 cp=32 rank=31 hq=8 hkv=2 dim=64"
  "op=sdpa pass=bwd docs=8192,4096 pad=64 hq=4 hkv=2 dim=64"
)
lines=()
if [[ -n "$lines_file" ]]; then
  while IFS= read -r l; do [[ -n "$l" && "$l" != \#* ]] && lines+=("$l"); done < "$lines_file"
else
  lines=("${default_lines[@]}")
fi
cat_json=$("$bin/attn-oracle" catalog --json)
models_of() {  # the backward models of op $1 (their pass is bwd), from the catalog's JSON
  python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
for m in j["models"]:
    if sys.argv[1] in m["ops"] and all("pass=bwd" in t["case"] for t in m["triggers"]):
        print(m["id"])' "$1" <<<"$cat_json"
}
start=$(date +%s)
verdict() {  # backend, line -> "VERDICT (metrics) | seconds"
  local t0 t1 res v
  if (( $(date +%s) - start > ${DEADLINE:-540} )); then printf 'not run (the call'"'"'s time was spent) | -'; return; fi
  t0=$(date +%s.%N)
  res=$(timeout 580 "$bin/attn-oracle" repro "$2" --backend "$1" --no-explain 2>&1)
  t1=$(date +%s.%N)
  v=$(grep -m1 '^verdict:' <<<"$res" | sed 's/^verdict: //; s/|/\//g')
  [[ -z "$v" ]] && v="no verdict: $(tail -1 <<<"$res" | cut -c1-120)"
  printf '%s | %s' "$v" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')"
}
{
  echo "| case | backend | verdict | seconds |"
  echo "| --- | --- | --- | --- |"
  for entry in "${lines[@]}"; do
    line=${entry%% | *}
    only=""
    [[ "$entry" == *" | "* ]] && only=${entry##* | }
    op=$(grep -o 'op=[a-z]*' <<<"$line" | cut -d= -f2)
    echo "| \`$line\` | cpu-ref | $(verdict cpu-ref "$line") |"
    for m in ${only:+${only//,/ }} $( [[ -z "$only" ]] && models_of "$op"); do
      echo "| | cpu-bug:$m | $(verdict "cpu-bug:$m" "$line") |"
    done
  done
} > "$out/training-path.md"
cat "$out/training-path.md"
