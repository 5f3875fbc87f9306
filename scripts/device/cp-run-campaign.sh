#!/usr/bin/env bash
# cp-run on the lent H200. One GPU: the single-process path, all 32 CP ranks folded onto it,
# K/V exchanged through a real (1-rank) NCCL communicator; plus the fault path (--gpus 2 on a 1-GPU
# machine: rank 1 cannot get a GPU and the run must fail naming it, not hang).
# Binaries: the folder of scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin), made by
# scripts/device/gpu-pack.sh from a build with NCCL and without cuDNN, carried to the device.
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=$ao_bin
dest=${OUT:-cp-run-out}
mkdir -p "$dest"
# NCCL is not carried (218 MB): use the device's own (CUDA install or PyTorch's wheel).
nccl_dir=$(dirname "$(ls /usr/local/cuda/lib*/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 \
  /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=$bin/lib${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
log="$dest/cp-run.log"
{
  ao_versions
  echo "gpus visible: $(nvidia-smi -L | wc -l)"
  echo "nccl: $nccl_dir"; ldd "$bin/attn-oracle" | grep -E "nccl|cudart|not found"
} >"$log" 2>&1
run() {  # expect=<0|1> then cp-run arguments
  local expect=$1; shift
  echo; echo "### expect exit $expect: cp-run $*"
  local t0=$SECONDS
  timeout 560 "$bin/attn-oracle" cp-run "$@"
  local rc=$?
  echo "exit $rc (expected $expect) in $((SECONDS - t0)) s"
}
glm="heads=32 dim=128 topk=2048 dtype=bf16 crop=1"
{
  run 0 op=indexer docs=131072 cp=32 $glm rows=32 --backend cuda-indexer --gpus 1
  run 1 op=indexer docs=131072 cp=32 $glm rows=32 --backend cuda-indexer:bug=topleft-cp --gpus 1
  run 0 op=indexer docs=65536,65536 cp=32 $glm rows=32 --backend cuda-indexer --gpus 1
  run 1 op=indexer docs=65536,65536 cp=32 $glm rows=32 --backend cuda-indexer:bug=topleft-cp --gpus 1
  run 0 op=sdpa docs=32768,16384 cp=8 hq=8 hkv=2 dim=128 dtype=bf16 rows=64 --backend cuda-sdpa --gpus 1
  run 0 op=sdpa lens=1000,3000 padded_offsets=0,1024,4096 cp=4 hq=4 dim=64 dtype=bf16 --backend cuda-sdpa --gpus 1
  run 1 op=indexer docs=8192 cp=32 heads=8 dim=64 topk=256 --backend cuda-indexer --gpus 2 --timeout 60
} >>"$log" 2>&1
cat "$log"
