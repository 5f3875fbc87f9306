#!/usr/bin/env bash
# Catalog knobs on the device: the own CUDA kernels' bug knobs that re-create catalog
# defects as kernel mechanisms ([3] [4] on cuda-indexer, [22] [29] [30] on cuda-sdpa), judged by the
# CPU oracle, beside the cpu-bug models of the same ids on the same cases. One call runs everything;
# the report says whether the same cases catch both.
#   scripts/device/catalog-knobs.sh [OUT_DIR]      (OUT_DIR defaults to $OUT)
# Binaries: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/gpu-pack.sh and carried.
# Writes OUT_DIR/report.md (GPU, driver, CUDA, every plan line with its verdict and failed metrics),
# catalog-knobs.json (ao-gpu-campaign), gpu_tests.txt, memcheck.txt, plan.txt, campaign.log, env.txt
# (7 files: a device call brings back at most 8).
# Exit 0 when every expectation held and the GPU tests passed.
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dest=${1:-${OUT:-catalog-knobs-out}}
mkdir -p "$dest"
bin=$ao_bin
ao_use_bin
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
for b in attn-oracle ao_gpu_tests ao-gpu-campaign; do
  if ! ao_runnable "$bin/$b"; then
    echo "no runnable $bin/$b (run scripts/device/gpu-pack.sh and carry its folder)" | tee "$dest/report.md"
    exit 1
  fi
done

# ---- the table: one row per (knob, triggering case) --------------------------------------------
# id | the gated metric that must fail | a triggering case | a case outside the trigger [| more knobs]
# The backend follows the op (cuda-indexer / cuda-sdpa); values= cases need inputs=host. Plan per row: the knob fails on the trigger
# with the metric, the knob-less kernel passes it, the knob passes outside the trigger, and
# cpu-bug:<id> fails the same trigger with the same metric.
table() {
  local glm="heads=32 dim=128 topk=2048 dtype=bf16 seed=7 rows=64"
  cat <<EOF
sentinel-lanes|unwritten_rows|op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64 seed=1|op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16 seed=1
sentinel-lanes|out_of_causal|op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24 seed=2|op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=100 levels=3 seed=2
sentinel-lanes|unwritten_rows|op=indexer docs=8192 cp=32 rank=0 $glm|op=indexer docs=8192 cp=32 rank=31 $glm
masked-key-fill|wrong_fill_rows|op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64 seed=1|op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16 seed=1
masked-key-fill|out_of_causal|op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24 seed=2|op=indexer docs=300 mask=none heads=2 dim=16 topk=40 seed=2
masked-key-fill|wrong_fill_rows|op=indexer docs=8192 cp=32 rank=0 $glm|op=indexer docs=8192 cp=32 rank=31 $glm
masked-key-fill|out_of_range|op=indexer q_lens=64 kv_lens=4096 values=extreme heads=2 dim=16 topk=512 seed=3|op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=512 seed=3|inputs=host
decode-tile-unmasked|nonfinite_valid|op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64 seed=1|op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=bottomright hq=4 hkv=2 dim=64 seed=1
decode-tile-unmasked|lse_max_err|op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64 poison=none seed=2|op=sdpa q_lens=40,3 kv_lens=90,50 kv_pad=5 tail=64 mask=none hq=2 dim=32 seed=2
decode-tile-unmasked|nonfinite_valid|op=sdpa q_lens=1*32 kv_lens=4000*32 kv_pad=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7|op=sdpa q_lens=1*32 kv_lens=4096*32 kv_pad=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7
split-combine-stride0|unwritten_rows|op=sdpa q_lens=16,16,16 kv_lens=300,200,100 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64 seed=1|op=sdpa docs=300 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64 seed=1
split-combine-stride0|unwritten_rows|op=sdpa q_lens=1*8 kv_lens=700*8 num_splits=3 mask=none hq=8 hkv=1 dim=128 seed=2|op=sdpa q_lens=1*8 kv_lens=700*8 mask=none hq=8 hkv=1 dim=128 seed=2
split-combine-stride0|unwritten_rows|op=sdpa q_lens=1*32 kv_lens=8000*32 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7|op=sdpa q_lens=1 kv_lens=8000 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7
split-max-seqlen|nonfinite_valid|op=sdpa docs=300,100 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64 seed=1|op=sdpa docs=300,300 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64 seed=1
split-max-seqlen|lse_max_err|op=sdpa q_lens=1,1 kv_lens=100,37 tail=512 max_seqlen_kv=512 num_splits=2 mask=none hq=4 dim=64 poison=none seed=2|op=sdpa q_lens=1,1 kv_lens=100,37 tail=512 max_seqlen_kv=512 mask=none hq=4 dim=64 poison=none seed=2
split-max-seqlen|nonfinite_valid|op=sdpa q_lens=1*32 kv_lens=4000*31,8000 kv_pad=8 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7|op=sdpa q_lens=1*32 kv_lens=8000*32 kv_pad=8 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16 seed=7
EOF
}

