#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent, quiet on success.
# Usage: scripts/install-deps.sh [--with-chromium]
set -euo pipefail
pkgs=(cmake g++ make libeigen3-dev libfmt-dev libcli11-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev libopenblas-dev
      python3 python3-numpy git)
[[ "${1:-}" == "--with-chromium" ]] && pkgs+=(chromium)
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
