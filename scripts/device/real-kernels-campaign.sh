#!/usr/bin/env bash
# The seed table and a short fuzz through cuDNN frontend's DSA indexer (scripts/backends/cudnn_fe_indexer.py)
# on the H200, in two device calls made while the machine is warm (it stays ~30 s after a call). The
# wheels do not fit one call's 64 MiB carry, so scripts/device/real-kernels-pack.sh splits them:
#   CALL=1  carry .whl/dsl-cu13.tar.xz   unpacks nvidia-cutlass-dsl-libs-cu13 into $SITE (outside the repo)
#   CALL=2  carry .whl/rest.tar.xz and the CPU-only attn-oracle in $AO_BIN_DIR (with its libfmt/libgomp,
#           e.g. .ext-bin as in reports/gpu/external-*.md); without one it tries to build attn-oracle here.
#           Checks $SITE is still there, unzips the other wheels into it (not `pip install --target
#           --upgrade`: that would replace the nvidia_cutlass_dsl/ folder the cu13 wheel shares), records
#           versions, starts the warm host (ao_serve.py; AO_SITE_DIR=$SITE makes the adapter add the folder
#           with site.addsitedir) and runs the gates within $BUDGET_S seconds, skipping (and listing) what
#           does not fit; the rest of the budget goes to `attn-oracle fuzz`.
#   run:  CALL=1 bash scripts/device/real-kernels-campaign.sh
#         CALL=2 AO_BIN_DIR=.ext-bin bash scripts/device/real-kernels-campaign.sh
# $OUT (at most 8 files come back): versions.txt, seed-table.tsv, campaign.log, serve.log, timing.jsonl,
# fuzz.txt, reports.tar.xz (every gate's report.json/.md and the fuzz's shrunk cases).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ao-real-kernels-out}
SITE=${SITE:-/tmp/site}
PY=${PY:-python3}
CALL=${CALL:-}
BUDGET_S=${BUDGET_S:-480}       # whole CALL=2, setup included; the device's per-command limit is 600 s
EST_CASE_S=${EST_CASE_S:-8}     # per case through the warm host (CPU oracle included)
EST_COLD_S=${EST_COLD_S:-20}    # per case in a fresh process (JIT compile included; error re-runs)
EST_GATE_S=${EST_GATE_S:-30}    # JIT compiles when a gate starts a new shape bucket
mkdir -p "$OUT"
t_start=$SECONDS
left() { echo $((BUDGET_S - (SECONDS - t_start))); }
log() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - t_start))s] $*" | tee -a "$OUT/campaign.log"; }
marker="$SITE/.ao-real-kernels-call1"
untar_xz() {  # file, folder (Python's lzma where the image has no xz)
  if command -v xz > /dev/null; then xz -dc "$1" | tar -C "$2" -xf -
  else $PY -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$1" "$2"; fi
}

if [[ "$CALL" == 1 ]]; then
  tar=.whl/dsl-cu13.tar.xz
  [[ -f "$tar" ]] || { log "CALL=1: $tar was not carried"; exit 2; }
  rm -rf "$SITE" && mkdir -p "$SITE"
  untar_xz "$tar" "$SITE" || { log "CALL=1: unpacking $tar failed"; exit 1; }
  date -u +%FT%TZ > "$marker"
  log "REAL-KERNELS CALL=1 OK: $(find "$SITE" -type f | wc -l) files, $(du -sh "$SITE" | cut -f1) in $SITE; now CALL=2 while the machine is warm"
  exit 0
fi
[[ "$CALL" == 2 ]] || { echo "usage: CALL=1|2 $0 (see the header)" >&2; exit 2; }

# --- CALL=2: the other wheels, the binary, versions ------------------------------------------------------
if [[ ! -f "$marker" || ! -d "$SITE/nvidia_cutlass_dsl" ]]; then
  log "CALL=2: $SITE from CALL=1 is gone (the machine was given back in between): re-run CALL=1, then CALL=2"
  exit 3
