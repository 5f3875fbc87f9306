#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent, quiet on success.
# Usage: scripts/install-deps.sh [--with-chromium]
set -euo pipefail
pkgs=(cmake g++ make libeigen3-dev libfmt-dev libcli11-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev libopenblas-dev
      python3 python3-numpy git)
# The Python package (pip install .: scikit-build-core and nanobind come from PyPI through pip): the
# interpreter's headers and venv (scripts/tools/py-test.sh installs into a virtual environment).
pkgs+=(python3-dev python3-venv)
# clang with libFuzzer (libclang-rt-14-dev, also FuzzedDataProvider.h) and clang's OpenMP, for the
# libFuzzer targets (fuzz/run-libfuzzer.sh) and the g++ replay of fuzz_differential.
pkgs+=(clang-14 libclang-rt-14-dev libomp-14-dev)
# Headless Chromium for the report.html render test (report/tests/test_html.cpp), with a fixed
# font so screenshots look the same everywhere; without it that test skips with the reason.
[[ "${1:-}" == "--with-chromium" ]] && pkgs+=(chromium fonts-dejavu-core)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_=""; [[ $(id -u) -ne 0 ]] && sudo_="sudo"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  if ! { $sudo_ apt-get update -qq && $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2; echo "install-deps: failed installing: ${missing[*]}" >&2; exit 1
  fi
  rm -f "$log"
fi

# cuDNN frontend C++ headers (header-only; Debian has no package): the pinned PyPI wheel's include/
# extracted into .deps/cudnn-frontend/include (ignored by git; CMake looks there). Needs pip, not
# cuDNN itself: the backend that uses them is built only where CUDA + cuDNN are found.
cudnn_fe_version=1.32.0
cudnn_fe_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps/cudnn-frontend"
if ! grep -qs "^${cudnn_fe_version}\$" "$cudnn_fe_dir/VERSION"; then
  python3 -m pip --version >/dev/null 2>&1 || {
    sudo_=""; [[ $(id -u) -ne 0 ]] && sudo_="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  }
  tmp=$(mktemp -d)
  log="$tmp/log"
  # Any binary wheel carries the same headers; ask for one fixed platform so the download is deterministic.
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$tmp" \
        "nvidia-cudnn-frontend==${cudnn_fe_version}" >"$log" 2>&1; then
    cat "$log" >&2; echo "install-deps: failed downloading nvidia-cudnn-frontend==${cudnn_fe_version}" >&2; exit 1
  fi
  rm -rf "$cudnn_fe_dir"
  mkdir -p "$cudnn_fe_dir"
  python3 - "$tmp"/nvidia_cudnn_frontend-*.whl "$cudnn_fe_dir" <<'PY'
import sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("include/")])
PY
  test -f "$cudnn_fe_dir/include/cudnn_frontend.h" || { echo "install-deps: no cudnn_frontend.h in the wheel" >&2; exit 1; }
  echo "$cudnn_fe_version" >"$cudnn_fe_dir/VERSION"
  rm -rf "$tmp"
fi

# The references' BLAS: PyPI's scipy-openblas32 (a current OpenBLAS, DYNAMIC_ARCH with feature-based CPU
# detection, symbols prefixed scipy_ so it never clashes with another BLAS in the process), its lib/ and
# include/ extracted into .deps/scipy-openblas (CMake looks there first). Debian 12's OpenBLAS 0.3.21 stays
# the fallback: on a VM that hides the CPU model it picks a kernel set ~6x slower than the one the CPU runs
# (bench/results/ has the measurements).
openblas_version=0.3.34.481.3
openblas_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps/scipy-openblas"
if ! grep -qs "^${openblas_version}\$" "$openblas_dir/VERSION"; then
  python3 -m pip --version >/dev/null 2>&1 || {
    sudo_=""; [[ $(id -u) -ne 0 ]] && sudo_="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  }
  tmp=$(mktemp -d)
  log="$tmp/log"
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$tmp" \
        "scipy-openblas32==${openblas_version}" >"$log" 2>&1; then
    cat "$log" >&2; echo "install-deps: failed downloading scipy-openblas32==${openblas_version}" >&2; exit 1
  fi
  rm -rf "$openblas_dir"
  mkdir -p "$openblas_dir"
  python3 - "$tmp"/scipy_openblas32-*.whl "$openblas_dir" <<'PY'
import os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        for part in ("lib/", "include/"):
            if n.startswith("scipy_openblas32/" + part) and not n.endswith("/"):
                out = os.path.join(dest, n[len("scipy_openblas32/"):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with z.open(n) as src, open(out, "wb") as f:
                    f.write(src.read())
PY
  test -f "$openblas_dir/lib/libscipy_openblas.so" && test -f "$openblas_dir/include/cblas.h" ||
    { echo "install-deps: no libscipy_openblas.so/cblas.h in the wheel" >&2; exit 1; }
  echo "$openblas_version" >"$openblas_dir/VERSION"
  rm -rf "$tmp"
fi
