#!/usr/bin/env bash
# Two CPU builds of attn-oracle side by side on the device host's CPU cores (the GPU is not used): a
# refactor or generator change is judged against the commit before it in the same run, on the same
# machine. Four measurements:
#   1. the reference benchmark (ao_bench: the indexer and SDPA references and OpenBLAS sgemm/dgemm,
#      interleaved repetitions), run by each build in turn, REPS times, with the ratio to sgemm taken
#      within each build's own run;
#   2. scripts/tools/fuzz-detection.sh over every cpu-bug model (SEEDS seeds, BUDGET each, one
#      single-threaded campaign per core) by each build: cases and seconds to the first failure;
#   3. `gate corpus` for cpu-ref and every cpu-bug model by each build: the verdict lines must be identical;
#   4. full checks (repro --backend cpu-ref, bench/sdpa-checks.case) by each build in turn,
#      REPS times at each of CHECK_THREADS: wall, the time line's stages, peak RSS, the verdict lines
#      (scripts/device/checks-table.py).
# Usage: scripts/device/before-after.sh OUT BEFORE_DIR AFTER_DIR
#   (each DIR: attn-oracle and ao_bench, the shared libraries they need in DIR/lib or in the binary folder's
#    lib/ (AO_BIN_DIR of lib.sh: pack one build there with ao_pack, then copy both builds' binaries into
#    DIR/before and DIR/after, so that the libraries travel once); carried;
#    env: SEEDS=10 BUDGET=60s JOBS=nproc REPS=3 BENCH_THREADS=nproc CORPUS=corpus, STEPS="detect gate bench",
#    CHECK_THREADS="2 nproc" for STEPS="checks")
# Writes OUT/env.txt, OUT/bench.md, OUT/detection-before.md, OUT/detection-after.md, OUT/gate-diff.txt, OUT/checks.md
# and the raw results (OUT/bench-before.json, OUT/bench-after.json, OUT/checks.tgz).
set -uo pipefail
out=${1:?OUT} before=${2:?BEFORE_DIR} after=${3:?AFTER_DIR}
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mkdir -p "$out"
[[ "$before" == /* ]] || before="$ao_root/$before"
[[ "$after" == /* ]] || after="$ao_root/$after"
steps=${STEPS:-detect gate bench}
ao_use_bin  # a lib/ shared by both builds in the binary folder of lib.sh
for d in "$before" "$after"; do
  [[ -d "$d/lib" ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d/lib
  ao_runnable "$d/attn-oracle" || { echo "no runnable $d/attn-oracle" | tee "$out/env.txt"; exit 1; }
done
{
  ao_versions
  echo "before: $before ($(sha256sum "$before/attn-oracle" | cut -c1-16))"
  echo "after: $after ($(sha256sum "$after/attn-oracle" | cut -c1-16))"
  echo "steps: $steps seeds: ${SEEDS:-10} budget: ${BUDGET:-60s} jobs: ${JOBS:-$(nproc)} reps: ${REPS:-3}"
} > "$out/env.txt"
stamp() { ao_stamp "$@" | tee -a "$out/env.txt"; }

if [[ " $steps " == *" detect "* ]]; then
  for side in before after; do
    d=$before; [[ $side == after ]] && d=$after
    stamp "fuzz-detection $side"
    bash scripts/tools/fuzz-detection.sh --ao "$d/attn-oracle" --seeds "${SEEDS:-10}" --budget "${BUDGET:-60s}" \
      --dims small --jobs "${JOBS:-$(nproc)}" > "$out/detection-$side.md" 2>> "$out/env.txt"
  done
fi
if [[ " $steps " == *" gate "* ]]; then
  # gate corpus/ by both builds for cpu-ref and every cpu-bug model, one single-threaded gate per core:
  # the verdict lines (time column dropped) must be identical.
  gate_one() {  # build-dir side backend
    OMP_NUM_THREADS=1 "$1/attn-oracle" gate "${CORPUS:-corpus}" --backend "$3" --no-explain 2>&1 |
      sed -E 's/\]  [0-9.]+s  /]  /' > "$gate_dir/$2.${3//[:\/]/_}.txt"
  }
  export -f gate_one
  export gate_dir="$out/gate-tmp" CORPUS
  mkdir -p "$gate_dir"
  mapfile -t backends < <("$before/attn-oracle" backends | awk '$1 == "cpu-ref" || $1 ~ /^cpu-bug:/ {print $1}')
  stamp "gate (${#backends[@]} backends, both builds)"
  printf '%s\n' "${backends[@]}" |
    while read -r b; do printf '%s before %s\n%s after %s\n' "$before" "$b" "$after" "$b"; done |
    xargs -P "${JOBS:-$(nproc)}" -L 1 bash -c 'gate_one "$@"' _
  {
    n=0; differ=0
    for f in "$gate_dir"/before.*.txt; do
      g=$gate_dir/after.${f#"$gate_dir"/before.}
      n=$((n + 1))
      if ! cmp -s "$f" "$g"; then differ=$((differ + 1)); echo "DIFFERS: ${f#"$gate_dir"/before.}"; diff "$f" "$g" | head -20; fi
    done
    echo "gate corpus: $n backends, $differ with different verdict lines; $(cat "$gate_dir"/before.*.txt | grep -cE '^(PASS|FAIL|SKIP|ERROR) ') verdict lines per build"
  } > "$out/gate-diff.txt"
  rm -rf "$gate_dir"
  cat "$out/gate-diff.txt"
fi

if [[ " $steps " == *" bench "* ]]; then
  # One repetition per call, builds alternating, so that drift of the machine hits both alike.
  for r in $(seq 1 "${REPS:-3}"); do
    for side in before after; do
      d=$before; [[ $side == after ]] && d=$after
      stamp "bench $side rep $r"
      OMP_NUM_THREADS=${BENCH_THREADS:-$(nproc)} "$d/ao_bench" --reps=1 --benchmark_format=json \
        --benchmark_out="$out/bench-$side-$r.json" --benchmark_out_format=json > /dev/null 2>> "$out/env.txt"
    done
  done
  python3 - "$out" "${REPS:-3}" > "$out/bench.md" <<'EOF'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for side in ("before", "after"):
    merged = []
    for r in range(1, reps + 1):
        try:
            bs = json.load(open(f"{out}/bench-{side}-{r}.json"))["benchmarks"]
        except (OSError, ValueError, KeyError):
            continue
        merged += [dict(b, name=b["name"] + f"/run:{r}") for b in bs]
        by = {b["name"].split("/")[0]: b for b in bs if b.get("run_type", "iteration") == "iteration"}
        base = by.get("sgemm_2048")
        for name, b in by.items():
            g = b.get("GFLOP", 0.0)
            rows.setdefault(name, {}).setdefault(side, []).append((g, g / base["GFLOP"] if base else float("nan")))
    json.dump({"benchmarks": merged}, open(f"{out}/bench-{side}.json", "w"), indent=1)
print("| benchmark | before GFLOP/s | after GFLOP/s | before / sgemm | after / sgemm | after / before |")
print("| --- | --- | --- | --- | --- | --- |")
med = statistics.median
for name, s in rows.items():
    if "before" not in s or "after" not in s:
        continue
    bg, ag = med(x[0] for x in s["before"]), med(x[0] for x in s["after"])
    br, ar = med(x[1] for x in s["before"]), med(x[1] for x in s["after"])
    print(f"| {name} | {bg:.1f} | {ag:.1f} | {br:.3f} | {ar:.3f} | {ag / bg:.3f} |")
print(f"\nmedians over {reps} alternating runs of each build (ao_bench --reps=1); ratios to sgemm within each run.")
EOF
  rm -f "$out"/bench-before-[0-9]*.json "$out"/bench-after-[0-9]*.json
  cat "$out/bench.md"
fi

if [[ " $steps " == *" checks "* ]]; then
  mapfile -t checks < <(grep -v -e '^#' -e '^$' "$ao_root/bench/sdpa-checks.case")
  mkdir -p "$out/checks"
  for t in ${CHECK_THREADS:-2 $(nproc)}; do
    for r in $(seq 1 "${REPS:-3}"); do
      for i in "${!checks[@]}"; do
        for side in before after; do
          d=$before; [[ $side == after ]] && d=$after
          stamp "check $side t$t rep $r: ${checks[$i]}"
          f=$out/checks/$side.t$t.c$i.r$r
          echo "${checks[$i]}" > "$f.case"
          # shellcheck disable=SC2086  # the case line is key=value words
          OMP_NUM_THREADS=$t /usr/bin/time -v "$d/attn-oracle" repro ${checks[$i]} --backend cpu-ref > "$f.txt" 2> "$f.time"
        done
      done
    done
  done
  python3 scripts/device/checks-table.py "$out/checks" > "$out/checks.md"
  ( cd "$out" && tar -czf checks.tgz checks && rm -rf checks )
  cat "$out/checks.md"
fi

stamp "done"
