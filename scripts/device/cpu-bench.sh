#!/usr/bin/env bash
# bench/run.sh on the device host's CPU (the GPU is not used): the same table at each thread count
# (default 2, the project's machine, then every core), each from one run. Writes OUT/env.txt (versions, CPU
# model and flags, BLAS), OUT/table_t<T>.md and the raw results of each, OUT/t<T>/ and t<T>.err, in OUT/raw.tgz.
# Usage: scripts/device/cpu-bench.sh OUT [--quick]   (env: THREADS="2 16", REPS=2, LIMIT_S per table=600,
#   PLACEMENT: thread counts for the placement probe below, default none)
# Binaries: scripts/device/cpu-bench-pack.sh's .deps/cpu-bench.tar.xz, carried and unpacked here into the
# binary folder of scripts/device/lib.sh; python with numpy and torch: PY (default the image's torch venv).
set -uo pipefail
out=${1:?OUT}
mode=${2:-}
# Its own binary folder, so that packing or unpacking it leaves the GPU campaigns' .deps/device-bin alone.
export AO_BIN_DIR=${AO_BIN_DIR:-.deps/cpu-bench-bin}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ -f .deps/cpu-bench.tar.xz ]]; then rm -rf "$ao_bin"; mkdir -p "$ao_bin"; tar -C "$ao_bin" -xJf .deps/cpu-bench.tar.xz; fi
ao_use_bin
py=${PY:-}
[[ -z "$py" ]] && for p in /opt/torch/.venv/bin/python python3; do "$p" -c "import numpy" 2>/dev/null && { py=$p; break; }; done
mkdir -p "$out"
{
  PY=$py ao_versions
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|MHz|L2|L3"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 | tr ' ' '\n' | grep -E '^(avx|fma|amx)' | tr '\n' ' ')"
  echo "linked BLAS: $(ldd "$ao_bin/attn-oracle" | grep -i blas)"
  echo "OPENBLAS_ variables here: $(env | grep ^OPENBLAS_ | tr "\n" " ")(bench/run.sh unsets them)"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
for t in ${THREADS:-2 $(nproc)}; do
  t0=$(date +%s)
  OMP_NUM_THREADS=$t AO_BIN=$ao_bin PYTHON_NUMPY=$py PYTHON_TORCH=$py REPS=${REPS:-2} KEEP=$out/t$t \
    timeout "${LIMIT_S:-600}" bash bench/run.sh $mode > "$out/table_t$t.md" 2> "$out/t$t.err"
  echo "threads $t: rc $?, wall $(( $(date +%s) - t0 )) s" | tee -a "$out/env.txt"
  cat "$out/table_t$t.md"
done
# PLACEMENT="8 16": ao_bench's sgemm and 512-row indexer at those thread counts with the OpenMP threads left to
# the scheduler and bound one per core (OMP_PROC_BIND=close OMP_PLACES=cores): does placement explain a loss?
for t in ${PLACEMENT:-}; do
  for bind in free close; do
    if [[ $bind == close ]]; then b=(OMP_PROC_BIND=close OMP_PLACES=cores); else b=(); fi
    echo "threads $t, OpenMP threads $bind:" >> "$out/placement.txt"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$t" "${b[@]}" "$ao_bin/ao_bench" --reps=2 \
      --benchmark_filter='^(sgemm_2048|indexer_fp32)/' 2>&1 | grep -E "^(sgemm|indexer)" >> "$out/placement.txt"
  done
done
[[ -f "$out/placement.txt" ]] && cat "$out/placement.txt"
# What comes back from a device call is limited in file count and depth: the raw results go back as one
# archive beside the tables (an 8-thread table was lost to that limit once). A run folder under bench/results/
# keeps the tables and env.txt, not the archive: git history is where raw files are kept.
( cd "$out" && tar -czf raw.tgz t[0-9]* && rm -rf t[0-9]* )
