#!/usr/bin/env bash
# Round 13, call 3: the SPECTRE SBM deliverable, then the issue-12 speed round.
#   1. per row of $ROWS (NAME:STEPS:VUN_EVAL_OPTIONS, separated by |): 5 sampling seeds x
#      40 graphs (the test split's size; node counts drawn from the training split) from
#      $W's $CKPT (EMA), written as docs-ready graph lists spectre_sbm_NAME_seedK.json,
#      SPECTRE-protocol MMDs here (validity: graph-tool on a CPU afterwards,
#      benchmarks/check_samples.py);
#   2. benchmarks/calls/round12_speed.sh with the time left.
# Usage: bash benchmarks/calls/round13_call3.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
W=${W:-.devdata/sbm_r11/sbm_best}
ROWS=${ROWS:-"best:64:--option logit_scale=0.9|best_plain:64:|best_T1024:1024:"}
IFS='|' read -ra rows <<< "$ROWS"
for row in "${rows[@]}"; do
  IFS=':' read -r name steps opts <<< "$row"
  left=$(( ${HARD_SECONDS:-545} - 30 - $(elapsed) )); [ $left -lt 30 ] && break
  timeout $(( left < 240 ? left : 240 )) python benchmarks/vun_eval.py --workdir $W --checkpoint ${CKPT:-best_val} --ema \
    --validity none --protocol spectre --seeds 5 --num_samples 40 --num_steps $steps \
    $opts --name spectre_sbm_$name --out "$OUT/res/samples" > "$OUT/res/vun_$name.log" 2>&1
  echo "sampled $name ($steps steps, $opts) rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
done
left=$(( ${HARD_SECONDS:-545} - $(elapsed) ))
echo "speed round with $left s" >> "$OUT/res/times.txt"
if [ $left -gt 200 ]; then
  HARD_SECONDS=$left bash "$(dirname "$0")/round12_speed.sh" "$OUT"  # packs $OUT/res
else
  pack_results
fi
