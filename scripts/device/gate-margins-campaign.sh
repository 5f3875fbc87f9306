#!/usr/bin/env bash
# Device campaign: the real SDPA kernels under the derived gates (tolerance.h), one device call.
# For every SDPA case of the corpus: cuda-sdpa, cudnn-sdpa against each cuDNN found (the system one and the
# one in PyTorch's wheel), and the PyTorch exec adapters (varlen_attn, per-segment SDPA) through the warm
# host; the long-row blind-spot case (docs=8192 cp=32 rank=31 rows=64) in bf16/fp16 for the
# kernels and for the mask bug knobs; all of them again with mask-probe inputs (probe=edges); ao_gpu_tests (the GPU suites after the last refactors).
# Writes into $OUT (at most 8 files come back from a device call): env.txt, gpu_tests.txt, margins.tsv (per
# backend and dtype, the distribution of error/gate of every gated numeric metric, from
# scripts/device/gate-margins.py), campaign.tgz (gate-<name>.txt and report-<name>.json of every gate).
# Binaries: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made here by
# scripts/device/gpu-pack.sh with cuDNN on:
# cmake -S . -B build-gpu && cmake --build build-gpu --target attn-oracle ao_gpu_tests ao-gpu-campaign).
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT=${OUT:-/tmp/ao-margins-out}
mkdir -p "$OUT"
root=$ao_root
bin=$ao_bin
AO_BUDGET_S=${AO_BUDGET_S:-480} ao_skipped_file=$OUT/skipped.txt  # for ao_time_left
ao_use_bin
AO="$bin/attn-oracle"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 AO_EXEC_TIMEOUT=120

sys_cudnn=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
torch_cudnn=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib 2>/dev/null | head -1)
{
  ao_versions
  echo "cudnn (torch wheel dir): ${torch_cudnn:-none} ($(ls "$torch_cudnn" 2>/dev/null | grep -m1 'libcudnn.so.9'))"
  echo "attn-oracle: $("$AO" backends 2>&1 | grep -E '^(cuda|cudnn)' | tr -s ' ' | cut -c1-80 | paste -sd';')"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

ao_stamp "ao_gpu_tests"
timeout 200 "$bin/ao_gpu_tests" --gtest_brief=1 >"$OUT/gpu_tests.txt" 2>&1
echo "ao_gpu_tests exit $?" | tee -a "$OUT/gpu_tests.txt"; tail -5 "$OUT/gpu_tests.txt"

work=$(mktemp -d)
mkdir -p "$work/bundle"
grep -hE '^op=sdpa' corpus/seeds/*.case corpus/edge/*.case corpus/found/*.case corpus/found/*/*.case 2>/dev/null | sort -u >"$work/sdpa.case"
# The blind spot: every row of this rank sees >= 3968 keys (and its fp16 twin, and a probe variant).
cat >"$work/long.case" <<'CASES'
op=sdpa docs=8192 cp=32 rank=31 rows=64 dtype=bf16
op=sdpa docs=8192 cp=32 rank=31 rows=64 dtype=fp16
op=sdpa docs=8192 cp=32 rank=0 rows=64 dtype=bf16
op=sdpa docs=4096,8192 cp=8 rank=5 rows=64 hq=8 hkv=2 dim=128 dtype=bf16
op=sdpa docs=8192 rows=64 hq=4 hkv=1 dim=128 dtype=fp16
CASES
# Mask-probe inputs (probe=edges, host-generated): the same cases with boundary keys made to dominate.
sed 's/$/ probe=edges/' "$work/sdpa.case" >"$work/probe.case"
sed 's/$/ probe=edges/' "$work/long.case" >>"$work/probe.case"
wc -l "$work"/*.case

gate() { AO_GATE_TIMEOUT_S=240 ao_gate "$work/bundle" "$@"; }  # name, case file, backend...

ao_time_left 60 "cuda-sdpa corpus" && gate cuda-sdpa "$work/sdpa.case" cuda-sdpa
ao_time_left 60 "cuda-sdpa probe" && gate probe-cuda "$work/probe.case" cuda-sdpa:inputs=host
ao_time_left 40 "cuda-sdpa long rows" && gate long-cuda "$work/long.case" cuda-sdpa cuda-sdpa:bug=derived-offsets
for spec in "sys:$(dirname "$(readlink -f "${sys_cudnn:-/nonexistent}")")" "torch:$torch_cudnn"; do
  tag=${spec%%:*} dir=${spec#*:}
  [[ -e "$dir/libcudnn.so.9" ]] || { echo "no cuDNN for $tag ($dir)"; continue; }
  ao_time_left 60 "cudnn-sdpa $tag" || continue
  ( export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "$AO" backends 2>&1 | grep -A1 '^cudnn' | head -2
    gate "cudnn-$tag" "$work/sdpa.case" cudnn-sdpa
    gate "long-cudnn-$tag" "$work/long.case" cudnn-sdpa
    gate "probe-cudnn-$tag" "$work/probe.case" cudnn-sdpa )
done
if ao_time_left 120 "PyTorch adapters"; then
  sock="$work/ao.sock"
  $PY scripts/adapters/ao_serve.py --socket "$sock" --idle-exit 300 2>"$OUT/serve.log" &
  for _ in $(seq 1 600); do [[ -S "$sock" ]] && break; sleep 0.1; done
  client="$PY $root/scripts/adapters/ao_client.py --socket $sock"
  gate torch "$work/sdpa.case" "exec:$client torch_varlen_sdpa --impl varlen" "exec:$client torch_varlen_sdpa --impl sdpa"
  gate long-torch "$work/long.case" "exec:$client torch_varlen_sdpa --impl varlen"
  gate probe-torch "$work/probe.case" "exec:$client torch_varlen_sdpa --impl varlen" "exec:$client torch_varlen_sdpa --impl sdpa"
  kill %1 2>/dev/null
fi
ao_stamp "summarise"
$PY scripts/device/gate-margins.py "$work"/bundle/report-*.json >"$OUT/margins.tsv" 2>&1
cat "$OUT/margins.tsv"
cp "$OUT/serve.log" "$work/bundle/" 2>/dev/null; rm -f "$OUT/serve.log"
tar -czf "$OUT/campaign.tgz" -C "$work/bundle" .
ao_stamp "done"
rm -rf "$work"
