#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test through CTest, the Python
# package's tests (pip install ., pytest) and the libFuzzer targets.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh --with-chromium  # chromium: the report.html render test opens the page headless
scripts/tools/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
cd ..
# The Python package: `pip install .` into build-py/venv, then pytest python/tests examples/.
scripts/tools/py-test.sh
# libFuzzer targets: a clang build in build-libfuzzer/ and a bounded run of each (60 s; see the script).
fuzz/run-libfuzzer.sh