plan() {
  table | while IFS='|' read -r id metric trigger inert more; do
    [[ -z "$id" || $id == \#* ]] && continue
    local kernel=cuda-indexer
    [[ $trigger == *op=sdpa* ]] && kernel=cuda-sdpa
    echo "# [$id] $metric"
    echo "expect=fail:$metric backend=$kernel:bug=$id${more:+,$more} $trigger"
    echo "expect=pass backend=$kernel${more:+:$more} $trigger"
    echo "expect=pass backend=$kernel:bug=$id${more:+,$more} $inert"
    echo "expect=fail:$metric backend=cpu-bug:$id $trigger"
  done
}

{
  ao_versions
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -o 'Version .*' | head -1)"
} >"$dest/env.txt" 2>&1
cat "$dest/env.txt"

plan >"$dest/plan.txt"
stamp "ao-gpu-campaign: $(grep -c '^expect' "$dest/plan.txt") plan lines"
timeout 400 "$bin/ao-gpu-campaign" --plan "$dest/plan.txt" --json "$dest/catalog-knobs.json" >"$dest/campaign.log" 2>&1
camp=$?
echo "ao-gpu-campaign exit $camp" | tee -a "$dest/campaign.log"
tail -2 "$dest/campaign.log"

stamp "ao_gpu_tests (the catalog knobs, and the kernels' own tests: knob-less behaviour unchanged)"
timeout 120 "$bin/ao_gpu_tests" --gtest_brief=1 --gtest_filter='Catalog*:CudaIndexer*:CudaSdpa*:Layouts/*:SplitKv/*' \
  >"$dest/gpu_tests.txt" 2>&1
tests=$?
echo "ao_gpu_tests exit $tests" | tee -a "$dest/gpu_tests.txt"

stamp "compute-sanitizer memcheck on the knobs' triggering cases (a knob reads and writes inside the buffers)"
mplan=$(mktemp)
grep -E "^expect=fail:[a-z_]+ backend=cuda" "$dest/plan.txt" | grep -v "cp=32" >"$mplan"
if command -v compute-sanitizer >/dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/ao-gpu-campaign" \
    --plan "$mplan" >"$dest/memcheck.txt" 2>&1
  mc=$?
else
  echo "compute-sanitizer not found" >"$dest/memcheck.txt"; mc=127
fi
echo "memcheck exit $mc" | tee -a "$dest/memcheck.txt"
tail -3 "$dest/memcheck.txt"

# ---- report.md ---------------------------------------------------------------------------------
{
  echo "# Catalog knobs on the device"
  echo
  echo '```'; cat "$dest/env.txt"; echo '```'
  echo
  echo "ao-gpu-campaign exit $camp (0: every expectation held) · ao_gpu_tests exit $tests · memcheck exit $mc"
  echo
  python3 - "$dest/catalog-knobs.json" <<'PY' 2>&1 || { echo; echo '```'; cat "$dest/campaign.log"; echo '```'; }
import json, sys
r = json.load(open(sys.argv[1]))
print(f"device: {r.get('device', '?')}\n")
print("| as expected | expect | backend | verdict | failed metrics | case |")
print("| --- | --- | --- | --- | --- | --- |")
for x in r["results"]:
    exp = "fail:" + x["expect_metric"] if x.get("expect_metric") else x["expect"]
    reason = x.get("reason", "").replace("|", "/")
    print(f"| {'yes' if x.get('as_expected') else '**NO**'} | {exp} | `{x['backend']}` | {x['verdict']} | {reason} | `{x.get('case', '')}` |")
PY
  echo
  echo "## ao_gpu_tests"
  echo '```'; grep -E "PASSED|FAILED|SKIPPED|exit" "$dest/gpu_tests.txt" | head -40; echo '```'
  echo "## memcheck"
  echo '```'; tail -5 "$dest/memcheck.txt"; echo '```'
} >"$dest/report.md"
stamp done
[[ $camp == 0 && $tests == 0 ]]
