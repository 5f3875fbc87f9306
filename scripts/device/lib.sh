# shellcheck shell=bash
# Sourced by every device campaign and pack script in scripts/device/ (not run on its own):
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It moves to the repository root and sets:
#   ao_root   the repository root
#   ao_bin    the one binary folder (absolute): AO_BIN_DIR, default .deps/device-bin (git-ignored). A pack
#             script fills it here (ao_pack), the device call carries it, a campaign runs from it:
#             attn-oracle and the test binaries beside it, lib/ with the shared libraries they link that a
#             device image without Debian's -dev packages lacks.
# and defines ao_runnable, ao_use_bin, ao_pack, ao_cudnn_libs and ao_versions (below).
ao_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ao_root" || exit 1
ao_bin=${AO_BIN_DIR:-.deps/device-bin}
[[ "$ao_bin" == /* ]] || ao_bin="$ao_root/$ao_bin"

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

# ao_versions: the version header every campaign writes first: date, commit, GPU (name, driver, memory),
# CUDA (the driver's and nvcc's), cuDNN (the system's and PyTorch's), torch, numpy, Python, OS, CPU and the
# binary folder. Lines for what the machine lacks say so; it never fails.
ao_versions() {
  local py=${PY:-python3} sys_cudnn
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null) ($(git status --porcelain 2>/dev/null | wc -l) changed paths)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /' | grep . || echo "gpu: none (no nvidia-smi answer)"
  echo "cuda (driver): $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | cut -d' ' -f3)"
  echo "cuda (nvcc): $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*')"
  sys_cudnn=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
  echo "cudnn (system): ${sys_cudnn:-none}${sys_cudnn:+ -> $(readlink -f "$sys_cudnn")}"
  "$py" -c 'import torch, numpy; print("torch:", torch.__version__, "cuda:", torch.version.cuda, "cudnn (torch):", torch.backends.cudnn.version(), "numpy:", numpy.__version__)' 2>/dev/null ||
    echo "torch: not importable by $py"
  echo "python: $("$py" --version 2>&1)"
  echo "os: $(grep PRETTY_NAME /etc/os-release 2>/dev/null | cut -d= -f2 | tr -d '"')"
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "binaries: ${ao_bin/#$ao_root/<checkout>}"  # no machine-specific path in a committed report
}
