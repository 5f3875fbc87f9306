#!/usr/bin/env bash
# cudnn-sdpa device campaign, one device call: build (or use carried binaries), run the
# cuDNN tests, answer three questions about padded THD (Q1-Q3 below) with cases, gate the padded corpus and fuzz — against
# EVERY cuDNN found: the system one and the one inside PyTorch's wheel, each run separately.
#
# Usage (repo root): scripts/device/cudnn-campaign.sh [OUT_DIR]
#   AO_BIN_DIR=.deps/device-bin  (scripts/device/lib.sh) prebuilt attn-oracle + ao_cudnn_tests and a lib/ of
#                            the non-CUDA shared libraries they need (made here by scripts/device/cudnn-pack.sh
#                            and carried, since the device image has no Debian -dev packages); built when missing
#   AO_FUZZ_SECONDS=120      fuzz budget per cuDNN version (AO_FUZZ_SEED=8008: same cases on each)
#   AO_CUDNN_LIBS="sys:/usr/lib/x86_64-linux-gnu torch:/opt/.../nvidia/cudnn/lib"  (default: searched)
#   AO_CUDNN_PASS=fwd        bwd: the backward instead: scripts/device/bwd-table.case under the default graph
#                            and the deterministic / max_total=0 / ragged_stats=0 variants, no corpus gate,
#                            and `fuzz --pass bwd`; AO_BWD_SPECS="spec ..." picks the specs (default all four)
# Writes into OUT_DIR (default $OUT): env.txt, <ver>.log (everything), summary.tsv (one row per case
# run: version, backend, verdict, case, reason), found.tgz (shrunk fuzz failures, report dirs).
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out=${1:-${OUT:-cudnn-campaign-out}}
mkdir -p "$out"
bin=$ao_bin
fuzz_s=${AO_FUZZ_SECONDS:-120}

# ---- environment -------------------------------------------------------------------------------
ao_versions >"$out/env.txt" 2>&1

# ---- binaries ----------------------------------------------------------------------------------
ao_use_bin
if ! ao_runnable "$bin/attn-oracle"; then
  ao_stamp "no runnable $bin/attn-oracle (ldd: $(ldd "$bin/attn-oracle" 2>&1 | grep 'not found' | tr -s ' ' | head -3)); building"
  bin=build-device
  cmake -S . -B "$bin" -DAO_CUDA_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$out/build.log" 2>&1 &&
    cmake --build "$bin" -j16 --target attn-oracle ao_cudnn_tests >>"$out/build.log" 2>&1 &&
    cp "$bin/gpu_backends/ao_cudnn_tests" "$bin/" ||
    { ao_stamp "build failed (tail of build.log follows)"; tail -30 "$out/build.log"; }
fi
echo "binaries: ${bin/#$ao_root/<checkout>}" >>"$out/env.txt"  # no machine path in a report

# ---- cuDNN libraries to run against --------------------------------------------------------------
AO_CUDNN_LIBS=${AO_CUDNN_LIBS:-$(ao_cudnn_libs)}
echo "cudnn libraries: $AO_CUDNN_LIBS" >>"$out/env.txt"

