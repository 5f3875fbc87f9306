#!/usr/bin/env bash
# Real kernels on the H200 through exec: adapters and the warm host: cuDNN frontend's DSA indexer
# (scripts/adapters/cudnn_fe_indexer.py) and FlashAttention-4 varlen (scripts/adapters/fa4_varlen.py),
# in device calls made while the machine is warm (it stays ~30 s after a call). The wheels do not fit
# one call's 64 MiB carry, so scripts/device/real-kernels-pack.sh splits them:
#   CALL=1  carry .whl/dsl-cu13.tar.xz   unpacks nvidia-cutlass-dsl-libs-cu13 into $SITE (outside the repo)
#   CALL=2  carry .whl/rest.tar.xz (the other wheels, FA4's included) and either the binary folder of
#           scripts/device/lib.sh (AO_BIN_DIR, default .deps/device-bin: attn-oracle with lib/) or
#           .whl/ao-bin.tar.xz (that folder packed, unpacked into $BIN); without either it tries to build
#           attn-oracle here.
#           Checks $SITE is still there, unzips the other wheels into it (not `pip install --target
#           --upgrade`: that would replace the nvidia_cutlass_dsl/ folder the cu13 wheel shares), records
#           versions, then runs $STEPS.
#   CALL=3  (any number of times, machine still warm) carries nothing: reuses $SITE and $BIN from
#           CALL=2 and runs $STEPS: a campaign longer than one call's 600 s spans several calls.
# STEPS (default for CALL=2 "fe-seeds fe-fuzz", the first run's; each step is skipped, and listed, when
# the rest of $BUDGET_S seconds does not fit it):
#   fe-seeds   the seed table through cudnn_fe_indexer (--bug none|topleft-cp, --seq-lens row|chunk)
#   fe-fuzz    `fuzz --dims glm --op indexer` against cudnn_fe_indexer --bug none with what is left
#   fa4-smoke  one padded-THD case through fa4_varlen in a fresh process (FA4 imports and runs)
#   fa4-table  the seed-like table (scripts/device/fa4-table.case) through fa4_varlen
#   fes-probe  what of the frontend's Python SDPA serves here (scripts/device/cudnn-fe-sdpa-probe.py:
#              versions, the FROST families on offer, the direct wrappers sm90 / sm80 / bwd sm80;
#              FES_PROBE_ONLY="sdpa_bwd": only the probes whose name holds one of its words)
#   fes-table  the seed-003 table (scripts/device/fes-table.case) through cudnn_fe_sdpa: d=512 (FROST on
#              SM90) with --engine auto|frost|backend and --bug derived-offsets, d=128 (backend), the
#              wrappers, d=576/512; summary in fes-table.tsv (scripts/device/fes-table.py)
#   fes-fuzz512  random padded-THD lines at FROST's SM90 head dims (scripts/device/fes-gen.py, seed
#              $FUZZ_SEED) through `gate` for $FES512_S seconds (default: half of what is left), the
#              failures shrunk with `attn-oracle shrink` into reports.tar.xz (found-fes512/)
#   fes-fuzz   fes-fuzz512 beside `fuzz` with FUZZ=fes (two warm hosts on the GPU), for what is left
#   fes-control  the table's padded and packed lines at d=512 through FROST pinned (--engine frost), the
#              packed ones the control of the padded ones; `explain` of every failing line (fes-explain.txt)
#   fes-fp32   the fp32 d=256 lines the backend failed (scripts/device/fes-fp32.case): `explain`, what the
#              adapter wrote element by element (scripts/device/fes-out-pattern.py) and a dims/dtype sweep
#              of the same layouts (fes-fp32.tsv)
#   bwd-table  the backward table (scripts/device/bwd-table.case, op=sdpa pass=bwd) through fa4_varlen (FA4's
#              varlen backward on the case's O/LSE) and torch_varlen_sdpa --impl sdpa|varlen (autograd), and
#              the indexer's (scripts/device/bwd-indexer.case, op=indexer pass=bwd) through cudnn_fe_indexer
#              (indexer_backward_wrapper: --slot-fill zero; --slot-fill case on the lines with -1 slots;
#              --dk-dtype fp32 on two); summaries in bwd-table.tsv and bwd-indexer.tsv
#              (scripts/device/bwd-table.py); BWD_KERNELS="fa4 torch-sdpa torch-varlen fe-idx" (the default)
#              picks the kernels
#   inproc     the corpus $INPROC_CORPUS (corpus/edge) through each adapter of $INPROC_ADAPTERS ("torch_varlen_sdpa
#              fa4_varlen") twice: exec: through its warm host (gate inproc-exec-<adapter>), then in process
#              through the Python package (scripts/device/inprocess-vs-exec.py run: attn_oracle.gate on the
#              adapter's kernel function; the package from AO_PY_DIR, default $SITE, where CALL=2 unzips an
#              attn_oracle cp312 wheel carried in .whl/rest.tar.xz); per-case agreement in inproc.tsv
#   setup      nothing: CALL=2's unpacking and versions only (other instances then run CALL=3 beside)
#   fuzz       one fuzz per backend of $FUZZ and seed of $FUZZ_SEEDS (fe: cudnn_fe_indexer --bug none, op
#              indexer; fe-idx-bwd: cudnn_fe_indexer --slot-fill zero, op indexer --pass bwd (the SM90 kernel
#              serves heads >= 64 and top-k a multiple of 128: the rest skip); fa4: fa4_varlen, op sdpa;
#              fa4-bwd: fa4_varlen, op sdpa --pass bwd; torch-bwd:
#              torch_varlen_sdpa --impl sdpa, op sdpa --pass bwd; fes: cudnn_fe_sdpa $FES_KNOBS, op sdpa, --dims $FES_DIMS
#              (small)), all at once (one warm host each), --dims glm, for what is left of the budget (or
#              $FUZZ_S seconds). FES_KNOBS="--engine frost" FES_DIMS=wide: FROST pinned at head dims > 256.
# Each backend's fuzz runs with --shrink-runs $FUZZ_SHRINK_RUNS (12) and --max-failures $FUZZ_MAX_FAILURES
# (0: the whole time), ending 45 s before the budget so that the summary prints before the call's end;
# shrunk failures go to reports.tar.xz (found-<backend>/).
#   run:  CALL=1 bash scripts/device/real-kernels-campaign.sh
#         CALL=2 bash scripts/device/real-kernels-campaign.sh                 (the first run: fe-seeds fe-fuzz)
#         CALL=2 STEPS="fa4-smoke fa4-table fuzz" FUZZ_SEED=1 BUDGET_S=300 bash ...
#         CALL=3 STEPS=fuzz FUZZ_SEED=2 BUDGET_S=560 bash ...                 (repeat with new seeds)
# $OUT (at most 8 files come back): versions.txt, campaign.log, serve.log, timing.jsonl, seed-table.tsv
# (fe-seeds), fuzz-<backend>.txt (fuzz; fe-fuzz: fuzz.txt), reports.tar.xz (every gate's report.json/.md
# and the fuzz's shrunk cases); fes-probe.txt, fes-table.tsv, fes-fuzz512.txt for the fes- steps.
# AO_CAMPAIGN_PLUMBING=1: a CPU check of this script (no frontend, no FA4: every case errors or skips).
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT=${OUT:-/tmp/ao-real-kernels-out}
SITE=${SITE:-/tmp/site}
PY=${PY:-python3}
CALL=${CALL:-}
BUDGET_S=${BUDGET_S:-480}       # the whole call, setup included; the device's per-command limit is 600 s
BIN=${BIN:-/tmp/ao-bin}         # where CALL=2 unpacks .whl/ao-bin.tar.xz (CALL=3 reuses it)
FUZZ=${FUZZ:-fe fa4}
FUZZ_SEED=${FUZZ_SEED:-1}
FUZZ_SEEDS=${FUZZ_SEEDS:-$FUZZ_SEED}  # the fuzz step runs one campaign per seed, side by side
FUZZ_S=${FUZZ_S:-}              # fuzz seconds per backend (default: what is left of the budget)
# A backend that fails on most cases (FA4 on padded THD) would end a --max-failures 3 campaign in a minute:
# the step fuzzes for the whole time instead and keeps each new signature's shrink short.
FUZZ_SHRINK_RUNS=${FUZZ_SHRINK_RUNS:-12}
FUZZ_MAX_FAILURES=${FUZZ_MAX_FAILURES:-0}
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

