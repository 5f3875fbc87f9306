#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined; the core gets
# coverage instrumentation through -fsanitize=fuzzer-no-link) into build-libfuzzer/ and runs each
# target for a bounded time on a copy of its committed corpus (fuzz/corpus/<target>/).
# Exit 0 when every target ran clean, 77 on a finding (crash, leak, timeout, property violation).
# Without clang++ or libFuzzer it prints SKIPPED with the reason and exits 0 (the replay tests in
# CTest still run the committed corpus under g++).
# The targets run side by side (one core each), from a fixed seed so that a run explores the same
# inputs wherever it runs (the committed corpus first, then the mutations of that seed).
# Env: AO_LIBFUZZER_SECONDS (default 45 per target), AO_LIBFUZZER_SEED (default 1; 0 = libFuzzer's own
# random seed), AO_LIBFUZZER_BUILD (default build-libfuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${AO_LIBFUZZER_SECONDS:-45}
seed=${AO_LIBFUZZER_SEED:-1}
bdir=${AO_LIBFUZZER_BUILD:-build-libfuzzer}
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$cxx" ]]; then echo "libfuzzer: SKIPPED (no clang++ on this machine)"; exit 0; fi
if ! ls "$("$cxx" -print-resource-dir)"/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "libfuzzer: SKIPPED (clang's libFuzzer runtime is missing: install libclang-rt-14-dev)"; exit 0
fi
log=$(mktemp)
if ! { cmake -S . -B "$bdir" -DCMAKE_CXX_COMPILER="$cxx" -DAO_LIBFUZZER=ON -DAO_WITH_CUDA=OFF -DAO_BUILD_TESTS=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
         -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fsanitize=fuzzer-no-link -fno-omit-frame-pointer" &&
       cmake --build "$bdir" -j"$(nproc)" --target fuzz_case_line fuzz_differential; } >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "libfuzzer: build failed" >&2; exit 1
fi
rm -f "$log"
# One target: runs it, prints its final counts or the tail of its log; exit 0 clean, 77 on a finding.
fuzz_one() {
  local t=$1 work="$bdir/corpus-$1"
  mkdir -p "$work"
  # New inputs go to the work dir (first); the committed corpus is only read.
  if OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 "$bdir/fuzz/$t" -max_total_time="$secs" -seed="$seed" -timeout=20 \
       -rss_limit_mb=4096 -error_exitcode=77 -timeout_exitcode=77 -print_final_stats=1 -artifact_prefix="$bdir/$t-" \
       "$work" "fuzz/corpus/$t" >"$bdir/$t.log" 2>&1; then
    echo "libfuzzer: $t for ${secs}s (seed $seed): $(grep -E "^stat::number_of_executed_units" "$bdir/$t.log" | tr -s ' ')"
  else
    local code=$?
    tail -40 "$bdir/$t.log"
    echo "libfuzzer: $t FAILED (exit $code); artifacts: $bdir/$t-*" >&2
    return 77
  fi
}
pids=()
for t in fuzz_case_line fuzz_differential; do
  fuzz_one "$t" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=77; done
exit $rc
