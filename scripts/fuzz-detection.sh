#!/usr/bin/env bash
# Detection power of `attn-oracle fuzz` against every cpu-bug:* model that `attn-oracle backends`
# lists: for each model and seeds 1..N, a campaign runs until its first failure (--max-failures 1,
# shrunk with --shrink-runs), capped by --budget. Prints a Markdown table of the median
# cases-to-detection, seconds-to-detection (before shrinking), shrink steps and shrunk line length
# (characters of the canonical line), plus one shrunk line.
# Usage: scripts/fuzz-detection.sh [--ao PATH] [--seeds N] [--budget 30s|N] [--dims small|glm] [--models a,b,...]
# (--models: only these models, by name with or without the cpu-bug: prefix; default every model)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ao="$here/build/attn-oracle" seeds=10 budget=30s dims=small only=""
while (($#)); do
  case "$1" in
    --ao) ao=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --dims) dims=$2; shift 2 ;;
    --models) only=$2; shift 2 ;;
    *) echo "fuzz-detection.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
models=$("$ao" backends | awk '$1 ~ /^cpu-bug:/ {print $1}')
if [[ -n "$only" ]]; then
  wanted=""
  for m in ${only//,/ }; do
    m=cpu-bug:${m#cpu-bug:}
    grep -qxF -- "$m" <<<"$models" || { echo "fuzz-detection.sh: --models: unknown model $m" >&2; exit 2; }
    wanted+="$m"$'\n'
  done
  models=$wanted
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "| model | detected | median cases | median seconds | median shrink steps | median shrunk chars | example shrunk case (seed 1) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for m in $models; do
  : > "$tmp/cases"; : > "$tmp/secs"; : > "$tmp/steps"; : > "$tmp/chars"; found=0; example=""
  for s in $(seq 1 "$seeds"); do
    out=$("$ao" fuzz --backend "$m" --seed "$s" --budget "$budget" --dims "$dims" --max-failures 1 \
            --shrink-runs 150 --no-save 2>/dev/null || true)
    res=$(grep '^fuzz-result' <<<"$out" || true)
    fc=$(sed -n 's/.*first_failure_case=\(-\?[0-9]*\).*/\1/p' <<<"$res")
    [[ -z "$fc" || "$fc" == "-1" ]] && continue
    found=$((found + 1))
    echo "$fc" >> "$tmp/cases"
    sed -n 's/.*first_failure_seconds=\([0-9.]*\).*/\1/p' <<<"$res" >> "$tmp/secs"
    sed -n 's/^    shrunk (\([0-9]*\) steps.*/\1/p' <<<"$out" | head -1 >> "$tmp/steps"
    line=$(sed -n 's/^    shrunk ([^)]*): //p' <<<"$out" | head -1)
    echo "${#line}" >> "$tmp/chars"
    [[ -z "$example" ]] && example=$line
  done
  echo "| $m | $found/$seeds | $(median < "$tmp/cases") | $(median < "$tmp/secs") | $(median < "$tmp/steps") | $(median < "$tmp/chars") | \`$example\` |"
done
