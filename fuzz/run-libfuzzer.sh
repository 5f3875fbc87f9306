#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined; the core gets
# coverage instrumentation through -fsanitize=fuzzer-no-link) into build-libfuzzer/ and runs each
# target for a bounded time on a copy of its committed corpus (fuzz/corpus/<target>/).
# Exit 0 when every target ran clean, 77 on a finding (crash, leak, timeout, property violation).
# Without clang++ or libFuzzer it prints SKIPPED with the reason and exits 0 (the replay tests in
# CTest still run the committed corpus under g++).
# Env: AO_LIBFUZZER_SECONDS (default 60 per target), AO_LIBFUZZER_BUILD (default build-libfuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${AO_LIBFUZZER_SECONDS:-60}
bdir=${AO_LIBFUZZER_BUILD:-build-libfuzzer}
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$cxx" ]]; then echo "libfuzzer: SKIPPED (no clang++ on this machine)"; exit 0; fi
if ! ls "$("$cxx" -print-resource-dir)"/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "libfuzzer: SKIPPED (clang's libFuzzer runtime is missing: install libclang-rt-14-dev)"; exit 0
fi
log=$(mktemp)
if ! { cmake -S . -B "$bdir" -DCMAKE_CXX_COMPILER="$cxx" -DAO_LIBFUZZER=ON -DAO_WITH_CUDA=OFF -DAO_BUILD_TESTS=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fsanitize=fuzzer-no-link -fno-omit-frame-pointer" &&
       cmake --build "$bdir" -j"$(nproc)" --target fuzz_case_line fuzz_differential; } >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "libfuzzer: build failed" >&2; exit 1
fi
rm -f "$log"
rc=0
for t in fuzz_case_line fuzz_differential; do
  work="$bdir/corpus-$t"
  mkdir -p "$work"
  echo "libfuzzer: $t for ${secs}s"
  # New inputs go to the work dir (first); the committed corpus is only read.
  if OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 "$bdir/fuzz/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
       -error_exitcode=77 -timeout_exitcode=77 -print_final_stats=1 -artifact_prefix="$bdir/$t-" \
       "$work" "fuzz/corpus/$t" >"$bdir/$t.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$bdir/$t.log" | sed "s/^/  /" || true
  else
    code=$?
    tail -40 "$bdir/$t.log"
    echo "libfuzzer: $t FAILED (exit $code); artifacts: $bdir/$t-*" >&2
    rc=77
  fi
done
exit $rc
