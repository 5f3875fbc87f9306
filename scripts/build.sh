#!/usr/bin/env bash
# Configures and builds into build/ (quiet unless something fails). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CI:+-DAO_WERROR=ON} "$@" &&
       cmake --build build -j"$(nproc)"; } >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "build failed" >&2; exit 1
fi
rm -f "$log"
