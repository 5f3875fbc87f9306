#!/usr/bin/env bash
# Device campaign for the external backends: the PyTorch exec: adapters against the corpus on the GPU.
# Needs the CPU-only attn-oracle built for the device in the folder of scripts/device/lib.sh (AO_BIN_DIR,
# default .deps/device-bin; `scripts/device/real-kernels-pack.sh --bin` makes it, with libfmt/libgomp in
# lib/; carried, since the device has neither the build dependencies nor a registry). Writes into $OUT:
# versions.txt, gate-*.txt (per-case verdicts), report-*.json (per-case metrics and times),
# timing.jsonl (the adapters' own kernel times).
#   run: scripts/device/external-campaign.sh      (carry: .deps/device-bin)
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT=${OUT:-/tmp/ao-external-out}
mkdir -p "$OUT"
ao_use_bin
AO="$ao_bin/attn-oracle"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 AO_TIMING_LOG="$OUT/timing.jsonl" AO_EXEC_TIMEOUT=120

{
  ao_versions
  $PY -c 'import torch.nn.attention.varlen as v, inspect; print("varlen_attn:", inspect.signature(v.varlen_attn))' 2>&1 | tail -1
  "$AO" backends | grep -E '^(exec|plugin|cpu-ref) '
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

# Split the corpus by op (each adapter serves one op).
work=$(mktemp -d)
files=(corpus/seeds/*.case corpus/edge/*.case)
[[ -n "${AO_CAMPAIGN_QUICK:-}" ]] && files=(corpus/seeds/te-padded-thd.case corpus/edge/masks-topk-gqa.case)  # plumbing check
cat "${files[@]}" | grep -E '^op=indexer' > "$work/indexer.case"
cat "${files[@]}" | grep -E '^op=sdpa' > "$work/sdpa.case"
wc -l "$work"/*.case

sock="$work/ao.sock"
$PY scripts/adapters/ao_serve.py --socket "$sock" 2> "$OUT/serve.log" &
srv=$!
for _ in $(seq 1 600); do [[ -S "$sock" ]] && break; sleep 0.1; done
[[ -S "$sock" ]] || { echo "ao_serve did not start"; cat "$OUT/serve.log"; exit 1; }
client="$PY $PWD/scripts/adapters/ao_client.py --socket $sock"

gate() { ao_gate "$OUT" "$@"; }  # name, case file, backend...

gate indexer "$work/indexer.case" "exec:$client torch_indexer"
gate sdpa "$work/sdpa.case" "exec:$client torch_varlen_sdpa --impl varlen" "exec:$client torch_varlen_sdpa --impl sdpa"
# The cuda-indexer plugin (built here or carried in the binary folder by scripts/tools/build-gpu-plugin.sh):
# correct and with the seed's chunk-local mask re-created by its knob.
plug="$ao_bin/libao_cuda_indexer_plugin.so"
[[ -f "$plug" ]] || bash scripts/tools/build-gpu-plugin.sh "$plug" > "$OUT/plugin-build.txt" 2>&1
grep -hE '^op=indexer docs=(8192|32768|8192,4096) ' corpus/seeds/*.case > "$work/idx-seeds.case"
[[ -n "${AO_CAMPAIGN_QUICK:-}" ]] && head -2 "$work/idx-seeds.case" > "$work/x" && mv "$work/x" "$work/idx-seeds.case"
gate plugin "$work/idx-seeds.case" "plugin:$plug"
gate plugin-topleft "$work/idx-seeds.case" "plugin:$plug:bug=topleft-cp"
# git bisect run over plugin sources rebuilt at each commit (the CPU example plugin; host compiler).
t0=$SECONDS
AO="$AO" bash scripts/tools/bisect.sh --plugin-demo > "$OUT/bisect-plugin-demo.txt" 2>&1
echo "bisect --plugin-demo: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/bisect-plugin-demo.txt"
# A kernel-like variant: bf16 matmuls (scores rounded to bf16) on the seed's single-document cases.
grep -hE '^op=indexer' corpus/seeds/dsa-single-doc-cp32.case > "$work/idx-bf16.case"
[[ -n "${AO_CAMPAIGN_QUICK:-}" ]] && head -2 "$work/idx-bf16.case" > "$work/x" && mv "$work/x" "$work/idx-bf16.case"
gate indexer-bf16 "$work/idx-bf16.case" "exec:$client torch_indexer --compute input"
# Cold start of one adapter process (no warm host), for the record.
t0=$(date +%s%N)
"$AO" repro op=indexer docs=8192 cp=32 rank=31 heads=32 dim=128 topk=2048 crop=1 seed=7 rows=64 \
  --backend "exec:$PY $PWD/scripts/adapters/torch_indexer.py" > "$OUT/cold-start.txt" 2>&1
echo "cold-start repro: exit $? in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/cold-start.txt"

$PY - "$sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{"adapter": "__quit__"}\n'); s.recv(99)
PY
wait $srv 2>/dev/null
rm -rf "$work"