# ---- the three questions as cases --------------------------------------------------------------
# Each line: <backend spec> <case line>.  B = default composite graph with logging.
B=cudnn-sdpa:log=1
U=cudnn-sdpa:impl=unified,pad_mask=auto,log=1
A=cudnn-sdpa:impl=auto,log=1
V=cudnn-sdpa:impl=unified,log=1
S=cudnn-sdpa:ragged_stats=0,log=1
bwd_cases() {  # the backward table under each spec
  local spec
  for spec in ${AO_BWD_SPECS:-$B cudnn-sdpa:deterministic=1,log=1 cudnn-sdpa:max_total=0,log=1 $S}; do
    grep -v '^#' scripts/device/bwd-table.case | grep . | sed "s|^|$spec |"
  done
}
pass=${AO_CUDNN_PASS:-fwd}
[[ $pass == fwd || $pass == bwd ]] || { echo "AO_CUDNN_PASS=$pass: fwd or bwd" >&2; exit 2; }
cases() { [[ $pass == bwd ]] && { bwd_cases; return; }; cat <<EOF
# Q1: TE-style padded THD, the ragged offsets bound per tensor
$B op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16
$B op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=fp16
$B op=sdpa lens=1,2,1,2 padded_offsets=0,2,4,7,9 dtype=bf16
$A op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16
$B op=sdpa docs=100,37,64,1,255 pad=3,17,0,5,9 tail=33 hq=8 hkv=2 dim=64 seed=21
$B op=sdpa docs=512,129,777 pad=64,1,0 tail=200 hq=16 hkv=16 dim=128 dtype=fp16 seed=22
$B op=sdpa docs=64*40 pad=1 tail=7 hq=4 hkv=1 dim=64 seed=23
# Q1: Q/O offsets different from K/V offsets (and O, stats offsets of their own)
$B op=sdpa q_lens=40,33,7 kv_lens=40,33,7 q_offsets=5,70,120,140 kv_offsets=0,45,100,110 hq=4 hkv=4 dim=64 seed=24
$B op=sdpa q_lens=40,33,7 kv_lens=40,33,7 q_offsets=5,70,120,140 kv_offsets=0,45,100,110 o_offsets=0,50,90 stats_offsets=3,60,100 hq=4 hkv=2 dim=64 seed=25
$B op=sdpa q_lens=17,64 kv_lens=80,3 q_pad=2,9 kv_pad=11,0 mask=none hq=8 hkv=2 dim=128 seed=26
# Q1: the single SDPA_FWD operation (unified) on the no-mask shape: uniform lengths with gaps
$U op=sdpa docs=128,128,128 pad=5,0,9 tail=17 mask=none hq=4 hkv=4 dim=64 poison=nan seed=27
$U op=sdpa docs=100,37,64 pad=3,7,29 tail=120 mask=none hq=8 hkv=2 dim=64 poison=nan seed=28
$U op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16
# Q2: NaN / Inf / large poison in pad slots and tail capacity
$B op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=nan seed=31
$B op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=nan mask=none seed=32
$B op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=nan dtype=fp16 seed=33
$B op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=inf seed=34
$B op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=large seed=35
$B op=sdpa docs=65,1 tail=191 mask=none poison=nan hq=2 hkv=1 dim=128 seed=36
$B op=sdpa docs=129,1,200 pad=127,63,0 tail=255 poison=nan hq=4 hkv=2 dim=64 mask=bottomright seed=37
# Q3: bottom-right alignment, q shorter than kv (the CP key-prefix shape)
$B op=sdpa q_lens=16,1,33 kv_lens=100,64,90 q_pad=4,0,3 kv_pad=2,5,0 mask=bottomright hq=8 hkv=2 dim=64 poison=nan seed=41
$B op=sdpa q_lens=1,1,1 kv_lens=100,37,64 mask=bottomright hq=8 hkv=2 dim=64 poison=nan seed=42
$B op=sdpa q_lens=64,128 kv_lens=1000,128 kv_pad=24,0 mask=bottomright hq=4 hkv=4 dim=128 dtype=fp16 poison=nan seed=43
$B op=sdpa q_lens=50 kv_lens=20 mask=bottomright hq=2 hkv=2 dim=64 seed=44
$B op=sdpa docs=1024,512 cp=4 rank=1 hq=8 hkv=2 dim=128 poison=nan seed=45
$B op=sdpa docs=4096 cp=8 rank=7 hq=4 hkv=1 dim=64 seed=46
$B op=sdpa lens=1000,300 padded_offsets=0,1024,1536 cp=4 rank=3 hq=4 hkv=2 dim=64 poison=nan seed=47
$B op=sdpa docs=300,200 pad=5 mask=causal window=64 hq=4 hkv=2 dim=64 poison=nan seed=48
$B op=sdpa q_lens=40,90 kv_lens=300,90 mask=bottomright window=32 hq=4 hkv=2 dim=64 poison=nan seed=49
# s_q = 1 with GQA (cudnn-frontend #1083 class): which heads get stats; MHA, s_q = 2, padded stats
$B op=sdpa q_lens=1*3 kv_lens=100,37,64 mask=bottomright hq=8 hkv=8 dim=64 seed=50
$B op=sdpa q_lens=2*3 kv_lens=100,37,64 mask=bottomright hq=8 hkv=2 dim=64 seed=51
$B op=sdpa q_lens=1*3 kv_lens=100,37,64 mask=none hq=8 hkv=2 dim=64 seed=52
$S op=sdpa q_lens=1*3 kv_lens=100,37,64 mask=bottomright hq=8 hkv=2 dim=64 seed=42
$S op=sdpa docs=1 hq=2 hkv=1 dim=8
$S op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 dtype=bf16
$S op=sdpa docs=100,37,64 pad=3,7,29 tail=120 hq=8 hkv=2 dim=64 poison=nan seed=31
# the single SDPA_FWD operation with seq lens + padding mask bound (cuDNN >= 9.15 takes them)
$V op=sdpa docs=128,128,128 pad=5,0,9 tail=17 mask=none hq=4 hkv=4 dim=64 poison=nan seed=27
$V op=sdpa q_lens=40,33,7 kv_lens=40,33,7 q_offsets=5,70,120,140 kv_offsets=0,45,100,110 o_offsets=0,50,90 stats_offsets=3,60,100 mask=none hq=4 hkv=2 dim=64 poison=nan seed=25
$V op=sdpa q_lens=1*3 kv_lens=100,37,64 mask=none hq=8 hkv=2 dim=64 seed=52
EOF
}

