#!/usr/bin/env bash
# Detection power of `attn-oracle fuzz` against every cpu-bug:* model that `attn-oracle backends`
# lists (or --models a,b): for each model and seeds 1..N, a campaign runs until its first failure
# (--max-failures 1, shrunk with --shrink-runs), capped by --budget. Prints a Markdown table of the
# median cases-to-detection, seconds-to-detection (before shrinking), shrink steps, shrunk line length
# (characters of the canonical line) and shrunk document count, plus one shrunk line; the worst seed's
# cases and seconds beside the medians (a miss counts as the budget). The target (found on every seed,
# median <= 20 cases, worst seed <= 100 cases, shrunk to <= 3 documents) is checked per model.
# --jobs N runs N campaigns at once (each campaign is single-threaded: OMP_NUM_THREADS=1), so the
# seconds are per campaign on one core. --catalog-out DIR writes DIR/<model>.case: the shortest
# shrunk case over the seeds with `# catches: cpu-bug:<model>` (corpus/catalog/). --shrink-runs N
# (default 150) bounds each shrink; 0 skips shrinking (cases to detection only, much cheaper).
# --campaign mix (default): every campaign draws the generator's mix of ops and passes. --campaign model:
# each model is fuzzed the way a user fuzzes the kernel it stands for: `--op` the model's one op (a model
# of both ops keeps the mix) and `--pass bwd` when every trigger case of its catalog entry is a backward
# case (a backward kernel's campaign), from `attn-oracle catalog --json`.
# Usage: scripts/tools/fuzz-detection.sh [--ao PATH] [--seeds N] [--budget 60s|N] [--dims small|glm]
#          [--models a,b] [--jobs N] [--shrink-runs N] [--catalog-out DIR] [--campaign mix|model]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
ao="$here/build/attn-oracle" seeds=10 budget=60s dims=small models="" jobs=1 catalog="" shrink_runs=150 campaign=mix
while (($#)); do
  case "$1" in
    --ao) ao=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --dims) dims=$2; shift 2 ;;
    --models) models=${2//,/ }; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --catalog-out) catalog=$2; shift 2 ;;
    --shrink-runs) shrink_runs=$2; shift 2 ;;
    --campaign) campaign=$2; shift 2 ;;
    *) echo "fuzz-detection.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
