#!/usr/bin/env bash
# Packs the Python wheels that scripts/device/real-kernels-campaign.sh needs on the device (which reaches
# no registry) into .whl/ (git-ignored), within the 64 MiB carry limit of one device call:
#   .whl/dsl-cu13.tar.xz  nvidia-cutlass-dsl-libs-cu13 (a 92 MB wheel), unpacked, tar | xz -9  -> CALL=1
#   .whl/rest.tar.xz      the other wheels as they are (.whl files), tar | xz -9              -> CALL=2
#   .whl/ao-bin.tar.xz    the attn-oracle of scripts/device/lib.sh's binary folder (AO_BIN_DIR, default
#                         .deps/device-bin; made by scripts/device/gpu-pack.sh or --bin) with its lib/  -> CALL=2
# The wheels are the pinned ones the adapters' registry lists for the adapters served here (cudnn_fe_indexer,
# cudnn_fe_sdpa, fa4_varlen, megatron_dsa: `python -m attn_oracle.adapters list --json`, "wheels"; PY, default python3,
# needs numpy to list them). Versions: nvidia-cudnn-frontend 1.32.0 (requires nvidia-cutlass-dsl[cu13]>=4.8.0, apache-tvm-ffi>=0.1.11);
# nvidia-cutlass-dsl 4.8.1, whose METADATA pins libs-base==4.8.1 and (extra cu13) libs-cu13==4.8.1;
# libs-base pins libs-core==4.8.1. FlashAttention-4: flash-attn-4 4.0.0b36 (a pre-release; requires
# nvidia-cutlass-dsl>=4.6.2, apache-tvm-ffi<0.2,>=0.1.11, torch-c-dlpack-ext, quack-kernels>=0.5.3, einops,
# torch; the device image has torch 2.11 and einops), quack-kernels 0.6.5, torch-c-dlpack-ext 0.1.5. The meta wheel's unconditional libs-cu12 is left out on purpose: the
# device's torch is built for CUDA 13 and libs-cu12/-cu13 provide the same package folder.
# With --bin it first builds the CPU-only attn-oracle for the device (no BLAS, no tests) into that binary
# folder with the libfmt/libgomp it links in lib/ (the device image has neither).
# Usage: scripts/device/real-kernels-pack.sh [--bin]   (needs pip and network; prints the sizes)
set -euo pipefail
# shellcheck source=scripts/device/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ "${1:-}" == --bin ]]; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  cmake -S . -B build-device-bin -DCMAKE_BUILD_TYPE=Release -DAO_BLAS=OFF -DAO_BUILD_TESTS=OFF -DAO_WITH_CUDA=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
  cmake --build build-device-bin -j2 --target attn-oracle > /dev/null
  ao_pack build-device-bin/attn-oracle
fi
dest=.whl
limit=$(( (AO_LIMIT_CARRY_MIB - 2) * 1024 * 1024 ))  # leaves room under one call's carry limit
plat=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64)
mapfile -t wheels < <(PYTHONPATH=python "${PY:-python3}" -c '
import json, subprocess, sys
names = ("cudnn_fe_indexer", "cudnn_fe_sdpa", "fa4_varlen", "megatron_dsa")
listed = json.loads(subprocess.run([sys.executable, "-m", "attn_oracle.adapters", "list", "--json"],
                                   check=True, capture_output=True, text=True).stdout)
print("\n".join(sorted({w for a in listed if a["name"] in names for w in a["wheels"]})))')
big=""; rest=()
for w in "${wheels[@]}"; do
  if [[ $w == nvidia-cutlass-dsl-libs-cu13==* ]]; then big=$w; else rest+=("$w"); fi
done
[[ -n "$big" && ${#rest[@]} -gt 0 ]] || { echo "real-kernels-pack: no wheels from the adapters' registry (PY=${PY:-python3} needs numpy to list them)" >&2; exit 1; }

mkdir -p "$dest/wheels"
for p in "${rest[@]}" "$big"; do
  pip download -q --pre "${plat[@]}" -d "$dest/wheels" "$p"
done
ls -l "$dest/wheels"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cu13=$(ls "$dest"/wheels/nvidia_cutlass_dsl_libs_cu13-"${big#*==}"-*.whl)
if [[ -f "$dest/dsl-cu13.tar.xz" && "$dest/dsl-cu13.tar.xz" -nt "$cu13" ]] && xz -t "$dest/dsl-cu13.tar.xz"; then
  echo "$dest/dsl-cu13.tar.xz is newer than the wheel and intact: kept (xz -9 of 226 MiB takes minutes)"
else
  mkdir "$work/cu13"
  unzip -q "$cu13" -d "$work/cu13"
  tar -C "$work/cu13" -cf - . | xz -9 -T1 > "$dest/dsl-cu13.tar.xz.part"
  mv "$dest/dsl-cu13.tar.xz.part" "$dest/dsl-cu13.tar.xz"
fi
mkdir "$work/rest"
for p in "${rest[@]}"; do
  n=${p%%==*}; n=${n//-/_}
  cp "$dest"/wheels/"$n"-*.whl "$work/rest/"
done
tar -C "$work/rest" -cf - . | xz -9 -T1 > "$dest/rest.tar.xz"
packed=("$dest/dsl-cu13.tar.xz" "$dest/rest.tar.xz")
if [[ -x "$ao_bin/attn-oracle" ]]; then  # the device's oracle: carried compressed (libopenblas is 36 MB)
  tar -C "$ao_bin" -cf - attn-oracle lib | xz -6 -T2 > "$dest/ao-bin.tar.xz"
  packed+=("$dest/ao-bin.tar.xz")
else
  echo "real-kernels-pack: no $ao_bin/attn-oracle (scripts/device/gpu-pack.sh or --bin): CALL=2 needs the binary folder or a build" >&2
fi
# CALL=2 carries rest + ao-bin together: their sum must fit beside the working tree too.
two=$(( $(stat -c %s "$dest/rest.tar.xz") + $( [[ -f "$dest/ao-bin.tar.xz" ]] && stat -c %s "$dest/ao-bin.tar.xz" || echo 0) ))
printf 'CALL=2 carry: %d bytes (%.1f MiB)\n' "$two" "$(echo "$two / 1048576" | bc -l)"
(( two < limit )) || { echo "real-kernels-pack: CALL=2's carry ($two bytes) is over $limit" >&2; exit 1; }

for f in "${packed[@]}"; do
  size=$(stat -c %s "$f")
  printf '%s: %d bytes (%.1f MiB)\n' "$f" "$size" "$(echo "$size / 1048576" | bc -l)"
  if (( size >= limit )); then
    echo "real-kernels-pack: $f is $size bytes, over the $limit-byte budget of one device call" >&2
    exit 1
  fi
done
