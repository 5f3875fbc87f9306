#!/usr/bin/env bash
# Configures and builds into build/ (quiet unless something fails).
# Usage: scripts/tools/build.sh [TARGET...] [-DCMAKE_OPTION...]
#   no target: everything (what the tests need); `scripts/tools/build.sh attn-oracle`: only the CLI.
#   Arguments starting with '-' go to the cmake configure step.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=() cmake_args=()
for a in "$@"; do
  if [[ "$a" == -* ]]; then cmake_args+=("$a"); else targets+=(--target "$a"); fi
done
log=$(mktemp)
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CI:+-DAO_WERROR=ON} "${cmake_args[@]}" &&
       cmake --build build -j"$(nproc)" "${targets[@]}"; } >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "build failed" >&2; exit 1
fi
rm -f "$log"