all=$("$ao" backends | awk '$1 ~ /^cpu-bug:/ {sub(/^cpu-bug:/, "", $1); print $1}')
if [[ -n "$models" ]]; then  # by name, with or without the cpu-bug: prefix; an unknown name is bad input
  wanted=""
  for m in $models; do
    m=${m#cpu-bug:}
    grep -qxF -- "$m" <<<"$all" || { echo "fuzz-detection.sh: --models: unknown model $m" >&2; exit 2; }
    wanted+="$m "
  done
  models=$wanted
else
  models=$all
fi
[[ $campaign == mix || $campaign == model ]] || { echo "fuzz-detection.sh: --campaign: mix or model, not '$campaign'" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ao budget dims tmp shrink_runs
# $tmp/<model>.args: the campaign's extra fuzz arguments (--campaign model).
if [[ $campaign == model ]]; then
  "$ao" catalog --json | python3 -c '
import json, sys
for m in json.load(sys.stdin)["models"]:
    args = ["--op", m["ops"][0]] if len(m["ops"]) == 1 else []
    if m["triggers"] and all(" pass=bwd" in " " + t["case"] for t in m["triggers"]):
        args += ["--pass", "bwd"]
    open(sys.argv[1] + "/" + m["id"] + ".args", "w").write(" ".join(args) + "\n")  # read -a wants the newline
' "$tmp"
fi

# One campaign: model $1, seed $2 -> $tmp/<model>.<seed> holding "cases secs steps chars docs" and the line.
one() {
  local m=$1 s=$2 out res fc line docs extra=()
  [[ -f "$tmp/$m.args" ]] && read -r -a extra < "$tmp/$m.args"
  out=$(OMP_NUM_THREADS=1 "$ao" fuzz --backend "cpu-bug:$m" --seed "$s" --budget "$budget" --dims "$dims" \
          --max-failures 1 --shrink-runs "$shrink_runs" --no-save "${extra[@]}" 2>/dev/null || true)
  res=$(grep '^fuzz-result' <<<"$out" || true)
  fc=$(sed -n 's/.*first_failure_case=\(-\?[0-9]*\).*/\1/p' <<<"$res")
  [[ -z "$fc" || "$fc" == "-1" ]] && { echo "miss" > "$tmp/$m.$s"; return 0; }
  line=$(sed -n 's/^    shrunk ([^)]*): //p' <<<"$out" | head -1)
  # documents of the shrunk line: elements of docs=/lens=/q_lens= (v*n counts n)
  docs=$(tr ' ' '\n' <<<"$line" | awk -F= '$1=="docs"||$1=="lens"||$1=="q_lens"{n=split($2,a,","); t=0;
           for(i=1;i<=n;i++){k=index(a[i],"*"); t+= k ? substr(a[i],k+1) : 1} print t; exit}')
  printf '%s %s %s %s %s\n%s\n' "$fc" "$(sed -n 's/.*first_failure_seconds=\([0-9.]*\).*/\1/p' <<<"$res")" \
    "$(sed -n 's/^    shrunk (\([0-9]*\) steps.*/\1/p' <<<"$out" | head -1)" "${#line}" "${docs:-1}" "$line" > "$tmp/$m.$s"
}
export -f one
for m in $models; do for s in $(seq 1 "$seeds"); do echo "$m $s"; done; done |
  xargs -P "$jobs" -L 1 bash -c 'one "$0" "$1"'

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
[[ -n "$catalog" ]] && mkdir -p "$catalog"
echo "| model | detected | median cases | worst cases | median seconds | worst seconds | median shrink steps | median shrunk chars | max docs | meets the target | example shrunk case (shortest) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for m in $models; do
  found=0 best="" bestlen=999999
  : > "$tmp/c"; : > "$tmp/t"; : > "$tmp/st"; : > "$tmp/ch"; : > "$tmp/d"
  for s in $(seq 1 "$seeds"); do
    f="$tmp/$m.$s"
    [[ -f "$f" && "$(head -1 "$f")" != "miss" ]] || continue
    found=$((found + 1))
    read -r fc secs steps chars docs < "$f"
    echo "$fc" >> "$tmp/c"; echo "$secs" >> "$tmp/t"; echo "$steps" >> "$tmp/st"; echo "$chars" >> "$tmp/ch"; echo "$docs" >> "$tmp/d"
    line=$(sed -n 2p "$f")
    if ((chars < bestlen)); then bestlen=$chars; best=$line; fi
  done
  mc=$(median < "$tmp/c"); mt=$(median < "$tmp/t"); md=$(sort -g "$tmp/d" | tail -1)
  wc=miss wt=miss  # the worst seed: a seed that missed has no figure
  if ((found == seeds)); then wc=$(sort -g "$tmp/c" | tail -1); wt=$(sort -g "$tmp/t" | tail -1); fi
  ok=no  # shrunk documents count only where the campaigns shrank
  if ((found == seeds)) && awk -v c="$mc" -v w="$wc" -v d="${md:-9}" -v s="$shrink_runs" \
       'BEGIN{exit !(c <= 20 && w <= 100 && (s == 0 || d <= 3))}'; then ok=yes; fi
  echo "| $m | $found/$seeds | $mc | $wc | $mt | $wt | $(median < "$tmp/st") | $(median < "$tmp/ch") | ${md:--} | $ok | \`$best\` |"
  if [[ -n "$catalog" && -n "$best" ]]; then
    printf '# %s: shortest shrunk case over %s seeds of scripts/tools/fuzz-detection.sh (--dims %s)\n# catches: cpu-bug:%s\n%s\n' \
      "$m" "$seeds" "$dims" "$m" "$best" > "$catalog/$m.case"
  fi
done
