#!/usr/bin/env bash
# cuda-indexer / cuda-sdpa device campaign. Run on the H200 from the repo root:
#   scripts/device/gpu-campaign.sh [quick|full] [OUT_DIR]
#   quick: environment, ao_gpu_tests, the 8k seed cases and one 131k case (a first look)
#   full:  environment, ao_gpu_tests, compute-sanitizer memcheck (tests + large layouts), the corpus
#          gate against both backends and every bug knob, the seeds' cases at full size with the CPU
#          oracle on sampled rows (rows=$AO_ROWS), a timing table; JSON + Markdown under OUT_DIR.
# Binaries: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/gpu-pack.sh and carried; built on the device when missing or not runnable.
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mode=${1:-full}
dest=${2:-${OUT:-gpu-campaign-out}}
# At most 8 files come back from a device call: work in a scratch folder, pack it on exit.
out=$(mktemp -d)
mkdir -p "$dest"
trap 'tar -czf "$dest/campaign-$mode.tgz" -C "$out" . ; cp "$out"/env.txt "$dest"/ 2>/dev/null' EXIT
trap 'exit 143' TERM INT  # a time limit still packs what ran (the EXIT trap)
AO_BUDGET_S=${AO_BUDGET_S:-540} ao_skipped_file=$out/skipped.txt  # ao_time_left: later steps are skipped and listed
bin=$ao_bin
rows=${AO_ROWS:-256}

# ---- environment -------------------------------------------------------------------------------
{
  ao_versions
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -o 'Version .*' | head -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1) | g++: $(g++ --version 2>/dev/null | head -1)"
  for h in eigen3/Eigen/Dense fmt/format.h CLI/CLI.hpp nlohmann/json.hpp gtest/gtest.h; do
    [[ -e /usr/include/$h ]] && echo "header $h: present" || echo "header $h: missing"
  done
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

ao_use_bin
if ! ao_runnable "$bin/attn-oracle" || ! ao_runnable "$bin/ao-gpu-campaign"; then
  ao_stamp "no runnable binaries in $bin; building on the device"
  bin=build-device
  { cmake -S . -B "$bin" -DAO_NCCL_LIBRARY=OFF -DAO_CUDNN_FRONTEND_INCLUDE_DIR=/nonexistent &&
    cmake --build "$bin" -j"$(nproc)" --target attn-oracle ao_gpu_tests ao-gpu-campaign &&
    cp "$bin/gpu_backends/ao_gpu_tests" "$bin/gpu_backends/ao-gpu-campaign" "$bin/"; } >"$out/build.log" 2>&1 ||
    { ao_stamp "device build failed"; tail -30 "$out/build.log"; exit 1; }
fi
echo "binaries: $bin" | tee -a "$out/env.txt"
AO="$bin/attn-oracle"; CAMP="$bin/ao-gpu-campaign"

# ---- GPU tests ---------------------------------------------------------------------------------
ao_stamp "ao_gpu_tests"
timeout 150 "$bin/ao_gpu_tests" --gtest_brief=1 >"$out/gpu_tests.txt" 2>&1; echo "ao_gpu_tests exit $?" | tee -a "$out/gpu_tests.txt"
grep -E "PASSED|FAILED|SKIPPED \]" "$out/gpu_tests.txt" | head -20

