#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh --with-chromium  # chromium: the report.html render test opens the page headless
scripts/tools/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
# libFuzzer targets: a clang build in build-libfuzzer/ and a bounded run of each (60 s; see the script).
cd .. && fuzz/run-libfuzzer.sh
