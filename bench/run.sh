#!/usr/bin/env bash
# Benchmarks the CPU oracle against baselines measured in the same run and prints one table
# (case, ours, baseline, ratio) with the machine's core count. Nothing here runs in CI.
#   bench/run.sh            full run (131k-token CP rank: several minutes on 2 cores)
#   bench/run.sh --quick    32k-token document for the side-by-side and the full check
# Env: BUILD (build dir, default build-bench), AO_BIN (a folder holding a prebuilt attn-oracle and ao_bench,
#      as a device pack carries them: no build), OMP_NUM_THREADS (threads for everything measured; default
#      one per physical core), REPS (interleaved repetitions, default 3), KEEP (keep
#      the raw results in this folder; re-print with bench/table.py),
#      PYTHON_NUMPY (python with numpy; default: the first of python3, /usr/bin/python3 that has it),
#      PYTHON_TORCH (python with torch, default .venv/bin/python when present).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [[ "${1:-}" == "--quick" ]] && quick=1
build=${BUILD:-build-bench}
reps=${REPS:-3}
if [[ -n "${KEEP:-}" ]]; then out=$KEEP; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

log=$out/build.log
if [[ -n "${AO_BIN:-}" ]]; then
  ao=$AO_BIN/attn-oracle; aobench=$AO_BIN/ao_bench
elif ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAO_WITH_CUDA=OFF -DAO_BUILD_TESTS=OFF &&
       cmake --build "$build" -j"$(nproc)" --target attn-oracle ao_bench; } >"$log" 2>&1; then
  cat "$log"; echo "bench: build failed" >&2; exit 1
else
  ao=$build/attn-oracle; aobench=$build/bench/ao_bench
fi
py_numpy=${PYTHON_NUMPY:-}
if [[ -z "$py_numpy" ]]; then  # the first python that has numpy (Debian's python3-numpy is /usr/bin/python3's)
  for p in python3 /usr/bin/python3; do "$p" -c "import numpy" 2>/dev/null && { py_numpy=$p; break; }; done
fi
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines for old OpenBLAS builds) would hold the linked
# OpenBLAS to the kernels they name while the baselines below each detect their own: unset for every command
# of this benchmark alike (not beyond it), and said under the table.
blas_env=$(env | grep -E '^OPENBLAS_(CORETYPE|L2_SIZE)=' | tr '\n' ' ' || true)
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
threads=${OMP_NUM_THREADS:-$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)}
((threads > 0)) || threads=$(nproc)
export OMP_NUM_THREADS=$threads  # the references, numpy's and torch's BLAS alike

# The machine's best sgemm (numpy's own BLAS, the linked one, the other candidates found), round-robin over
# $reps rounds, and the cores' fp32 peak from the flags and the clock.
echo "bench: best sgemm on this machine ($threads threads) ..." >&2
"${py_numpy:-python3}" bench/sgemm_probe.py --threads "$threads" --reps "$reps" >"$out/sgemm.json" 2>"$out/sgemm.err" ||
  echo '{"impl": "probe", "error": "failed"}' >>"$out/sgemm.json"

echo "bench: Google Benchmark (GEMM baselines interleaved with the reference cases, $reps reps) ..." >&2
"$aobench" --reps="$reps" --benchmark_format=json --benchmark_out="$out/gbench.json" \
  --benchmark_out_format=json >/dev/null

# Full check of one CP rank (repro --backend cpu-ref: inputs, the reference as backend, the reference,
# the comparator) under /usr/bin/time -v: wall, user+sys, peak RSS. RSS also at smaller documents.
docs=(8192 32768 131072); side=131072
((quick)) && { docs=(8192 32768); side=32768; }
for d in "${docs[@]}"; do
  echo "bench: full check, doc=$d ..." >&2
  /usr/bin/time -v "$ao" repro op=indexer docs=$d cp=32 rank=31 heads=32 dim=128 topk=2048 seed=7 \
    --backend cpu-ref >"$out/check_$d.txt" 2>"$out/check_$d.time" || true
done

# SDPA checks (repro --backend cpu-ref, /usr/bin/time -v): bench/sdpa-checks.case, $reps runs each
# (the table shows the median run by check time); the time line splits the check into its stages.
mapfile -t sdpa_checks < <(grep -v -e '^#' -e '^$' bench/sdpa-checks.case)
((quick)) && sdpa_checks=("op=sdpa docs=8192 hq=32 hkv=8 dim=128 rows=256" "op=sdpa docs=2048 hq=8 hkv=2 dim=128 pass=bwd")
for i in "${!sdpa_checks[@]}"; do
  echo "bench: SDPA check ${sdpa_checks[$i]} ..." >&2
  echo "${sdpa_checks[$i]}" >"$out/sdpa_check_$i.case"
  for ((k = 1; k <= reps; k++)); do
    # shellcheck disable=SC2086  # the case line is key=value words
    /usr/bin/time -v "$ao" repro ${sdpa_checks[$i]} --backend cpu-ref >"$out/sdpa_check_$i.r$k.txt" \
      2>"$out/sdpa_check_$i.r$k.time" || true
  done
done

# What a user would otherwise write, same case shape, same run. numpy: its own OpenBLAS.
echo "bench: numpy baseline, doc=$side ..." >&2
"${py_numpy:-python3}" bench/indexer_baseline.py --impl numpy --doc $side \
  >"$out/numpy.json" 2>"$out/numpy.err" || echo '{"impl": "numpy", "error": "failed"}' >"$out/numpy.json"
py_torch=${PYTHON_TORCH:-}
[[ -z "$py_torch" && -x .venv/bin/python ]] && py_torch=.venv/bin/python
if [[ -n "$py_torch" ]] && "$py_torch" -c "import torch" >"$out/torch.err" 2>&1; then
  echo "bench: torch baseline, doc=$side ..." >&2
  "$py_torch" bench/indexer_baseline.py --impl torch --doc $side >"$out/torch.json" 2>>"$out/torch.err" ||
    echo '{"impl": "torch", "error": "failed"}' >"$out/torch.json"
else
  reason=$(tail -1 "$out/torch.err" 2>/dev/null || true)
  python3 -c 'import json,sys; print(json.dumps({"impl": "torch", "error": sys.argv[1]}))' \
    "torch not importable${py_torch:+ by $py_torch}: ${reason:-no python with torch (set PYTHON_TORCH)}" >"$out/torch.json"
fi

python3 bench/table.py "$out" "$side" "${docs[@]}"
[[ -n "$blas_env" ]] && echo "environment: ${blas_env}unset for every command of this benchmark"
true