# ---- plans: expect=<pass|fail> backend=<spec> <case> --------------------------------------------
seeds() {  # the seed PR's cases at full size (GLM-5.2 indexer dims), keys cropped as its call sites do
  local g="heads=32 dim=128 topk=2048 dtype=bf16 crop=1 seed=7 rows=$rows"
  for L in 8192 32768 131072; do for r in 0 15 31; do echo "op=indexer docs=$L cp=32 rank=$r $g"; done; done
  for P in 8192,4096 65536,65536 131008,64; do for r in 0 15 31; do echo "op=indexer docs=$P cp=32 rank=$r $g"; done; done
  for r in 0 15 31; do echo "op=indexer docs=131000,37 padded_offsets=0,131008,131072 cp=32 rank=$r $g"; done
}
plan_seeds() {
  seeds | while read -r c; do  # the bug knobs need fewer sampled rows to be caught
    echo "expect=pass backend=cuda-indexer $c"
    echo "expect=fail backend=cuda-indexer:bug=topleft-cp ${c/rows=$rows/rows=64}"
    echo "expect=pass backend=cuda-indexer:mask=bottomright ${c/rows=$rows/rows=64}"
  done
  # bottom-right over the uncropped key extent is wrong: the same cases without crop
  for c in "docs=8192 rank=15" "docs=131072 rank=31" "docs=65536,65536 rank=0" "docs=131000,37 padded_offsets=0,131008,131072 rank=31"; do
    echo "expect=fail backend=cuda-indexer:mask=bottomright op=indexer $c cp=32 heads=32 dim=128 topk=2048 seed=7 rows=$rows"
    echo "expect=pass backend=cuda-indexer op=indexer $c cp=32 heads=32 dim=128 topk=2048 seed=7 rows=$rows"
  done
}
plan_quick() {
  seeds | grep "docs=8192 " | while read -r c; do
    echo "expect=pass backend=cuda-indexer $c"; echo "expect=fail backend=cuda-indexer:bug=topleft-cp $c"; done
  echo "expect=pass backend=cuda-indexer op=indexer docs=131072 cp=32 rank=31 heads=32 dim=128 topk=2048 crop=1 seed=7 rows=64"
  echo "expect=fail backend=cuda-indexer:bug=topleft-cp op=indexer docs=65536,65536 cp=32 rank=31 heads=32 dim=128 topk=2048 crop=1 seed=7 rows=64"
  echo "expect=pass backend=cuda-sdpa op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright poison=nan"
  echo "expect=fail backend=cuda-sdpa:bug=tail-read op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright poison=nan"
}
plan_timing() {  # correct kernels only; --repeat gives medians
  for c in "docs=8192 rank=31" "docs=32768 rank=31" "docs=131072 rank=0" "docs=131072 rank=31" "docs=65536,65536 rank=31" "docs=131008,64 rank=31"; do
    echo "expect=pass backend=cuda-indexer op=indexer $c cp=32 heads=32 dim=128 topk=2048 crop=1 seed=7 rows=16"
  done
  echo "expect=pass backend=cuda-indexer op=indexer docs=32768 heads=32 dim=128 topk=2048 seed=7 rows=16"
  echo "expect=pass backend=cuda-sdpa op=sdpa docs=32768 hq=32 hkv=8 dim=128 seed=7 rows=16"
  echo "expect=pass backend=cuda-sdpa op=sdpa docs=8192*4 pad=64 hq=32 hkv=8 dim=128 seed=7 rows=16"
}
plan_sanitize() {  # memcheck: the widest layouts, each mask mode, padded CP with pad chunks
  local g="heads=32 dim=128 topk=2048 crop=1 seed=7 rows=8"
  echo "expect=pass backend=cuda-indexer op=indexer docs=131072 cp=32 rank=31 $g"
  echo "expect=pass backend=cuda-indexer op=indexer docs=131000,37 padded_offsets=0,131008,131072 cp=32 rank=31 $g"
  echo "expect=fail backend=cuda-indexer:bug=topleft-cp op=indexer docs=65536,65536 cp=32 rank=31 $g"
  echo "expect=fail backend=cuda-indexer:mask=bottomright op=indexer docs=131000,37 padded_offsets=0,131008,131072 cp=32 rank=0 heads=32 dim=128 topk=2048 seed=7 rows=8"
  echo "expect=pass backend=cuda-sdpa op=sdpa docs=4096,4000 pad=0,96 tail=128 hq=8 hkv=2 dim=128 seed=7 rows=8"
  echo "expect=fail backend=cuda-sdpa:bug=tail-read op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright"
  echo "expect=fail backend=cuda-sdpa:bug=derived-offsets op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"
}

run_plan() {  # name, repeat
  local name=$1 rep=${2:-0}
  ao_stamp "plan $name"
  "plan_$name" >"$out/plan_$name.txt"
  timeout "${3:-300}" "$CAMP" --plan "$out/plan_$name.txt" --json "$dest/$name.json" --repeat "$rep" >"$out/$name.log" 2>&1
  echo "plan $name exit $?" | tee -a "$out/$name.log"
  tail -3 "$out/$name.log"
}

if [[ $mode == quick ]]; then
  run_plan quick 2
  ao_stamp "memcheck on the sdpa/indexer tests (quick look)"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/ao_gpu_tests" --gtest_filter='CudaIndexer.*:CudaSdpa.*' \
    >"$out/memcheck_tests.txt" 2>&1; echo "memcheck exit $?" | tee -a "$out/memcheck_tests.txt"
  tail -4 "$out/memcheck_tests.txt"
  ao_stamp done; exit 0
fi

# ---- full --------------------------------------------------------------------------------------
ao_time_left 120 "plan seeds" && run_plan seeds 0 300
ao_time_left 60 "memcheck large layouts" && {
  ao_stamp "memcheck: large layouts"
  plan_sanitize >"$out/plan_sanitize.txt"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 "$CAMP" --plan "$out/plan_sanitize.txt" \
    --json "$dest/sanitize.json" >"$out/memcheck_layouts.txt" 2>&1
  echo "memcheck layouts exit $?" | tee -a "$out/memcheck_layouts.txt"; tail -4 "$out/memcheck_layouts.txt"; }
if [[ -d corpus ]]; then
  for b in cuda-indexer cuda-sdpa cuda-indexer:bug=topleft-cp cuda-indexer:mask=bottomright cuda-sdpa:bug=derived-offsets cuda-sdpa:bug=tail-read; do
    ao_time_left 30 "gate $b" || continue
    ao_stamp "gate corpus/ --backend $b"
    timeout 120 "$AO" gate corpus/ --backend "$b" >"$out/gate_${b//[:=]/_}.txt" 2>&1
    echo "exit $?" >>"$out/gate_${b//[:=]/_}.txt"; tail -2 "$out/gate_${b//[:=]/_}.txt"
  done
fi
ao_time_left 60 "timing" && run_plan timing 5 120
ao_time_left 60 "memcheck ao_gpu_tests" && {
  ao_stamp "memcheck: ao_gpu_tests"
  timeout $(( AO_BUDGET_S - (SECONDS - ao_t0) )) compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/ao_gpu_tests" \
    >"$out/memcheck_tests.txt" 2>&1
  echo "memcheck ao_gpu_tests exit $?" | tee -a "$out/memcheck_tests.txt"; tail -3 "$out/memcheck_tests.txt"; }
ao_stamp done