# A faster, larger compression of the cu13 wheel can be split (split -b 56M ... .whl/dsl-cu13.tar.xz.part-):
# each call carries the parts that fit (CALL=1 the first, CALL=2 the rest beside its own carry); they are
# appended on the device and the call that completes DSL_PARTS parts unpacks them (as CALL=1 does).
dsl_parts() {  # -> 0 and $tar set when every part is on the device, 1 when parts are still missing
  local acc=/tmp/ao-dsl-cu13.tar.xz p have
  compgen -G ".whl/dsl-cu13.tar.xz.part-*" > /dev/null || return 1
  for p in .whl/dsl-cu13.tar.xz.part-*; do
    grep -qx "$(basename "$p")" "$acc.parts" 2>/dev/null && continue
    cat "$p" >> "$acc" && basename "$p" >> "$acc.parts"
  done
  have=$(grep -c . "$acc.parts")
  if (( have < ${DSL_PARTS:-2} )); then log "CALL=$CALL: $have of ${DSL_PARTS:-2} parts of the cu13 wheel on the device"; return 1; fi
  tar=$acc
}
unpack_dsl() {  # $tar -> $SITE, marker
  rm -rf "$SITE" && mkdir -p "$SITE"
  untar_xz "$tar" "$SITE" || { log "CALL=$CALL: unpacking $tar failed"; exit 1; }
  date -u +%FT%TZ > "$marker"
  log "cu13 DSL: $(find "$SITE" -type f | wc -l) files, $(du -sh "$SITE" | cut -f1) in $SITE"
}
if [[ "$CALL" == 2 && ! -f "$marker" ]] && dsl_parts; then unpack_dsl; fi
if [[ "$CALL" == 1 ]]; then
  tar=.whl/dsl-cu13.tar.xz
  if [[ ! -f "$tar" ]] && compgen -G ".whl/dsl-cu13.tar.xz.part-*" > /dev/null; then
    dsl_parts || exit 0
  fi
  [[ -f "$tar" ]] || { log "CALL=1: $tar was not carried"; exit 2; }
  rm -rf "$SITE" && mkdir -p "$SITE"
  untar_xz "$tar" "$SITE" || { log "CALL=1: unpacking $tar failed"; exit 1; }
  date -u +%FT%TZ > "$marker"
  log "REAL-KERNELS CALL=1 OK: $(find "$SITE" -type f | wc -l) files, $(du -sh "$SITE" | cut -f1) in $SITE; now CALL=2 while the machine is warm"
  exit 0
fi
case "$CALL" in
  2) STEPS=${STEPS:-fe-seeds fe-fuzz} ;;
  3) STEPS=${STEPS:-fuzz} ;;
  *) echo "usage: CALL=1|2|3 $0 (see the header)" >&2; exit 2 ;;
esac
if [[ ! -f "$marker" || ! -d "$SITE/nvidia_cutlass_dsl" ]]; then
  log "CALL=$CALL: $SITE from CALL=1 is gone (the machine was given back in between): re-run CALL=1, then CALL=2"
  exit 3
fi
work=$(mktemp -d)
mkdir "$work/wheels" "$work/reports"
marker2="$SITE/.ao-real-kernels-call2"

