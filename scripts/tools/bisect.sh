#!/usr/bin/env bash
# Drives `git bisect run` with `attn-oracle bisect-run` as the step: at each commit the kernel
# library is built, then the case is checked; exit 0 good, 1 bad, 125 skip (the build failed).
#
#   scripts/tools/bisect.sh --repo DIR --good REV --bad REV --case 'CASE LINE or FILE' \
#                     [--build 'CMD'] [--backend 'SPEC'] [--ao PATH]
#   scripts/tools/bisect.sh --demo          # a throwaway repo whose commit 5 of 8 introduces the bug
#   scripts/tools/bisect.sh --plugin-demo   # the same with a real plugin library built at each commit
#   scripts/tools/bisect.sh --repo DIR ... --build 'CMD' --plugin build/libkernel.so   # plugin mode
#
# --build runs in DIR at each commit (default: none); a failing build skips the commit (125).
# --plugin LIB (a path in DIR): the backend is plugin:DIR/LIB[:--plugin-knobs]. At each commit a
# failing build, a missing library, a library that does not load (another ABI version, a missing
# symbol) and a crash or a signal of the step all map to 125 (skip), never to an aborted bisect.
# --backend is evaluated in DIR after the build, so it may read what the commit built or configured:
#   plugin library (once the plugin: backend exists): --backend 'plugin:$PWD/build/libkernel.so'
#   demo (a bug model toggled by an environment variable that the commit's kernel.env sets):
#                                                      --build '. ./kernel.env' --backend '$KERNEL_BACKEND'
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
ao="${AO:-$here/build/attn-oracle}"
repo="" good="" bad="" case_="" build=":" backend='$KERNEL_BACKEND' demo=0 plugin="" plugin_knobs="" plugin_demo=0
while (($#)); do
  case "$1" in
    --repo) repo=$2; shift 2 ;;
    --good) good=$2; shift 2 ;;
    --bad) bad=$2; shift 2 ;;
    --case) case_=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --ao) ao=$2; shift 2 ;;
    --demo) demo=1; shift ;;
    --plugin) plugin=$2; shift 2 ;;
    --plugin-knobs) plugin_knobs=$2; shift 2 ;;
    --plugin-demo) plugin_demo=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bisect.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$ao" ]] || { echo "bisect.sh: attn-oracle not found at $ao (build it, or pass --ao)" >&2; exit 2; }
ao=$(cd "$(dirname "$ao")" && pwd)/$(basename "$ao")

expected=""
if ((demo)); then
  # A stand-in "kernel library": each commit's kernel.env says which kernel build it produces.
  # Commit 5 introduces the seed's defect (top-left mask on CP chunks) as the cpu-bug model.
  repo=$(mktemp -d)
  trap 'rm -rf "$repo"' EXIT
  git -C "$repo" init -q
  export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.invalid GIT_COMMITTER_NAME=demo
  export GIT_COMMITTER_EMAIL=demo@example.invalid
  for i in 1 2 3 4 5 6 7 8; do
    if ((i < 5)); then spec=cpu-ref; else spec=cpu-bug:topleft-cp; fi
    echo "KERNEL_BACKEND=$spec" > "$repo/kernel.env"
    echo "change $i" >> "$repo/CHANGES"
    msg="commit $i"; ((i == 5)) && msg="commit 5: introduce chunk-local causal mask"
    git -C "$repo" add kernel.env CHANGES
    git -C "$repo" commit -q -m "$msg"
    ((i == 1)) && good=$(git -C "$repo" rev-parse HEAD)
    ((i == 5)) && expected=$(git -C "$repo" rev-parse HEAD)
  done
  bad=$(git -C "$repo" rev-parse HEAD)
  case_="op=indexer docs=1024,512 cp=8 rank=5 heads=4 dim=32 topk=64 seed=7"
  build='. ./kernel.env'
  backend='$KERNEL_BACKEND'