fi
tar=.whl/rest.tar.xz
[[ -f "$tar" ]] || { log "CALL=2: $tar was not carried"; exit 2; }
work=$(mktemp -d)
mkdir "$work/wheels" "$work/reports"
untar_xz "$tar" "$work/wheels" || { log "CALL=2: unpacking $tar failed"; exit 1; }
for w in "$work"/wheels/*.whl; do  # overlay: existing folders are merged, not replaced
  $PY -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$SITE" ||
    { log "CALL=2: unzip $w failed"; exit 1; }
done
log "wheels unzipped into $SITE: $(cd "$work/wheels" && ls *.whl | tr '\n' ' ')"

if [[ -n "${AO_BIN_DIR:-}" ]]; then
  AO_BIN_DIR=$(cd "$AO_BIN_DIR" && pwd)
  export LD_LIBRARY_PATH="$AO_BIN_DIR:$AO_BIN_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  AO="$AO_BIN_DIR/attn-oracle"
else
  log "no AO_BIN_DIR: building attn-oracle here (needs fmt/Eigen/nlohmann-json on the image)"
  { cmake -S . -B build-device -DAO_WITH_CUDA=OFF -DAO_BLAS=OFF && cmake --build build-device -j16 --target attn-oracle; } \
    >> "$OUT/campaign.log" 2>&1 || { log "build failed: carry a CPU-only attn-oracle and pass AO_BIN_DIR"; exit 1; }
  AO="$PWD/build-device/attn-oracle"
fi
"$AO" backends > /dev/null 2>&1 || { log "$AO does not run here (missing libraries? carry them beside it)"; exit 1; }

export AO_SITE_DIR="$SITE" PYTHONUNBUFFERED=1 AO_TIMING_LOG="$OUT/timing.jsonl" AO_EXEC_TIMEOUT=${AO_EXEC_TIMEOUT:-300}
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | sed 's/^/driver /'
  $PY - <<'PY'
import importlib.metadata as md, os, site, sys
d = os.environ["AO_SITE_DIR"]
sys.path.insert(0, d); site.addsitedir(d)
import torch
print("python:", sys.version.split()[0])
print("torch:", torch.__version__, "cuda:", torch.version.cuda, "cudnn (torch):", torch.backends.cudnn.version())
print("device:", torch.cuda.get_device_name(), "sm", torch.cuda.get_device_capability())
for name in ("nvidia-cudnn-frontend", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
             "nvidia-cutlass-dsl-libs-cu13", "apache-tvm-ffi", "cuda-bindings", "nvidia-cudnn-cu13"):
    try:
        print(f"{name}: {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
import cudnn
print("cudnn frontend:", cudnn.__version__, "at", os.path.dirname(cudnn.__file__), "| cuDNN backend:", cudnn.backend_version())
import cutlass
print("cutlass DSL:", getattr(cutlass, "__version__", "?"), "at", os.path.dirname(cutlass.__file__))
from cudnn import deepseek_sparse_attention as dsa
print("dsa:", dsa.indexer_forward_wrapper.__module__, dsa.indexer_top_k_wrapper.__module__)
PY
  echo "attn-oracle: $AO"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt" >> "$OUT/campaign.log"
# AO_CAMPAIGN_PLUMBING=1: go on without a working frontend (a CPU check of this script: every case errors).
grep -q "^cudnn frontend: " "$OUT/versions.txt" || [[ -n "${AO_CAMPAIGN_PLUMBING:-}" ]] ||
  { log "the frontend does not import (versions.txt): stopping"; cat "$OUT/versions.txt"; exit 1; }

# --- the warm host ---------------------------------------------------------------------------------------
sock="$work/ao.sock"
srv=
start_server() {
  rm -f "$sock"
  $PY scripts/backends/ao_serve.py --socket "$sock" >> "$OUT/serve.log" 2>&1 &
  srv=$!
  for _ in $(seq 1 600); do [[ -S "$sock" ]] && return 0; sleep 0.1; done
  log "ao_serve did not start"; return 1
}
stop_server() {
  [[ -n "$srv" ]] || return 0
  $PY -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"adapter\": \"__quit__\"}\n"); s.recv(99)' "$sock" 2>/dev/null
  sleep 0.5; kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
}
start_server || exit 1
client="$PY $PWD/scripts/backends/ao_client.py --socket $sock cudnn_fe_indexer"
cold="$PY $PWD/scripts/backends/cudnn_fe_indexer.py"

# --- the seed table --------------------------------------------------------------------------------------
glm=${CASE_PREFIX:-"op=indexer cp=32 heads=32 dim=128 topk=2048 dtype=bf16 seed=7 crop=1 rows=256"}  # GLM dims
plan() {  # file, docs...
  local f=$1; shift
  : > "$f"
  for docs in "$@"; do for r in 0 15 31; do echo "$glm docs=$docs rank=$r" >> "$f"; done; done
}
plan "$work/small.case" 8192 32768 8192,4096
plan "$work/8k.case" 8192 8192,4096
plan "$work/large.case" 131072 65536,65536 131008,64
summary=()
notrun=()
gate() {  # name, plan file, mode (warm|cold), adapter knobs...
  local name=$1 file=$2 mode=$3; shift 3
  local n; n=$(grep -c . "$file")
  local est=$((EST_GATE_S + n * EST_CASE_S))
  [[ "$mode" == cold ]] && est=$((n * EST_COLD_S))
  if (( $(left) < est + 20 )); then
    log "SKIP gate $name ($n cases, ~${est}s): $(left)s of the budget left"
    notrun+=("$name:$file"); return
  fi
  local be="exec:$client $*"
  [[ "$mode" == cold ]] && be="exec:$cold $*"
  [[ -n "$srv" ]] || start_server || return
  local t0=$SECONDS
  { echo "=== gate $name: $be"; timeout -k 10 "$(( $(left) - 15 ))" "$AO" gate "$file" --backend "$be" --report-dir "$work/reports/$name"; echo "exit $?"; } \
    >> "$OUT/campaign.log" 2>&1
  log "gate $name: $(tail -1 "$OUT/campaign.log") in $((SECONDS - t0)) s"
  summary+=("$name=$work/reports/$name")
  # A CUDA fault (the seed reported an illegal address at 131k without the offsets) poisons the warm
  # host's context, and every later case of the gate errors with it: restart the host, and re-run the
  # cases that errored in a fresh process each (gate <name>-cold), so a fault costs its own case only.
  if ! kill -0 "$srv" 2>/dev/null || { [[ "$mode" == warm ]] && grep -q '"verdict": "error"' "$work/reports/$name/report.json"; }; then
    log "gate $name had errors (or the host died): restarting ao_serve"
    stop_server; start_server
    if [[ "$mode" == warm ]]; then
      $PY -c 'import json, sys; [print(c["case"]) for c in json.load(open(sys.argv[1]))["cases"] if c["verdict"] == "error"]' \
        "$work/reports/$name/report.json" > "$work/$name-errors.case" 2>/dev/null
      [[ -s "$work/$name-errors.case" ]] && gate "$name-cold" "$work/$name-errors.case" cold "$@"
    fi
  fi
}
# In order of what the seed table needs most; what does not fit the budget is listed as not run.
gate offsets1-row-small "$work/small.case" warm --offsets 1 --seq-lens row
gate offsets0-row-small "$work/small.case" warm --offsets 0 --seq-lens row
gate offsets1-row-large "$work/large.case" warm --offsets 1 --seq-lens row
gate offsets0-row-large "$work/large.case" warm --offsets 0 --seq-lens row
gate offsets1-chunk-8k "$work/8k.case" warm --offsets 1 --seq-lens chunk
gate offsets0-chunk-8k "$work/8k.case" warm --offsets 0 --seq-lens chunk
$PY scripts/device/seed-table.py "$OUT/seed-table.tsv" "${summary[@]}"
for g in "${notrun[@]}"; do
  while read -r line; do printf '%s\t%s\tnot-run (budget)\t\t\t\t\t\t\t\t\t\n' "${g%%:*}" "$line"; done < "${g#*:}"
done >> "$OUT/seed-table.tsv"
log "seed table: $OUT/seed-table.tsv ($(($(wc -l < "$OUT/seed-table.tsv") - 1)) rows)"

# --- the fuzz, with what is left -------------------------------------------------------------------------
# Shrinking is bounded (--shrink-runs, --max-failures) so that the summary line comes before the timeout.
fz=$(( $(left) - 120 ))
if (( fz >= 30 )); then
  log "fuzz: ${fz}s"
  timeout -k 10 "$(( $(left) - 15 ))" "$AO" fuzz --backend "exec:$client --offsets 1" --dims glm --op indexer --seed 1 \
    --budget "${fz}s" --shrink-runs 40 --max-failures 3 --out "$work/reports/found" > "$OUT/fuzz.txt" 2>&1
  log "fuzz: exit $? ($(grep -h 'fuzz-result' "$OUT/fuzz.txt" | tail -1))"
else
  log "SKIP fuzz: $(left)s of the budget left"
fi
stop_server
tar -C "$work/reports" -cJf "$OUT/reports.tar.xz" . 2>/dev/null || tar -C "$work/reports" -czf "$OUT/reports.tar.gz" .
log "done in $((SECONDS - t_start)) s; not run: ${notrun[*]:-none}"
rm -rf "$work"