summary="$out/summary.tsv"
printf 'cudnn\tbackend\tverdict\tcase\treason\n' >"$summary"
# Gate lines look like "PASS    file:line  [backend]  0.12s  case line  (reason)": one summary row each.
summarise() {  # tag < gate output
  sed -n 's/^\(PASS\|FAIL\|SKIPPED\|ERROR\) *[^ ]*  \[\([^]]*\)\]  [0-9.]*s  \([^(]*[^ (]\)\( *(\(.*\))\)\?$/\1\t\2\t\3\t\5/p' |
    awk -v t="$1" -F'\t' '{printf "%s\t%s\t%s\t%s\t%s\n", t, $2, $1, $3, substr($4, 1, 300)}' >>"$summary"
}
# The question cases, grouped by backend spec into case files (one gate process per spec).
qdir="$out/questions"
mkdir -p "$qdir"
set -f
cases | grep -v '^#' | while read -r be line; do
  f="$qdir/$(echo "$be" | tr ':,=' '---').case"
  [[ -f "$f" ]] || echo "# backend: $be" >"$f"
  echo "$line" >>"$f"
done
set +f

found="$out/found"
mkdir -p "$found"
for spec in $AO_CUDNN_LIBS; do
  tag=${spec%%:*} dir=${spec#*:}
  log="$out/$tag.log"
  (
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ao_stamp "cuDNN set $tag from $dir"
    ldd "$bin/attn-oracle" | grep -E "cudnn|cudart|nvrtc|fmt"
    "$bin/attn-oracle" backends | grep -A1 cudnn
    ao_stamp "tests"
    if [[ -x "$bin/ao_cudnn_tests" ]]; then timeout 150 "$bin/ao_cudnn_tests" 2>&1 | tail -40; else echo "no ao_cudnn_tests binary"; fi
    ao_stamp "question cases"
    for f in "$qdir"/*.case; do
      be=$(sed -n '1s/^# backend: //p' "$f")
      timeout $([[ $pass == bwd ]] && echo 300 || echo 150) "$bin/attn-oracle" gate "$f" --backend "$be" --report-dir "$found/q-$tag-$(basename "$f" .case)" >"$out/gate.txt" 2>"$out/gate.err"
      echo "gate exit: $?"
      cat "$out/gate.err" "$out/gate.txt"; summarise "$tag" <"$out/gate.txt"  # log=1 lines go to stderr
    done
    ao_stamp "gate"
    shopt -s nullglob globstar
    corpus=(corpus/**/*.case)
    if [[ $pass == bwd ]]; then
      echo "pass=bwd: the corpus's forward cases are not gated"
    elif ((${#corpus[@]})) && "$bin/attn-oracle" gate --help >/dev/null 2>&1; then
      timeout 150 "$bin/attn-oracle" gate corpus --backend cudnn-sdpa --report-dir "$found/gate-$tag" >"$out/gate.txt" 2>&1
      echo "gate exit: $?"
      grep -v '^PASS' "$out/gate.txt"; summarise "$tag-corpus" <"$out/gate.txt"
    else
      echo "no corpus/*.case files or no gate subcommand: gate not run"
    fi
    ao_stamp "fuzz ${fuzz_s}s"
    if "$bin/attn-oracle" fuzz --help >/dev/null 2>&1; then
      timeout $((fuzz_s + 60)) "$bin/attn-oracle" fuzz --backend cudnn-sdpa --op sdpa --pass "$pass" --seed "${AO_FUZZ_SEED:-8008}" --budget "${fuzz_s}s" \
        --out "$found/fuzz-$tag" --max-failures 20 2>&1 | tail -60
      echo "fuzz exit: ${PIPESTATUS[0]}"
    else
      echo "no fuzz subcommand: fuzz not run"
    fi
    ao_stamp "done $tag"
  ) >"$log" 2>&1
  tail -3 "$log"
done

tar -czf "$out/found.tgz" -C "$out" found questions 2>/dev/null
rm -rf "$found" "$qdir" "$out/gate.txt" "$out/gate.err"
awk -F'\t' 'NR>1{n[$1" "$3]++} END{for(k in n) print k, n[k]}' "$summary" | sort
ao_stamp "campaign finished"
