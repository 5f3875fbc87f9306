#!/usr/bin/env bash
# Regenerates the committed example reports: report.html of the seed's indexer case under the
# top-left-mask bug model and of TE's padded example under the derived-offsets bug model, plus a
# headless-Chromium screenshot of each. Usage: results/examples/render.sh [path/to/attn-oracle]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../../build/attn-oracle}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
render() {  # name window-height case... -- backend
  local name=$1 height=$2; shift 2
  "$bin" repro "$@" --report-dir "$tmp/$name" >/dev/null || true   # exit 1: the bug is caught
  cp "$tmp/$name/report.html" "$here/$name.html"
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
    --disable-dev-shm-usage --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size=1280,"$height" --screenshot="$here/$name.png" "file://$here/$name.html" >/dev/null 2>&1
}
render seed-indexer-topleft-cp 1720 op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7 \
  --backend cpu-bug:topleft-cp
render te-padded-derived-offsets 1160 op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 --backend cpu-bug:derived-offsets
ls -la "$here"/*.html "$here"/*.png