if [[ "$CALL" == 2 ]]; then
# --- CALL=2: the other wheels, the binary, versions ------------------------------------------------------
tar=.whl/rest.tar.xz
[[ -f "$tar" ]] || { log "CALL=2: $tar was not carried"; exit 2; }
untar_xz "$tar" "$work/wheels" || { log "CALL=2: unpacking $tar failed"; exit 1; }
for w in "$work"/wheels/*.whl; do  # overlay: existing folders are merged, not replaced
  $PY -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$SITE" ||
    { log "CALL=2: unzip $w failed"; exit 1; }
done
log "wheels unzipped into $SITE: $(cd "$work/wheels" && ls *.whl | tr '\n' ' ')"
if [[ ! -x "$ao_bin/attn-oracle" && -f .whl/ao-bin.tar.xz ]]; then
  rm -rf "$BIN" && mkdir -p "$BIN"
  untar_xz .whl/ao-bin.tar.xz "$BIN" || { log "CALL=2: unpacking .whl/ao-bin.tar.xz failed"; exit 1; }
  ao_bin=$(cd "$BIN" && pwd)
fi
if [[ -x "$ao_bin/attn-oracle" ]]; then
  AO="$ao_bin/attn-oracle"
else
  log "no $ao_bin/attn-oracle: building attn-oracle here (needs fmt/Eigen/nlohmann-json on the image)"
  { cmake -S . -B build-device -DAO_WITH_CUDA=OFF -DAO_BLAS=OFF && cmake --build build-device -j16 --target attn-oracle; } \
    >> "$OUT/campaign.log" 2>&1 || { log "build failed: carry a CPU-only attn-oracle and pass AO_BIN_DIR"; exit 1; }
  AO="$PWD/build-device/attn-oracle"
fi
echo "$AO" > "$marker2"
else
# --- CALL=3: what CALL=2 left on the warm machine --------------------------------------------------------
[[ -f "$marker2" ]] || { log "CALL=3: no CALL=2 on this machine (run CALL=2 first)"; exit 3; }
AO=$(cat "$marker2")
fi
ao_bin=$(dirname "$AO")
export LD_LIBRARY_PATH="$ao_bin:$ao_bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$AO" backends > /dev/null 2>&1 || { log "$AO does not run here (missing libraries? carry them beside it)"; exit 1; }

# FA4 keeps its compiled kernels on disk: a restarted host or a later call does not compile them again.
export AO_SITE_DIR="$SITE" PYTHONUNBUFFERED=1 AO_TIMING_LOG="$OUT/timing.jsonl" AO_EXEC_TIMEOUT=${AO_EXEC_TIMEOUT:-300}
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=${FLASH_ATTENTION_CUTE_DSL_CACHE_DIR:-$SITE.fa4-cache}
if [[ "$CALL" == 2 ]]; then
{
  ao_versions
  $PY - <<'PY'
import importlib.metadata as md, os, site, sys
d = os.environ["AO_SITE_DIR"]
sys.path.insert(0, d); site.addsitedir(d)
import torch
print("python:", sys.version.split()[0])
print("torch:", torch.__version__, "cuda:", torch.version.cuda, "cudnn (torch):", torch.backends.cudnn.version())
print("device:", torch.cuda.get_device_name(), "sm", torch.cuda.get_device_capability())
for name in ("nvidia-cudnn-frontend", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
             "nvidia-cutlass-dsl-libs-cu13", "apache-tvm-ffi", "flash-attn-4", "quack-kernels", "torch-c-dlpack-ext",
             "einops", "cuda-bindings", "nvidia-cudnn-cu13", "megatron-core", "tilelang"):
    try:
        print(f"{name}: {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
try:
    import cudnn
    print("cudnn frontend:", cudnn.__version__, "at", os.path.dirname(cudnn.__file__), "| cuDNN backend:", cudnn.backend_version())
    import cutlass
    print("cutlass DSL:", getattr(cutlass, "__version__", "?"), "at", os.path.dirname(cutlass.__file__))
    from cudnn import deepseek_sparse_attention as dsa
    print("dsa:", dsa.indexer_forward_wrapper.__module__, dsa.indexer_top_k_wrapper.__module__)
    from cudnn.engines import manifest
    print("frost engines: CUDNN_FRONTEND_ENABLE_FROST_ENGINES =", os.environ.get("CUDNN_FRONTEND_ENABLE_FROST_ENGINES", "(unset)"),
          "| sdpa fwd offered:", [f.offered_ids() for f in manifest.MANIFEST if f.name == "frost_sdpa_fwd"])
except Exception as e:  # noqa: BLE001 - recorded; the steps that need it stop on it
    print("cudnn frontend import failed:", type(e).__name__, e)
try:
    import megatron.core as mc
    from megatron.core.transformer.experimental_attention_variant import dsa_cudnn_kernels
    print("megatron-core:", mc.__version__, "at", os.path.dirname(mc.__file__), "| dsa hook:", dsa_cudnn_kernels.run_fused_qk_topk.__module__)
except Exception as e:  # noqa: BLE001
    print("megatron-core import failed:", type(e).__name__, e)
try:
    import quack
    from flash_attn.cute.interface import flash_attn_varlen_func
    print("flash-attn-4 (FA4):", flash_attn_varlen_func.__module__, "at", os.path.dirname(sys.modules["flash_attn.cute"].__file__),
          "| quack:", getattr(quack, "__version__", "?"))
except Exception as e:  # noqa: BLE001
    print("flash-attn-4 import failed:", type(e).__name__, e)
PY
  echo "attn-oracle: $AO"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt" >> "$OUT/campaign.log"
fi
have_fe=1; have_fa4=1
[[ ! -f "$OUT/versions.txt" ]] || grep -q "^cudnn frontend: " "$OUT/versions.txt" || have_fe=
[[ ! -f "$OUT/versions.txt" ]] || grep -q "^flash-attn-4 (FA4): " "$OUT/versions.txt" || have_fa4=
[[ -n "${AO_CAMPAIGN_PLUMBING:-}" ]] && { have_fe=1; have_fa4=1; }
[[ -n "$have_fe$have_fa4" ]] || { log "neither the frontend nor FA4 imports (versions.txt): stopping"; cat "$OUT/versions.txt"; exit 1; }

# --- the warm hosts (one per adapter, so that fuzz campaigns run side by side) -----------------------------
declare -A srv=()
start_server() {  # host name (the adapter's name, or another for a second host of one adapter)
  local sock="$work/$1.sock"
  rm -f "$sock"
  $PY scripts/adapters/ao_serve.py --socket "$sock" >> "$OUT/serve.log" 2>&1 &
  srv[$1]=$!
  for _ in $(seq 1 600); do [[ -S "$sock" ]] && return 0; sleep 0.1; done
  log "ao_serve ($1) did not start"; return 1
}
stop_server() {  # adapter
  local pid=${srv[$1]:-}
  [[ -n "$pid" ]] || return 0
  $PY -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"adapter\": \"__quit__\"}\n"); s.recv(99)' "$work/$1.sock" 2>/dev/null
  sleep 0.5; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; srv[$1]=
}
client() { echo "$PY $PWD/scripts/adapters/ao_client.py --socket $work/$1.sock ${2:-$1}"; }  # host [adapter]

summary=()
notrun=()
adapter=cudnn_fe_indexer
gate() {  # name, plan file, mode (warm|cold), adapter knobs...   ($adapter: which adapter)
  local name=$1 file=$2 mode=$3; shift 3
  local n; n=$(grep -c . "$file")
  local est=$((EST_GATE_S + n * EST_CASE_S))
  [[ "$mode" == cold ]] && est=$((n * EST_COLD_S))
  if (( $(left) < est + 20 )); then
    log "SKIP gate $name ($n cases, ~${est}s): $(left)s of the budget left"
    notrun+=("$name:$file"); return
  fi
  local be="exec:$(client $adapter) $*"
  [[ "$mode" == cold ]] && be="exec:env PYTHONPATH=$PWD/python $PY -m attn_oracle.adapters.$adapter $*"
  [[ -n "${srv[$adapter]:-}" ]] || start_server $adapter || return
  local t0=$SECONDS
  { echo "=== gate $name: $be"; timeout -k 10 "$(( $(left) - 15 ))" "$AO" gate "$file" --backend "$be" --report-dir "$work/reports/$name"; echo "exit $?"; } \
    >> "$OUT/campaign.log" 2>&1
  log "gate $name: $(tail -1 "$OUT/campaign.log") in $((SECONDS - t0)) s"
  summary+=("$name=$work/reports/$name")
  # A CUDA fault (the seed reported an illegal address at 131k without the offsets) poisons the warm
  # host's context, and every later case of the gate errors with it: restart the host, and re-run the
  # cases that errored in a fresh process each (gate <name>-cold), so a fault costs its own case only.
  if ! kill -0 "${srv[$adapter]}" 2>/dev/null || { [[ "$mode" == warm ]] && grep -q '"verdict": "error"' "$work/reports/$name/report.json"; }; then
    log "gate $name had errors (or the host died): restarting ao_serve ($adapter)"
    stop_server $adapter; start_server $adapter
    if [[ "$mode" == warm ]]; then
      $PY -c 'import json, sys; [print(c["case"]) for c in json.load(open(sys.argv[1]))["cases"] if c["verdict"] == "error"]' \
        "$work/reports/$name/report.json" > "$work/$name-errors.case" 2>/dev/null
      [[ -s "$work/$name-errors.case" ]] && gate "$name-cold" "$work/$name-errors.case" cold "$@"
    fi
  fi
}

# --- steps ---------------------------------------------------------------------------------------------
step_fe_seeds() {
  [[ -n "$have_fe" ]] || { log "SKIP fe-seeds: the frontend does not import"; notrun+=("fe-seeds:-"); return; }
  glm=${CASE_PREFIX:-"op=indexer cp=32 heads=32 dim=128 topk=2048 dtype=bf16 seed=7 crop=1 rows=256"}  # GLM dims
  plan() {  # file, docs...
    local f=$1; shift
    : > "$f"
    for docs in "$@"; do for r in 0 15 31; do echo "$glm docs=$docs rank=$r" >> "$f"; done; done
  }
  plan "$work/small.case" 8192 32768 8192,4096
  plan "$work/8k.case" 8192 8192,4096
  plan "$work/large.case" 131072 65536,65536 131008,64
  adapter=cudnn_fe_indexer
  # In order of what the seed table needs most; what does not fit the budget is listed as not run.
  gate offsets1-row-small "$work/small.case" warm --bug none --seq-lens row
  gate offsets0-row-small "$work/small.case" warm --bug topleft-cp --seq-lens row
  gate offsets1-row-large "$work/large.case" warm --bug none --seq-lens row
  gate offsets0-row-large "$work/large.case" warm --bug topleft-cp --seq-lens row
  gate offsets1-chunk-8k "$work/8k.case" warm --bug none --seq-lens chunk
  gate offsets0-chunk-8k "$work/8k.case" warm --bug topleft-cp --seq-lens chunk
  $PY scripts/device/seed-table.py "$OUT/seed-table.tsv" "${summary[@]}"
  for g in "${notrun[@]}"; do
    [[ "${g#*:}" == - ]] && continue
    while read -r line; do printf '%s\t%s\tnot-run (budget)\t\t\t\t\t\t\t\t\t\n' "${g%%:*}" "$line"; done < "${g#*:}"
  done >> "$OUT/seed-table.tsv"
  log "seed table: $OUT/seed-table.tsv ($(($(wc -l < "$OUT/seed-table.tsv") - 1)) rows)"
}
step_fe_fuzz() {  # the first run's fuzz: cudnn_fe_indexer alone, with what is left
  [[ -n "$have_fe" ]] || { log "SKIP fe-fuzz: the frontend does not import"; notrun+=("fe-fuzz:-"); return; }
  local fz=$(( $(left) - 120 ))
  if (( fz < 30 )); then log "SKIP fuzz: $(left)s of the budget left"; notrun+=("fe-fuzz:-"); return; fi
  [[ -n "${srv[cudnn_fe_indexer]:-}" ]] || start_server cudnn_fe_indexer || return
  log "fuzz: ${fz}s"
  timeout -k 10 "$(( $(left) - 15 ))" "$AO" fuzz --backend "exec:$(client cudnn_fe_indexer) --bug none" --dims glm --op indexer \
    --seed "$FUZZ_SEED" --budget "${fz}s" --shrink-runs 40 --max-failures 3 --out "$work/reports/found" > "$OUT/fuzz.txt" 2>&1
  log "fuzz: exit $? ($(grep -h 'fuzz-result' "$OUT/fuzz.txt" | tail -1))"
}
step_fa4_smoke() {  # FA4 imports and runs one padded-THD case in a fresh process (JIT compile included)
  [[ -n "$have_fa4" ]] || { log "SKIP fa4-smoke: FA4 does not import"; notrun+=("fa4-smoke:-"); return; }
  { echo "=== fa4-smoke"; AO_EXEC_KEEP= timeout -k 5 120 "$AO" repro op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=128 \
      --backend "exec:$PY $PWD/scripts/adapters/fa4_varlen.py"; echo "exit $?"; } >> "$OUT/campaign.log" 2>&1
  log "fa4-smoke: $(tail -1 "$OUT/campaign.log")"
}
step_fa4_table() {
  [[ -n "$have_fa4" ]] || { log "SKIP fa4-table: FA4 does not import"; notrun+=("fa4-table:-"); return; }
  adapter=fa4_varlen
  grep -v '^#' scripts/device/fa4-table.case | grep . > "$work/fa4-table.case"
  gate fa4-table "$work/fa4-table.case" warm
}
step_bwd_table() {  # the backward kernels on the seed-like backward cases
  local kernels=${BWD_KERNELS:-fa4 torch-sdpa torch-varlen fe-idx} gates=() idx=() k
  for k in $kernels; do
    case $k in fa4|torch-sdpa|torch-varlen|fe-idx) ;; *) log "bwd-table: unknown kernel $k (fa4|torch-sdpa|torch-varlen|fe-idx)"; return ;; esac
  done
  grep -v '^#' scripts/device/bwd-table.case | grep . > "$work/bwd-table.case"
  grep -v '^#' scripts/device/bwd-indexer.case | grep . > "$work/bwd-indexer.case"
  grep -E 'rank=0( |$)|pad=' "$work/bwd-indexer.case" > "$work/bwd-indexer-slots.case"  # lines with -1 slots
  grep -E 'docs=8192 rank=(0|31)$' "$work/bwd-indexer.case" > "$work/bwd-indexer-dk32.case"
  for k in $kernels; do
    case $k in
      fa4)
        [[ -n "$have_fa4" ]] || { log "SKIP bwd-table fa4: FA4 does not import"; notrun+=("bwd-fa4:-"); continue; }
        adapter=fa4_varlen; gate bwd-fa4 "$work/bwd-table.case" warm; gates+=("fa4=$work/reports/bwd-fa4") ;;
      torch-sdpa|torch-varlen)
        adapter=torch_varlen_sdpa; gate "bwd-$k" "$work/bwd-table.case" warm --impl "${k#torch-}"; gates+=("$k=$work/reports/bwd-$k") ;;
      fe-idx)  # -1 slots zeroed (a framework's masked softmax), as the case holds them, and an fp32 d_index_k
        [[ -n "$have_fe" ]] || { log "SKIP bwd-table fe-idx: the frontend does not import"; notrun+=("bwd-fe-idx:-"); continue; }
        adapter=cudnn_fe_indexer
        gate bwd-fe-idx "$work/bwd-indexer.case" warm --slot-fill zero; idx+=("fe-idx=$work/reports/bwd-fe-idx")
        gate bwd-fe-idx-slots "$work/bwd-indexer-slots.case" warm --slot-fill case
        idx+=("fe-idx-slot-fill-case=$work/reports/bwd-fe-idx-slots")
        gate bwd-fe-idx-dk32 "$work/bwd-indexer-dk32.case" warm --slot-fill zero --dk-dtype fp32
        idx+=("fe-idx-dk-fp32=$work/reports/bwd-fe-idx-dk32") ;;
    esac
  done
  if (( ${#gates[@]} )); then
    $PY scripts/device/bwd-table.py "$OUT/bwd-table.tsv" "${gates[@]}"
    log "bwd table: $OUT/bwd-table.tsv ($(($(wc -l < "$OUT/bwd-table.tsv") - 1)) rows)"
  fi
  if (( ${#idx[@]} )); then
    $PY scripts/device/bwd-table.py --indexer "$OUT/bwd-indexer.tsv" "${idx[@]}"
    log "bwd indexer table: $OUT/bwd-indexer.tsv ($(($(wc -l < "$OUT/bwd-indexer.tsv") - 1)) rows)"
  fi
}
step_inproc() {  # the corpus through the Python package in process and through exec: (the warm host), per adapter
  local py_dir=${AO_PY_DIR:-$SITE} a pairs=() t0
  if ! AO_PY_DIR=$py_dir $PY -c 'import os, sys; sys.path.insert(0, os.environ["AO_PY_DIR"]); import attn_oracle' >> "$OUT/campaign.log" 2>&1; then
    log "SKIP inproc: attn_oracle does not import from $py_dir (carry its wheel in .whl/rest.tar.xz)"; notrun+=("inproc:-"); return
  fi
  local c=${INPROC_CORPUS:-corpus/edge}
  if [[ -d $c ]]; then cat "$c"/*.case; else cat "$c"; fi | grep -v '^#' | grep . > "$work/inproc.case"
  for a in ${INPROC_ADAPTERS:-torch_varlen_sdpa fa4_varlen}; do
    [[ $a != fa4_varlen || -n "$have_fa4" ]] || { log "SKIP inproc $a: FA4 does not import"; notrun+=("inproc-$a:-"); continue; }
    adapter=$a
    gate "inproc-exec-$a" "$work/inproc.case" warm
    [[ -f "$work/reports/inproc-exec-$a/report.json" ]] || continue
    stop_server "$a"  # its GPU memory back before the in-process run
    t0=$SECONDS
    PYTHONPATH=$py_dir${PYTHONPATH:+:$PYTHONPATH} AO_PY_DIR=$py_dir timeout -k 10 "$(( $(left) - 20 ))" $PY scripts/device/inprocess-vs-exec.py run "$a" "$work/inproc.case" \
      "$work/reports/inproc-in-$a" > "$work/reports/inproc-in-$a.txt" 2>&1
    log "inproc $a in process: exit $? in $((SECONDS - t0)) s ($(tail -1 "$work/reports/inproc-in-$a.txt" | cut -c1-160))"
    pairs+=("$a=$work/reports/inproc-in-$a,$work/reports/inproc-exec-$a")
  done
  (( ${#pairs[@]} )) || return
  $PY scripts/device/inprocess-vs-exec.py compare "$OUT/inproc.tsv" "${pairs[@]}" >> "$OUT/campaign.log" 2>&1
  log "inproc: $(tail -1 "$OUT/campaign.log")"
}
step_fuzz() {  # one fuzz per backend of $FUZZ and seed of $FUZZ_SEEDS, side by side
  local fz=${FUZZ_S:-$(( $(left) - 45 ))} pids=() b a knobs op seed h tag pass
  (( fz <= $(left) - 45 )) || fz=$(( $(left) - 45 ))
  if (( fz < 30 )); then log "SKIP fuzz: $(left)s of the budget left"; notrun+=("fuzz:-"); return; fi
  local tags=()
  for b in $FUZZ; do
    case $b in
      fe)  a=cudnn_fe_indexer knobs=" --bug none" op=indexer; [[ -n "$have_fe" ]] || { log "SKIP fuzz fe: no frontend"; continue; } ;;
      fe-idx-bwd) a=cudnn_fe_indexer knobs=" --slot-fill zero" op=indexer; [[ -n "$have_fe" ]] || { log "SKIP fuzz fe-idx-bwd: no frontend"; continue; } ;;
      fa4) a=fa4_varlen knobs= op=sdpa; [[ -n "$have_fa4" ]] || { log "SKIP fuzz fa4: no FA4"; continue; } ;;
      fa4-bwd) a=fa4_varlen knobs= op=sdpa; [[ -n "$have_fa4" ]] || { log "SKIP fuzz fa4-bwd: no FA4"; continue; } ;;
      torch-bwd) a=torch_varlen_sdpa knobs=" --impl sdpa" op=sdpa ;;
      fes) a=cudnn_fe_sdpa knobs=${FES_KNOBS:+ $FES_KNOBS} op=sdpa; [[ -n "$have_fe" ]] || { log "SKIP fuzz fes: no frontend"; continue; } ;;
      *) log "fuzz: unknown backend $b (fe|fa4|fa4-bwd|torch-bwd|fe-idx-bwd|fes)"; continue ;;
    esac
    pass=any; [[ $b == *-bwd ]] && pass=bwd
    local dims=glm; [[ $b == fes ]] && dims=${FES_DIMS:-small}  # glm is dim 128 only; small reaches 256
    [[ $b == fe-idx-bwd ]] && dims=deepseek  # the SM90 indexer backward: 64 heads, top-k in 128s
    for seed in $FUZZ_SEEDS; do
      tag=$b; [[ "$FUZZ_SEEDS" == "$FUZZ_SEED" ]] || tag=$b-s$seed
      h=$a; [[ $tag == "$b" ]] || h=$a-s$seed  # one warm host per campaign
      [[ -n "${srv[$h]:-}" ]] || start_server "$h" || continue
      log "fuzz $tag: ${fz}s, seed $seed, dims $dims, knobs:${knobs:- (none)}"
      ( timeout -k 10 "$(( fz + 30 ))" "$AO" fuzz --backend "exec:$(client "$h" $a)$knobs" --dims $dims --op $op --pass $pass --seed "$seed" \
          --budget "${fz}s" --shrink-runs "$FUZZ_SHRINK_RUNS" --max-failures "$FUZZ_MAX_FAILURES" --out "$work/reports/found-$tag" > "$OUT/fuzz-$tag.txt" 2>&1
        echo "exit $?" >> "$OUT/fuzz-$tag.txt" ) &
      pids+=($!); tags+=("$tag")
    done
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for tag in "${tags[@]}"; do [[ -f "$OUT/fuzz-$tag.txt" ]] && log "fuzz $tag: $(grep -h 'fuzz-result' "$OUT/fuzz-$tag.txt" | tail -1) $(tail -1 "$OUT/fuzz-$tag.txt")"; done
}

step_mc_table() {  # the seed table through Megatron-Core's own DSA top-k path (megatron_dsa)
  [[ ! -f "$OUT/versions.txt" ]] || grep -q "^megatron-core: " "$OUT/versions.txt" || [[ -n "${AO_CAMPAIGN_PLUMBING:-}" ]] ||
    { log "SKIP mc-table: megatron-core does not import (versions.txt)"; notrun+=("mc-table:-"); return; }
  local glm=${CASE_PREFIX:-"op=indexer cp=32 heads=32 dim=128 topk=2048 dtype=bf16 seed=7 rows=64"} docs r
  : > "$work/mc-small.case"; : > "$work/mc-large.case"
  for docs in 8192 32768 8192,4096; do for r in 0 15 31; do echo "$glm docs=$docs rank=$r" >> "$work/mc-small.case"; done; done
  for docs in 131072 65536,65536 131008,64; do for r in 0 15 31; do echo "$glm docs=$docs rank=$r" >> "$work/mc-large.case"; done; done
  # max_seqlen: padded documents whose pad tokens lie in other ranks' chunks (rank 31 holds no pad row), so
  # the unpadded max_seqlen_q is shorter than the padded one that Megatron divides by 2*cp.
  { echo "$glm docs=131000,37 padded_offsets=0,131008,131072 rank=31"
    echo "$glm docs=8000,37 padded_offsets=0,8064,8128 rank=31"
    echo "$glm docs=8000 padded_offsets=0,8064 rank=31"; } > "$work/mc-maxseq.case"
  adapter=megatron_dsa
  # In order of what the seed's question needs most; $MC_GATES picks some (a later call runs the rest).
  local g name file knobs
  for g in "mc-cudnn-small small --impl cudnn --fix none" "mc-cudnn-fix-small small --impl cudnn --fix q-causal-offsets" \
           "mc-naive-small small --impl naive" \
           "mc-maxseq-padded maxseq --impl cudnn --fix q-causal-offsets --max-seqlen padded" \
           "mc-maxseq-unpadded maxseq --impl cudnn --fix q-causal-offsets --max-seqlen unpadded" \
           "mc-maxseq-unpadded-nofix maxseq --impl cudnn --fix none --max-seqlen unpadded" \
           "mc-cudnn-large large --impl cudnn --fix none" "mc-cudnn-fix-large large --impl cudnn --fix q-causal-offsets" \
           "mc-naive-large large --impl naive"; do
    read -r name file knobs <<< "$g"
    [[ -z "${MC_GATES:-}" || " $MC_GATES " == *" $name "* ]] || continue
    gate "$name" "$work/mc-$file.case" warm $knobs
  done
  $PY scripts/device/seed-table.py "$OUT/mc-table.tsv" "${summary[@]}"
  log "megatron table: $OUT/mc-table.tsv ($(($(wc -l < "$OUT/mc-table.tsv") - 1)) rows)"
}
step_mc_repro() {  # the standalone reproduction ($MC_REPRO, no attn-oracle) on the seed's layouts
  local script=${MC_REPRO:-results/cpu/megatron-dsa-2026-12-08/megatron_topleft_repro.py} args
  for args in "--docs 8192,4096 --rank 15" "--docs 8192,4096 --rank 0" "--docs 32768 --rank 15" "--docs 131008,64 --rank 31"; do
    { echo "=== $script $args"
      timeout -k 5 120 $PY -c 'import os, runpy, site, sys; d = os.environ["AO_SITE_DIR"]; sys.path.insert(0, d); site.addsitedir(d);
sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__")' "$script" $args 2>&1 | grep -v Warning | tail -4
      echo "exit ${PIPESTATUS[0]}"; } >> "$OUT/mc-repro.txt"
  done
  log "mc-repro: $(grep -c '^as released' "$OUT/mc-repro.txt") runs ($OUT/mc-repro.txt)"
}
mc_fuzz_one() {  # tag, seconds, knobs...: megatron-gen.py lines through gate on its own warm host, failures shrunk
  local tag=$1 fz=$2 t0=$SECONDS; shift 2
  [[ -n "${srv[$tag]:-}" ]] || start_server "$tag" || return
  local be="exec:$(client "$tag" megatron_dsa) $*" fails="$work/$tag-fail.case" out="$OUT/fuzz-$tag.txt"
  gate_generated "$tag" "$fz" "$be" "$out" scripts/device/megatron-gen.py "${MC_DIMS:-glm}"
  echo "mc-fuzz-result: tag=$tag seconds=$((SECONDS - t0)) lines=$gen_lines $(awk '/^gate: /{p+=$7; f+=$9; w+=$11; s+=$13} END{printf "passed=%d failed=%d weak=%d skipped=%d", p, f, w, s}' "$out") failing_or_error=$(grep -c . "$fails") knobs=$*" >> "$out"
  mkdir -p "$work/reports/found-$tag"
  local k=0 line
  while read -r line && (( $(left) > 60 && k < ${MC_SHRINK_MAX:-3} )); do
    k=$((k + 1))
    timeout -k 5 "$(( $(left) - 45 < 180 ? $(left) - 45 : 180 ))" "$AO" shrink $line --backend "$be" --runs "${MC_SHRINK_RUNS:-30}" \
      > "$work/reports/found-$tag/shrink-$k.txt" 2>&1
    echo "shrink $k: exit $? $(tail -1 "$work/reports/found-$tag/shrink-$k.txt" | cut -c1-300)" >> "$out"
  done < "$fails"
}
step_mc_fuzz() {  # generated Megatron-domain lines per impl ($MC_FUZZ, default "cudnn naive"), side by side
  local fz=${MC_FUZZ_S:-$(( $(left) - 150 ))} pids=() impl
  (( fz >= 60 )) || { log "SKIP mc-fuzz: $(left)s left"; notrun+=("mc-fuzz:-"); return; }
  for impl in ${MC_FUZZ:-cudnn naive}; do
    log "mc-fuzz $impl: ${fz}s, seed $FUZZ_SEED, dims ${MC_DIMS:-glm}"
    ( mc_fuzz_one "mc-$impl" "$fz" --impl "$impl" ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for impl in ${MC_FUZZ:-cudnn naive}; do log "$(grep -h 'mc-fuzz-result' "$OUT/fuzz-mc-$impl.txt" 2>/dev/null | tail -1)"; done
}
step_fes_probe() {
  [[ -n "$have_fe" ]] || { log "SKIP fes-probe: the frontend does not import"; notrun+=("fes-probe:-"); return; }
  timeout -k 5 "${FES_PROBE_S:-240}" $PY scripts/device/cudnn-fe-sdpa-probe.py ${FES_PROBE_ONLY:-} > "$OUT/fes-probe.txt" 2>&1
  log "fes-probe: exit $? ($(grep -c ': RAN' "$OUT/fes-probe.txt") ran, $(grep -c ': DECLINED' "$OUT/fes-probe.txt") declined/failed)"
}
fes_gates=()
fes_gate() {  # name, dims, which (padded|packed|all), adapter knobs...
  local name=$1 dims=$2 which=$3; shift 3
  local f="$work/$name.case"
  grep -v '^#' scripts/device/fes-table.case | grep . | while read -r kind line; do
    [[ $which == all || $which == "$kind" ]] && echo "${line/@DIM@/$dims}"
  done > "$f"
  adapter=cudnn_fe_sdpa
  gate "$name" "$f" warm "$@"
  fes_gates+=("$name"$'\t'"$work/reports/$name"$'\t'"$*")
}
step_fes_table() {
  [[ -n "$have_fe" ]] || { log "SKIP fes-table: the frontend does not import"; notrun+=("fes-table:-"); return; }
  # In order of what the seed's question needs most; what does not fit the budget is listed as not run.
  fes_gate fes-d512-auto dim=512 all
  fes_gate fes-d512-bug dim=512 all --bug derived-offsets
  fes_gate fes-d128-auto dim=128 all
  fes_gate fes-d512-frost dim=512 padded --engine frost
  fes_gate fes-d512-backend dim=512 padded --engine backend
  fes_gate fes-d128-frost dim=128 padded --engine frost
  fes_gate fes-d576-auto "dim=576 dim_v=512" all
  fes_gate fes-d512-w90 dim=512 all --path wrapper_sm90
  fes_gate fes-d128-w80 dim=128 all --path wrapper_sm80
  fes_gate fes-d512-tokens dim=512 padded --offset-units tokens
  printf '%s\n' "${fes_gates[@]}" > "$work/fes-gates.tsv"
  $PY scripts/device/fes-table.py "$OUT/fes-table.tsv" "$OUT/timing.jsonl" "$work/fes-gates.tsv"
  log "fes table: $OUT/fes-table.tsv ($(($(wc -l < "$OUT/fes-table.tsv") - 1)) rows)"
}
fes_explain() {  # report dir, adapter knobs... -> `explain` of each failing case, appended to fes-explain.txt
  local rep=$1 line; shift
  $PY -c 'import json, sys; [print(c["case"]) for c in json.load(open(sys.argv[1]))["cases"] if c["verdict"] == "fail"]' \
    "$rep/report.json" 2>/dev/null | while read -r line; do
    (( $(left) > 60 )) || { echo "(explain not run, budget: $line)"; continue; }
    echo "=== explain [$*] $line"
    timeout -k 5 120 "$AO" explain $line --backend "exec:$(client cudnn_fe_sdpa) $*" --top 4 2>&1
    echo "exit $?"
  done >> "$OUT/fes-explain.txt"
}
step_fes_control() {  # FROST pinned on the table's padded lines and the same documents packed
  [[ -n "$have_fe" ]] || { log "SKIP fes-control: the frontend does not import"; notrun+=("fes-control:-"); return; }
  fes_gates=()
  fes_gate fes-d512-frost-all dim=512 all --engine frost
  printf '%s\n' "${fes_gates[@]}" > "$work/fes-control-gates.tsv"
  $PY scripts/device/fes-table.py "$OUT/fes-control.tsv" "$OUT/timing.jsonl" "$work/fes-control-gates.tsv"
  fes_explain "$work/reports/fes-d512-frost-all" --engine frost
  log "fes-control: $OUT/fes-control.tsv; explain: $(grep -c '^=== explain' "$OUT/fes-explain.txt" 2>/dev/null) lines"
}
step_fes_fp32() {  # the backend's fp32 d=256 failures: explain, the written pattern, a dims/dtype sweep
  [[ -n "$have_fe" ]] || { log "SKIP fes-fp32: the frontend does not import"; notrun+=("fes-fp32:-"); return; }
  local line keep="$work/keep" n=0
  mkdir -p "$keep"
  adapter=cudnn_fe_sdpa
  [[ -n "${srv[cudnn_fe_sdpa]:-}" ]] || start_server cudnn_fe_sdpa || return
  grep -v '^#' scripts/device/fes-fp32.case | grep . > "$work/fp32-all.case"
  awk '$1 == "found" {$1 = ""; sub(/^ /, ""); print}' "$work/fp32-all.case" > "$work/fp32-found.case"
  awk '$1 == "sweep" {$1 = ""; sub(/^ /, ""); print}' "$work/fp32-all.case" > "$work/fp32-sweep.case"
  while read -r line; do
    n=$((n + 1))
    { echo "=== explain [auto] $line"; timeout -k 5 120 "$AO" explain $line --backend "exec:$(client cudnn_fe_sdpa)" --top 4 2>&1; echo "exit $?"; } >> "$OUT/fes-explain.txt"
    mkdir -p "$keep/$n"
    AO_EXEC_KEEP=1 AO_EXEC_DIR="$keep/$n" timeout -k 5 120 "$AO" repro $line --backend "exec:$PY $PWD/scripts/adapters/cudnn_fe_sdpa.py" \
      > "$keep/$n.repro.txt" 2>&1
    { echo "=== pattern $line"; tail -3 "$keep/$n.repro.txt"; $PY scripts/device/fes-out-pattern.py "$keep/$n"/* 2>&1; } >> "$OUT/fes-fp32-pattern.txt"
  done < "$work/fp32-found.case"
  fes_gates=()
  gate fes-fp32-sweep "$work/fp32-sweep.case" warm
  fes_gates+=("fes-fp32-sweep"$'\t'"$work/reports/fes-fp32-sweep"$'\t')
  gate fes-fp32-sweep-backend "$work/fp32-sweep.case" warm --engine backend
  fes_gates+=("fes-fp32-sweep-backend"$'\t'"$work/reports/fes-fp32-sweep-backend"$'\t'"--engine backend")
  printf '%s\n' "${fes_gates[@]}" > "$work/fes-fp32-gates.tsv"
  $PY scripts/device/fes-table.py "$OUT/fes-fp32.tsv" "$OUT/timing.jsonl" "$work/fes-fp32-gates.tsv"
  log "fes-fp32: $n found lines explained and dumped, sweep in $OUT/fes-fp32.tsv"
}
gate_generated() {  # tag, seconds, backend, output file, generator script, its arguments after SEED N...:
  # batches of 8 generated lines through gate until the seconds are spent; failing or erroring lines go to
  # $work/<tag>-fail.case; sets gen_lines and gen_batches
  local tag=$1 fz=$2 be=$3 out=$4 gen=$5 t0=$SECONDS; shift 5
  gen_lines=0 gen_batches=0
  : > "$work/$tag-fail.case"
  while (( SECONDS - t0 < fz - 20 )); do
    $PY "$gen" "$((FUZZ_SEED * 1000 + gen_batches))" 8 "$@" > "$work/$tag-$gen_batches.case"
    timeout -k 5 "$(( fz - (SECONDS - t0) ))" "$AO" gate "$work/$tag-$gen_batches.case" --backend "$be" \
      --report-dir "$work/reports/$tag-$gen_batches" >> "$out" 2>&1
    $PY -c 'import json, sys; [print(c["case"]) for c in json.load(open(sys.argv[1]))["cases"] if c["verdict"] in ("fail", "error")]' \
      "$work/reports/$tag-$gen_batches/report.json" >> "$work/$tag-fail.case" 2>/dev/null
    gen_lines=$((gen_lines + $(grep -c . "$work/$tag-$gen_batches.case"))); gen_batches=$((gen_batches + 1))
  done
}
step_fes_fuzz512() {  # generated FROST-domain lines through gate, then shrink the failures
  [[ -n "$have_fe" ]] || { log "SKIP fes-fuzz512: the frontend does not import"; notrun+=("fes-fuzz512:-"); return; }
  local fz=${FES512_S:-$(( ($(left) - 60) / 2 ))} t0=$SECONDS n=0 batch=0
  (( fz >= 30 )) || { log "SKIP fes-fuzz512: $(left)s left"; notrun+=("fes-fuzz512:-"); return; }
  # Its own warm host (socket fes512), so that it can run beside `fuzz` of cudnn_fe_sdpa (step fes-fuzz).
  [[ -n "${srv[fes512]:-}" ]] || start_server fes512 || return
  local be="exec:$PY $PWD/scripts/adapters/ao_client.py --socket $work/fes512.sock cudnn_fe_sdpa" fails="$work/fes512-fail.case"
  log "fes-fuzz512: ${fz}s, seed $FUZZ_SEED"
  gate_generated fes512 "$fz" "$be" "$OUT/fes-fuzz512.txt" scripts/device/fes-gen.py
  n=$gen_lines batch=$gen_batches
  log "fes-fuzz512: $batch batches, $n lines in $((SECONDS - t0)) s; $(grep -c . "$fails") failing/erroring"
  echo "fes-fuzz512-result: seconds=$((SECONDS - t0)) lines=$n failing=$(grep -c . "$fails")" >> "$OUT/fes-fuzz512.txt"
  mkdir -p "$work/reports/found-fes512"
  local k=0
  while read -r line && (( $(left) > 90 && k < ${FES512_SHRINK_MAX:-3} )); do
    k=$((k + 1))
    timeout -k 5 "$(( $(left) - 60 < 240 ? $(left) - 60 : 240 ))" "$AO" shrink $line --backend "$be" --runs "${FES512_SHRINK_RUNS:-40}" \
      > "$work/reports/found-fes512/shrink-$k.txt" 2>&1
    log "fes-fuzz512 shrink $k: exit $? ($(tail -1 "$work/reports/found-fes512/shrink-$k.txt" | cut -c1-200))"
  done < "$fails"
  stop_server fes512
}
step_fes_fuzz() {  # fes-fuzz512 and `fuzz --dims small` of cudnn_fe_sdpa side by side, for what is left
  local both=$(( $(left) - 60 ))
  (( both >= 60 )) || { log "SKIP fes-fuzz: $(left)s left"; notrun+=("fes-fuzz:-"); return; }
  FES512_S=${FES512_S:-$(( both - 150 ))}  # the rest: its shrinks, within the same budget
  ( step_fes_fuzz512 ) &
  local p=$!
  FUZZ=fes FUZZ_S=${FUZZ_S:-$(( both - 30 ))} step_fuzz
  wait "$p"
}

log "CALL=$CALL steps: $STEPS (budget ${BUDGET_S}s, $(left)s left)"
for st in $STEPS; do
  case $st in
    fe-seeds) step_fe_seeds ;;
    fe-fuzz) step_fe_fuzz ;;
    fa4-smoke) step_fa4_smoke ;;
    fa4-table) step_fa4_table ;;
    fuzz) step_fuzz ;;
    fes-probe) step_fes_probe ;;
    fes-table) step_fes_table ;;
    fes-fuzz512) step_fes_fuzz512 ;;
    fes-fuzz) step_fes_fuzz ;;
    fes-control) step_fes_control ;;
    fes-fp32) step_fes_fp32 ;;
    bwd-table) step_bwd_table ;;
    inproc) step_inproc ;;
    mc-table) step_mc_table ;;
    mc-fuzz) step_mc_fuzz ;;
    mc-repro) step_mc_repro ;;
    setup) ;;
    *) log "unknown step $st (setup fe-seeds fe-fuzz fa4-smoke fa4-table fuzz fes-probe fes-table fes-fuzz512 fes-fuzz fes-control fes-fp32 bwd-table inproc mc-table mc-fuzz mc-repro)" ;;
  esac
done
for a in "${!srv[@]}"; do stop_server "$a"; done
tar -C "$work/reports" -cJf "$OUT/reports.tar.xz" . 2>/dev/null || tar -C "$work/reports" -czf "$OUT/reports.tar.gz" .
log "done in $((SECONDS - t_start)) s; not run: ${notrun[*]:-none}"
rm -rf "$work"
