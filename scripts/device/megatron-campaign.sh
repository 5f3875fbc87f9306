#!/usr/bin/env bash
# Megatron-Core's DSA top-k on the GPU in two warm calls after real-kernels-campaign.sh's CALL=1, each running
# the table and the fuzz side by side (one GPU, separate warm hosts, $OUT/table and $OUT/fuzz apart):
#   PHASE=1  CALL=2 setup (carry .whl/dsl-cu13.tar.xz.part-ab, .whl/rest.tar.xz, .whl/ao-bin.tar.xz), then
#            STEPS="mc-repro mc-table" beside STEPS=mc-fuzz (FUZZ_SEED=1)
#   PHASE=2  carries nothing: the table's gates $MC_GATES (default: the large ones) beside mc-fuzz FUZZ_SEED=2
# BUDGET_S (default 480) bounds each side; the call's 600 s limit holds the setup too.
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
OUT=${OUT:-/tmp/ao-megatron-out}
B=${BUDGET_S:-480}
mkdir -p "$OUT/table" "$OUT/fuzz"
case "${PHASE:-}" in
  1) CALL=2 STEPS=setup OUT="$OUT/table" BUDGET_S=120 bash "$here/real-kernels-campaign.sh" > "$OUT/setup.log" 2>&1 ||
       { tail -20 "$OUT/setup.log"; exit 1; }
     table="mc-repro mc-table" seed=1 gates=${MC_GATES:-} ;;
  2) table=mc-table seed=2 gates=${MC_GATES:-"mc-cudnn-large mc-cudnn-fix-large mc-naive-large"} ;;
  *) echo "usage: PHASE=1|2 $0 (see the header)" >&2; exit 2 ;;
esac
MC_GATES=$gates CALL=3 STEPS="$table" OUT="$OUT/table" BUDGET_S=$B bash "$here/real-kernels-campaign.sh" > "$OUT/table.log" 2>&1 &
p=$!
CALL=3 STEPS=mc-fuzz FUZZ_SEED=$seed OUT="$OUT/fuzz" BUDGET_S=$B bash "$here/real-kernels-campaign.sh" > "$OUT/fuzz.log" 2>&1
wait "$p"
tail -n 4 "$OUT/table.log" "$OUT/fuzz.log"
grep -h "mc-fuzz-result\|^as released\|^with q_causal" "$OUT"/fuzz/fuzz-mc-*.txt "$OUT"/table/mc-repro.txt 2>/dev/null