fi
if ((plugin_demo)); then
  # A throwaway repo of plugin sources (the CPU example plugin and the ABI header), built at each
  # commit with the system C++ compiler. Commit 3 drops the segments' causal offsets (the seed's
  # defect: the first bad commit); commits 5, 6 and 7 do not build, report another ABI version and
  # crash: each must be skipped (125), none may abort the bisect or take the blame.
  repo=$(mktemp -d)
  trap 'rm -rf "$repo"' EXIT
  git -C "$repo" init -q
  export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.invalid GIT_COMMITTER_NAME=demo
  export GIT_COMMITTER_EMAIL=demo@example.invalid
  mkdir -p "$repo/include/attn_oracle/backends"
  cp "$here/oracle/include/attn_oracle/backends/plugin.h" "$repo/include/attn_oracle/backends/"
  cp "$here/oracle/tests/plugins/example_plugin.cpp" "$repo/kernel.cpp"
  echo 'mkdir -p build && ${CXX:-c++} -std=c++20 -O1 -shared -fPIC -Iinclude $(cat abi.flags 2>/dev/null) -o build/libkernel.so kernel.cpp' > "$repo/build.sh"
  k="$repo/kernel.cpp"
  commit() { git -C "$repo" add -A && git -C "$repo" commit -q -m "$1"; }
  commit "commit 1: kernel library"; good=$(git -C "$repo" rev-parse HEAD)
  echo "// tuning notes" >> "$k"; commit "commit 2: notes"
  sed -i 's/const int64_t pos = topleft ? i : s.pos0 + i;/const int64_t pos = i;/' "$k"
  grep -q 'const int64_t pos = i;' "$k" || { echo "bisect.sh: plugin demo could not inject the bug" >&2; exit 1; }
  commit "commit 3: simplify row positions (drops q_causal_offsets)"; expected=$(git -C "$repo" rev-parse HEAD)
  echo "// more notes" >> "$k"; commit "commit 4: notes"
  echo "this is not C++;" >> "$k"; commit "commit 5: work in progress (does not build)"; skips=$(git -C "$repo" rev-parse HEAD)
  sed -i '$d' "$k"; echo "-DAO_EXAMPLE_ABI=7" > "$repo/abi.flags"; commit "commit 6: builds, but against ABI 7"; skips+=" $(git -C "$repo" rev-parse HEAD)"
  rm "$repo/abi.flags"
  sed -i 's|^int ao_plugin_run(const ao_layout\* l, const ao_tensors\* t, const char\* knobs, char\* msg, size_t n) {|&\n  if (l->cp > 1) abort();|' "$k"
  grep -q 'abort();' "$k" || { echo "bisect.sh: plugin demo could not inject the crash" >&2; exit 1; }
  commit "commit 7: debug assert (crashes)"; skips+=" $(git -C "$repo" rev-parse HEAD)"
  sed -i '/if (l->cp > 1) abort();/d' "$k"; commit "commit 8: remove the assert"
  echo "// even more notes" >> "$k"; commit "commit 9: notes"
  bad=$(git -C "$repo" rev-parse HEAD)
  case_="op=indexer docs=1024,512 cp=8 rank=5 heads=4 dim=32 topk=64 seed=7"
  build='sh ./build.sh'
  plugin=build/libkernel.so
fi
[[ -n "$repo" && -n "$good" && -n "$bad" && -n "$case_" ]] || { echo "bisect.sh: need --repo --good --bad --case (or --demo)" >&2; exit 2; }
[[ -f "$case_" ]] && case_=$(cd "$(dirname "$case_")" && pwd)/$(basename "$case_")

step=$(mktemp)
if [[ -n "$plugin" ]]; then
  cat > "$step" <<STEP
#!/usr/bin/env bash
# One bisect step in plugin mode (generated by scripts/tools/bisect.sh).
cd "$repo"
rm -f $(printf '%q' "$plugin")
{ $build ; } >/dev/null 2>&1 || { echo "skip: build failed"; exit 125; }
[[ -f $(printf '%q' "$plugin") ]] || { echo "skip: the build made no $(printf '%q' "$plugin")"; exit 125; }
spec="plugin:\$PWD/$(printf '%q' "$plugin")${plugin_knobs:+:$plugin_knobs}"
out=\$("$ao" bisect-run $(printf '%q' "$case_") --backend "\$spec" --crash-is-skip 2>&1); rc=\$?
if ((rc == 128)) && [[ "\$out" == *"'backend' = "* ]]; then
  echo "skip: the library does not load at this commit: \$out"; exit 125
fi
echo "\$out"
((rc > 128)) && { echo "skip: the step died (exit \$rc)"; exit 125; }
exit \$rc
STEP
else
cat > "$step" <<STEP
#!/usr/bin/env bash
# One bisect step (generated by scripts/tools/bisect.sh).
cd "$repo"
{ $build ; } >/dev/null 2>&1 || { echo "skip: build failed"; exit 125; }
spec="$backend"
exec "$ao" bisect-run $(printf '%q' "$case_") --backend "\$spec"
STEP
fi
chmod +x "$step"
log=$(mktemp)
cd "$repo"
git bisect start "$bad" "$good" >/dev/null
set +e
git bisect run "$step" > "$log" 2>&1
rc=$?
set -e
first=$(grep -oE '^[0-9a-f]{40} is the first bad commit' "$log" | cut -d' ' -f1 || true)
grep -E '^(good|bad|skip|abort):' "$log" | sed 's/^/  step: /' || true
git bisect reset >/dev/null 2>&1 || true
skip_ok=1
for rev in ${skips:-}; do  # plugin demo: the step on each broken commit must say skip (125)
  git -C "$repo" checkout -q "$rev"
  set +e; line=$("$step" 2>&1 | tail -1); src=${PIPESTATUS[0]}; set -e
  echo "  check: $(git -C "$repo" log -1 --format=%s "$rev") -> exit $src: $line"
  ((src == 125)) || skip_ok=0
done
rm -f "$step"
((skip_ok)) || { echo "bisect.sh: a broken commit was not skipped" >&2; exit 1; }
if [[ $rc -ne 0 || -z "$first" ]]; then
  cat "$log" >&2; rm -f "$log"
  echo "bisect.sh: git bisect run did not finish (exit $rc)" >&2
  exit 1
fi
rm -f "$log"
echo "first bad commit: $first $(git -C "$repo" log -1 --format=%s "$first")"
if [[ -n "$expected" ]]; then
  if [[ "$first" == "$expected" ]]; then echo "demo: bisect named the commit that introduced the bug"; exit 0; fi
  echo "demo: WRONG commit (expected $expected)" >&2; exit 1
fi
