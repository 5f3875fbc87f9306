#!/usr/bin/env bash
# The README's test command (what CI runs): installs dependencies, builds, runs CTest (every test but
# the `long` label), the Python package's tests (pip install ., pytest) and the libFuzzer targets, then
# holds each test and phase to its time budget (scripts/tools/test-budget.txt; docs/testing.md).
# Usage: scripts/tools/test.sh [--long]
#   --long: also the `long` CTest label (the whole sanitizer sweep), the hostile battery's full mode (pytest
#           --hostile-full) and 10-minute libFuzzer runs from fresh random seeds; no time budget is applied.
set -euo pipefail
cd "$(dirname "$0")/../.."
long=0
case "${1:-}" in
  "") ;;
  --long) long=1 ;;
  *) echo "usage: scripts/tools/test.sh [--long]" >&2; exit 2 ;;
esac
phases=$(mktemp)
trap 'rm -f "$phases"' EXIT
# phase NAME COMMAND...: runs COMMAND and records its wall time under NAME.
phase() {
  local name=$1 t0 rc=0
  shift
  t0=${EPOCHREALTIME/./}
  "$@" || rc=$?
  printf '%s\t%d.%d\n' "$name" $(((${EPOCHREALTIME/./} - t0) / 1000000)) $(((${EPOCHREALTIME/./} - t0) / 100000 % 10)) >>"$phases"
  return $rc
}
run_ctest() {
  local sel=(-LE long)
  ((long)) && sel=()
  (cd build && ctest --output-on-failure -j"$(nproc)" --timeout 900 "${sel[@]}" --output-junit ctest-junit.xml)
}
phase install scripts/install-deps.sh --with-chromium  # chromium: the report.html render test opens the page headless
phase build scripts/tools/build.sh
phase ctest run_ctest
# The Python package: `pip install .` into build-py/venv, then pytest python/tests examples/ (the hostile
# battery's quick mode among them; --long: its full mode).
py_args=()
((long)) && py_args=(--hostile-full)
phase python scripts/tools/py-test.sh "${py_args[@]}"
# libFuzzer targets: a clang build in build-libfuzzer/ and a bounded run of each (see the script).
((long)) && export AO_LIBFUZZER_SECONDS=${AO_LIBFUZZER_SECONDS:-600} AO_LIBFUZZER_SEED=${AO_LIBFUZZER_SEED:-0}
phase libfuzzer fuzz/run-libfuzzer.sh
cp "$phases" build/test-phases.tsv
if ((long)); then
  echo "test budget: not applied under --long"
else
  python3 scripts/tools/test-budget.py scripts/tools/test-budget.txt build/test-phases.tsv build/ctest-junit.xml
fi
