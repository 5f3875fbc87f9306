# shellcheck shell=bash
# Sourced by every device campaign and pack script in scripts/device/ (not run on its own):
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It moves to the repository root and sets:
#   ao_root   the repository root
#   ao_bin    the one binary folder (absolute): AO_BIN_DIR, default .deps/device-bin (git-ignored). A pack
#             script fills it here (ao_pack), the device call carries it, a campaign runs from it:
#             attn-oracle and the test binaries beside it, lib/ with the shared libraries they link that a
#             device image without Debian's -dev packages lacks.
#   AO_LIMIT_*  the lending machine's limits (AO_LIMIT_CALL_S, AO_LIMIT_FILES_BACK, ...), from the one table of
#             scripts/device/runner.py (`runner.py limits --sh`)
# and defines ao_stamp, ao_time_left, ao_runnable, ao_use_bin, ao_pack, ao_cudnn_libs and ao_versions (below).
# A campaign that is a list of gates, fuzz runs and tables is a plan of scripts/device/plans/ run by
# runner.py instead; these are for the campaigns still in bash.
ao_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ao_root" || exit 1
ao_bin=${AO_BIN_DIR:-.deps/device-bin}
[[ "$ao_bin" == /* ]] || ao_bin="$ao_root/$ao_bin"
eval "$(python3 "$ao_root/scripts/device/runner.py" limits --sh)"
ao_t0=$SECONDS

# ao_stamp MSG...: MSG after the seconds since lib.sh was sourced.
ao_stamp() { echo "[$(( SECONDS - ao_t0 ))s] $*"; }

# ao_time_left NEED [WHAT]: true when a step expected to take NEED seconds still fits in the campaign's budget
# (AO_BUDGET_S, default a call's seconds less the runner's margin for packing); else prints WHAT as skipped,
# also into $ao_skipped_file when set, and is false.
ao_time_left() {
  local left=$(( ${AO_BUDGET_S:-$((AO_LIMIT_CALL_S - AO_LIMIT_MARGIN_S))} - (SECONDS - ao_t0) ))
  ((left >= $1)) && return 0
  echo "skipped (needs ~$1 s, $left s left): ${2:-}" | tee -a "${ao_skipped_file:-/dev/null}"
  return 1
}

# ao_gate DEST NAME CASES BACKEND...: `attn-oracle gate CASES` ($AO, default $ao_bin/attn-oracle) on each
# BACKEND, its output in DEST/gate-NAME.txt and its report in DEST/report-NAME.json, stopped after
# AO_GATE_TIMEOUT_S (default: what is left of the budget of ao_time_left); prints one line: exit, seconds, the
# gate's summary. (A campaign that is only gates and expectations is a plan of runner.py instead.)
ao_gate() {
  local dest=$1 name=$2 file=$3 s=$SECONDS b rdir limit args=()
  shift 3
  for b in "$@"; do args+=(--backend "$b"); done
  limit=${AO_GATE_TIMEOUT_S:-$(( ${AO_BUDGET_S:-$((AO_LIMIT_CALL_S - AO_LIMIT_MARGIN_S))} - (SECONDS - ao_t0) ))}
  ((limit >= 10)) || limit=10  # timeout 0 would mean no limit
  rdir=$(mktemp -d)
  timeout "$limit" "${AO:-$ao_bin/attn-oracle}" gate "$file" "${args[@]}" --report-dir "$rdir/report" \
    >"$dest/gate-$name.txt" 2>&1
  echo "gate $name: exit $? in $((SECONDS - s)) s ($(tail -1 "$dest/gate-$name.txt"))"
  cp "$rdir/report/report.json" "$dest/report-$name.json" 2>/dev/null
  rm -rf "$rdir"
}

# ao_runnable FILE: true when FILE is an executable whose shared libraries are all found.
ao_runnable() { [[ -x "$1" ]] && ! ldd "$1" 2>/dev/null | grep -q "not found"; }

# ao_use_bin: appends $ao_bin/lib (and PyTorch's wheel folders for NCCL and nvrtc, which an image may hold
# only there) to LD_LIBRARY_PATH. Appended, not prepended: the image's own CUDA, cuDNN and libstdc++ win
# wherever it has them.
ao_use_bin() {
  local d
  for d in "$ao_bin/lib" /opt/torch/.venv/lib/python3*/site-packages/nvidia/{nccl,cuda_nvrtc,cu13}/lib; do
    [[ -d "$d" ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
  done
  return 0
}

# ao_pack BINARY...: copies the built binaries into a fresh $ao_bin and the shared libraries they link
# into $ao_bin/lib, except glibc, libstdc++/libgcc (every image has them) and CUDA, cuDNN, nvrtc and NCCL
# (the image has its own, or PyTorch's wheels do; NCCL alone is 218 MB).
ao_pack() {
  local b lib
  rm -rf "$ao_bin"; mkdir -p "$ao_bin/lib"
  cp "$@" "$ao_bin/"
  for b in "$@"; do
    ldd "$ao_bin/$(basename "$b")" | awk '/=> \//{print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
        libcuda.so*|libcudart*|libcudnn*|libnvrtc*|libnccl*) ;;
        *) cp -L -n "$lib" "$ao_bin/lib/" ;;
      esac
    done
  done
  du -sh "$ao_bin"; ls "$ao_bin" "$ao_bin/lib"
}

# ao_cudnn_libs: the cuDNN libraries a campaign runs against, as "sys:<dir> torch:<dir>": the system's
# libcudnn.so.9 and the one in PyTorch's wheel, where found.
ao_cudnn_libs() {
  local sys d libs=""
  sys=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
  [[ -z "$sys" ]] && sys=$(ls /usr/local/cuda/lib64/libcudnn.so.9 /usr/lib/x86_64-linux-gnu/libcudnn.so.9 2>/dev/null | head -1)
  [[ -n "$sys" ]] && libs="sys:$(dirname "$(readlink -f "$sys")")"
  for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib; do
    [[ -e "$d/libcudnn.so.9" ]] && libs="$libs torch:$d"
  done
  echo "$libs"
}

# ao_versions: the version header every campaign writes first (scripts/device/runner.py versions: date, commit,
# GPU, CUDA, cuDNN, torch, numpy, Python, OS, CPU and the binary folder, $ao_bin); it never fails.
ao_versions() { PY=${PY:-python3} python3 "$ao_root/scripts/device/runner.py" versions --bin "$ao_bin"; }
