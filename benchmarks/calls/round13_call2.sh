#!/usr/bin/env bash
# Round 13, call 2 (issue 13): the SBM run resumed to its 5000 epochs (round12_sbm.sh,
# SKIP_SAMPLING=1) with sampler pilots beside it (sbm_grid_pilot.py, training node
# counts, 2 seeds x 40 graphs, ddgjax's fit here, graph-tool later with --refit):
#   P1: the carried latest checkpoint, P2: the carried best_val, each with its $ARMS_*;
#   P4: once training has ended (before $HARD_SECONDS - 150 s), the new latest.
# Usage: bash benchmarks/calls/round13_call2.sh OUT
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several JAX processes share the GPU
OUT=$1
mkdir -p "$OUT/res"
W=.devdata/sbm_r11/sbm_best
pilot() {  # pilot NAME WORKDIR CHECKPOINT ARMS
  python benchmarks/sbm_grid_pilot.py --workdir "$2" --checkpoint "$3" --ema --nodes 44-187 \
    --num 40 --seeds 0,1 --fit ddgjax --out "$OUT/res/pilot_$1" --arms "$4" \
    > "$OUT/res/pilot_$1.log" 2>&1
}
pilot latest "$W" latest "${ARMS_LATEST:-a2_64:steps=64;ls09_64:steps=64,logit_scale=0.9;ls085_64:steps=64,logit_scale=0.85;a1ls09_64:steps=64,algorithm=1,logit_scale=0.9;a2_1024:steps=1024;ls09_256:steps=256,logit_scale=0.9}" &
P1=$!
pilot bestval "$W" best_val "${ARMS_BESTVAL:-ls09_64:steps=64,logit_scale=0.9;ls085_64:steps=64,logit_scale=0.85;ls095_64:steps=64,logit_scale=0.95;a1ls09_64:steps=64,algorithm=1,logit_scale=0.9;a2_1024:steps=1024;ls095_1024:steps=1024,logit_scale=0.95}" &
P2=$!
( # P4: wait for the resumed run's end event, then sample its last checkpoint
  while [ $SECONDS -lt $(( ${HARD_SECONDS:-540} - 150 )) ]; do
    if tail -1 runs/r11/sbm_best/metrics.jsonl 2>/dev/null | grep -q '"event": "end"'; then
      pilot final runs/r11/sbm_best latest "${ARMS_FINAL:-a2_64:steps=64;ls09_64:steps=64,logit_scale=0.9;a2_1024:steps=1024}"
      break
    fi
    sleep 5
  done ) &
P4=$!
SKIP_SAMPLING=1 ALSO_PIDS="$P1 $P2 $P4" bash "$(dirname "$0")/round12_sbm.sh" "$OUT"
