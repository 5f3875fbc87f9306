#!/usr/bin/env bash
# Configures and builds into build/ (quiet unless something fails).
# Usage: scripts/tools/build.sh [TARGET...] [-- CMAKE_ARG...]
#   no target: everything (what the tests need); `scripts/tools/build.sh attn-oracle`: only the CLI.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=()
while (($#)) && [[ "$1" != -- ]]; do targets+=(--target "$1"); shift; done
[[ "${1:-}" == -- ]] && shift
log=$(mktemp)
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CI:+-DAO_WERROR=ON} "$@" &&
       cmake --build build -j"$(nproc)" "${targets[@]}"; } >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "build failed" >&2; exit 1
fi
rm -f "$log"
