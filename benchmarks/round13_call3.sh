#!/usr/bin/env bash
# Round 13, call 3: the SPECTRE SBM deliverable, then the issue-12 speed round.
#   1. 5 sampling seeds x 40 graphs (the test split's size; node counts drawn from the
#      training split) from $W's $CKPT (EMA) at 64 steps with $OPTS64 (sampler options),
#      and at 1024 steps with $OPTS1024, SPECTRE-protocol MMDs here (validity: graph-tool
#      on a CPU afterwards, benchmarks/check_samples.py);
#   2. benchmarks/round12_speed.sh with the time left.
# Usage: W=... CKPT=best_val OPTS64="--option logit_scale=0.9" bash benchmarks/round13_call3.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
W=${W:-.devdata/sbm_r11/sbm_best}
for steps in 64 1024; do
  opts=OPTS$steps
  [ $steps = 1024 ] && [ -n "${SKIP_1024:-}" ] && continue
  timeout 200 python benchmarks/vun_eval.py --workdir $W --checkpoint ${CKPT:-best_val} --ema \
    --validity none --protocol spectre --seeds 5 --num_samples 40 --num_steps $steps \
    ${!opts:-} --name spectre_sbm_${NAME:-best}$([ $steps = 64 ] || echo _T$steps) --out "$OUT/res/samples" \
    > "$OUT/res/vun_T$steps.log" 2>&1
  echo "sampled T=$steps rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
done
left=$(( ${HARD_SECONDS:-545} - $(elapsed) ))
echo "speed round with $left s" >> "$OUT/res/times.txt"
[ $left -gt 60 ] && HARD_SECONDS=$left bash "$(dirname "$0")/round12_speed.sh" "$OUT" || pack_results
