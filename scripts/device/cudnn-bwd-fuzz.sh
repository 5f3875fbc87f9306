#!/usr/bin/env bash
# cudnn-sdpa backward on the device, one call: a list of jobs, each against one of the cuDNN libraries found
# (the system one, PyTorch's wheel one), run in order until the call's time is spent.
#   tests                  ao_cudnn_tests (the knobs' and the backward's unit tests)
#   diag                   gate:scripts/device/cudnn-bwd-diag.case (the plan each case got, and which
#                          variant of the NaN case still fails)
#   gate:FILE              gate FILE (a case file of the repository) under cudnn-sdpa:log=1
#   fuzz:SEED:SECONDS:DIMS fuzz --op sdpa --pass bwd; when the harness dies of a signal, the case its
#                          fatal-signal report names is run again alone (gate, log=1) to see whether it
#                          repeats.
# Usage (repo root): scripts/device/cudnn-bwd-fuzz.sh OUT "torch:tests torch:diag torch:fuzz:3:240:small ..."
#   AO_BIN_DIR (scripts/device/lib.sh): attn-oracle + ao_cudnn_tests from scripts/device/cudnn-pack.sh
#   AO_CUDNN_LIBS="sys:/usr/lib/x86_64-linux-gnu torch:<dir>" (default: lib.sh's ao_cudnn_libs)
# Writes OUT/env.txt, OUT/<tag>-<job>.txt per job, OUT/found.tgz (shrunk failures, gate reports).
set -uo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out=${1:?OUT}
jobs=${2:?jobs}
mkdir -p "$out/found"
ao_versions >"$out/env.txt" 2>&1
ao_use_bin
bin=$ao_bin
AO_CUDNN_LIBS=${AO_CUDNN_LIBS:-$(ao_cudnn_libs)}
declare -A libdir
for e in ${AO_CUDNN_LIBS:-}; do
  libdir[${e%%:*}]=${e#*:}
  echo "cudnn $e: $(ls "${e#*:}"/libcudnn.so.9.* 2>/dev/null | head -1 | xargs -r basename)" | sed "s#$HOME#~#" >>"$out/env.txt"
done
base_ld=${LD_LIBRARY_PATH:-}

for job in $jobs; do
  tag=${job%%:*}; what=${job#*:}
  if [[ -z "${libdir[$tag]:-}" ]]; then ao_stamp "$job: no cuDNN tagged $tag; skipped"; continue; fi
  export LD_LIBRARY_PATH="${libdir[$tag]}${base_ld:+:$base_ld}"
  name=$(echo "$tag-${what##*/}" | tr ':' '-')
  log=$out/$name.txt
  ao_stamp "$job"
  [[ $what == diag ]] && what=gate:scripts/device/cudnn-bwd-diag.case  # named "<tag>-diag" all the same
  case $what in
    tests)
      timeout 300 "$bin/ao_cudnn_tests" >"$log" 2>&1
      echo "exit: $?" >>"$log"; tail -4 "$log" ;;
    gate:*)
      timeout 300 "$bin/attn-oracle" gate "${what#gate:}" --backend cudnn-sdpa:log=1 \
        --report-dir "$out/found/gate-$tag-$(basename "${what#gate:}" .case)" >"$log" 2>&1
      echo "exit: $?" >>"$log"; grep -E "^(PASS|FAIL|SKIP|ERROR)|fatal signal|exit:" "$log" | cut -c1-200 ;;
    fuzz:*)
      IFS=: read -r _ seed secs dims <<<"$what"
      args=(fuzz --backend cudnn-sdpa --op sdpa --pass bwd --seed "$seed" --dims "${dims:-small}"
            --out "$out/found/$name" --max-failures 20)
      timeout $((secs + 90)) "$bin/attn-oracle" "${args[@]}" --budget "${secs}s" >"$log" 2>&1
      rc=$?; echo "exit: $rc" >>"$log"
      crash=$(grep -o "fatal signal [A-Z]* while running .*" "$log" | head -1)
      if [[ $rc -ge 128 && -n "$crash" ]]; then
        ao_stamp "$crash"
        line=$(sed 's/.* while running //' <<<"$crash" | grep -o "op=.*")
        if [[ -n "$line" ]]; then
          printf '%s\n' "$line" >"$out/found/$name-crash.case"
          timeout 120 "$bin/attn-oracle" gate "$out/found/$name-crash.case" --backend cudnn-sdpa:log=1 \
            >"$out/$name-crash-again.txt" 2>&1
          echo "exit: $?" >>"$out/$name-crash-again.txt"; tail -3 "$out/$name-crash-again.txt"
        fi
      fi
      grep -E "cases|failed|signature" "$log" | tail -6 ;;
    *) ao_stamp "$job: unknown job" ;;
  esac
done
# One archive for the shrunk cases and gate reports (what comes back from a device call is limited in file
# count and folder depth).
tar -czf "$out/found.tgz" -C "$out" found && rm -rf "$out/found"
ao_stamp done
