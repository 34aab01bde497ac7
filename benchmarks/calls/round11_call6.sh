#!/usr/bin/env bash
# Round 11, GPU call 6 (issue 15): the three Planar-60 models of the paper's tables
# (configs/paper.py:planar_60,{ppgn,simple | ppgn,vb | edp,simple}) side by side, each
# stopped at $TRAIN_SECONDS if not done (its metrics.jsonl says how far it got), then
# the test NLL of each (best checkpoint: the paper's selection), in parallel.
# Usage: bash benchmarks/calls/round11_call6.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res/nll" "$RUNS/tables"
P=""
for ml in "ppgn simple" "ppgn vb" "edp simple"; do
  set -- $ml; name=planar_60_$1_$2
  python train.py --config "configs/paper.py:planar_60,$1,$2" --workdir $RUNS/tables/$name \
    --quiet ${TAB_EXTRA:-} > "$OUT/res/nll/train_$name.log" 2>&1 &
  P="$P $!"
done
for p in $P; do
  while kill -0 $p 2>/dev/null && [ $(elapsed) -lt "${TRAIN_SECONDS:-440}" ]; do sleep 2; done
  kill -TERM $p 2>/dev/null
done
for p in $P; do
  for _ in $(seq 40); do kill -0 $p 2>/dev/null || break; sleep 1; done
  kill -KILL $p 2>/dev/null; wait $p 2>/dev/null
done
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
for ml in "ppgn simple" "ppgn vb" "edp simple"; do
  set -- $ml; name=planar_60_$1_$2
  cp $RUNS/tables/$name/metrics.jsonl "$OUT/res/nll/metrics_$name.jsonl" 2>/dev/null
  timeout $(( ${HARD_SECONDS:-540} - $(elapsed) )) python benchmarks/completion_nll.py \
    --nll_workdir $name=$RUNS/tables/$name --checkpoint best ${NLL_EXTRA:-} \
    --out "$OUT/res/nll/$name" > "$OUT/res/nll/nll_$name.log" 2>&1 &
done
wait
echo "all stopped at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
