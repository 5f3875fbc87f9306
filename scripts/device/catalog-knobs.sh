#!/usr/bin/env bash
# Catalog knobs on the device: the own CUDA kernels' bug knobs that re-create catalog defects as kernel
# mechanisms, judged by the CPU oracle, beside the cpu-bug models of the same ids on the same cases. The
# plan comes from the one model list (`attn-oracle catalog --json` of the carried binary, turned into plan
# lines by scripts/device/catalog-plan.py): for every `bug` knob of cuda-indexer and cuda-sdpa, the
# model's trigger cases fail with the metrics the model declares (the knob, and cpu-bug:<id>), the
# knob-less kernel passes them, and the knob passes the model's outside cases; every seed of the list.
#   scripts/device/catalog-knobs.sh [OUT_DIR]      (OUT_DIR defaults to $OUT)
#   scripts/device/catalog-knobs.sh --dry-run      (prints the plan and a summary per knob; no GPU needed:
#                                                   the binary of AO_CLI, else attn-oracle of the folder below)
# Binaries: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/gpu-pack.sh and carried.
# Writes OUT_DIR/report.md (GPU, driver, CUDA, every plan line with its verdict and failed metrics),
# catalog-knobs.json (ao-gpu-campaign), gpu_tests.txt, memcheck.txt, plan.txt, campaign.log, env.txt
# (7 files: a device call brings back at most 8).
# Exit 0 when every expectation held and the GPU tests passed; 1 when the plan is incomplete (a knob
# naming no model, a knob whose model has no trigger case for the kernel's op).
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
plan_args=(--backends 'cuda-.*' --ops cuda-indexer=indexer,cuda-sdpa=sdpa)
if [[ ${1:-} == --dry-run ]]; then
  cli=${AO_CLI:-$ao_bin/attn-oracle}
  exec python3 scripts/device/catalog-plan.py --ao "$cli" "${plan_args[@]}" --dry-run
fi
dest=${1:-${OUT:-catalog-knobs-out}}
mkdir -p "$dest"
bin=$ao_bin
ao_use_bin
for b in attn-oracle ao_gpu_tests ao-gpu-campaign; do
  if ! ao_runnable "$bin/$b"; then
    echo "no runnable $bin/$b (run scripts/device/gpu-pack.sh and carry its folder)" | tee "$dest/report.md"
    exit 1
  fi
done

{
  ao_versions
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -o 'Version .*' | head -1)"
} >"$dest/env.txt" 2>&1
cat "$dest/env.txt"

catalog=$(mktemp) mplan=$(mktemp)  # not under $dest: a device call brings back at most 8 files
"$bin/attn-oracle" catalog --json >"$catalog" || exit 1
python3 scripts/device/catalog-plan.py --catalog "$catalog" "${plan_args[@]}" >"$dest/plan.txt" || exit 1
python3 scripts/device/catalog-plan.py --catalog "$catalog" "${plan_args[@]}" --memcheck >"$mplan" || exit 1
ao_stamp "ao-gpu-campaign: $(grep -c '^expect' "$dest/plan.txt") plan lines"
timeout 400 "$bin/ao-gpu-campaign" --plan "$dest/plan.txt" --json "$dest/catalog-knobs.json" >"$dest/campaign.log" 2>&1
camp=$?
echo "ao-gpu-campaign exit $camp" | tee -a "$dest/campaign.log"
tail -2 "$dest/campaign.log"

ao_stamp "ao_gpu_tests (the catalog knobs, and the kernels' own tests: knob-less behaviour unchanged)"
timeout 120 "$bin/ao_gpu_tests" --gtest_brief=1 --gtest_filter='Catalog*:CudaIndexer*:CudaSdpa*:Layouts/*:SplitKv/*' \
  >"$dest/gpu_tests.txt" 2>&1
tests=$?
echo "ao_gpu_tests exit $tests" | tee -a "$dest/gpu_tests.txt"

ao_stamp "compute-sanitizer memcheck on the knobs' triggering cases (a knob reads and writes inside the buffers)"
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
ao_stamp done
[[ $camp == 0 && $tests == 0 ]]
