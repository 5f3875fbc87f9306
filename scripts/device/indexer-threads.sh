#!/usr/bin/env bash
# The indexer reference's 512-row case against the linked and the machine's best sgemm at a few thread
# counts, on the device host's CPU (the GPU is not used): ao_bench's sgemm_2048 and indexer_fp32 only, and
# scripts/tools/bench/sgemm_probe.py, each thread count in one run. A short call where a full
# scripts/device/cpu-bench.sh does not fit the device time left.
# Usage: scripts/device/indexer-threads.sh OUT   (env: THREADS="16 8", REPS=2; binaries as cpu-bench.sh)
set -uo pipefail
out=${1:?OUT}
export AO_BIN_DIR=${AO_BIN_DIR:-.deps/cpu-bench-bin}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ -f .deps/cpu-bench.tar.xz ]]; then rm -rf "$ao_bin"; mkdir -p "$ao_bin"; tar -C "$ao_bin" -xJf .deps/cpu-bench.tar.xz; fi
ao_use_bin
py=${PY:-}
[[ -z "$py" ]] && for p in /opt/torch/.venv/bin/python python3; do "$p" -c "import numpy" 2>/dev/null && { py=$p; break; }; done
mkdir -p "$out"
{ PY=$py ao_versions; echo "OPENBLAS_ variables here: $(env | grep ^OPENBLAS_ | tr "\n" " ")(unset below)"; } > "$out/env.txt" 2>&1
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE  # as scripts/tools/bench.sh: every candidate its own detection
for t in ${THREADS:-16 8}; do
  OMP_NUM_THREADS=$t "$py" scripts/tools/bench/sgemm_probe.py --threads "$t" --reps "${REPS:-2}" > "$out/sgemm_t$t.json" 2> "$out/sgemm_t$t.err"
  OMP_NUM_THREADS=$t "$ao_bin/ao_bench" --reps="${REPS:-2}" --benchmark_filter='sgemm_2048|indexer_fp32' \
    --benchmark_format=json --benchmark_out="$out/gbench_t$t.json" --benchmark_out_format=json > /dev/null 2> "$out/gbench_t$t.err"
  echo "threads $t: done" | tee -a "$out/env.txt"
done
