#!/usr/bin/env bash
# The Python package's part of the test command: `pip install .` (the attn_oracle extension, built from
# the same C++ core by scikit-build-core + nanobind, fetched from PyPI by pip) into a virtual environment
# that sees Debian's numpy, then `pytest python/tests examples/` (the GPU example skips, with its reason, without one).
# Usage: scripts/tools/py-test.sh [PYTEST_ARGS...]     Env: AO_PY_VENV (default build-py/venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${AO_PY_VENV:-build-py/venv}
[[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv --system-site-packages "$venv"
log=$(mktemp)
# The extras: test (pytest, pytest-xdist) and ray (the Ray campaigns' test: about 80 MB to fetch, 270 MB
# installed, a minute to install on the CI machine; its tests take seconds).
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check ".[test,ray]" >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; echo "py-test: pip install . failed" >&2; exit 1
fi
rm -f "$log"
exec "$venv/bin/python" -m pytest -p no:cacheprovider -rs "$@" python/tests examples/
