#!/usr/bin/env bash
# Round 18 (issue 12), the 2-GPU machine: round 17's two changes timed in whole runs beside
# the code before them, and the two-GPU half that round 17 ran out of time for.
#   W. benchmarks/seeds_speed.py --seeds 5 (the Ego-small paper config: one run, then 5
#      seeds in one program) with this code (parameters initialised on the host CPU) and
#      with the code before round 17 (.baseline/, carried: git archive 20d729e ddgjax
#      benchmarks configs | tar -x -C .baseline; then cp benchmarks/epoch_times.py
#      .baseline/benchmarks/ for --progress);
#   B. the Ego-small paper config, 1000 epochs in 2 jitted calls (epoch_times.py) with the
#      CLI's progress bar: this code (the bar between calls) and the baseline's (a host
#      callback in every step), then this code quiet;
#   T. the Planar-60 paper config (float32, batch 64), 450 epochs in 3 jitted calls, on one
#      GPU then on two (epoch_times.py), as round 13 measured it;
#   C. the one Ego-small run of W twice with JAX's persistent compilation cache in a fresh
#      directory (every program cached, however small): cold, then warm.
# In the order T, W (new), C, B, W (baseline): what the targets need first.
# GPU 0 alone (CUDA_VISIBLE_DEVICES=0) except T's second half. Results are packed into
# OUT/results.tar.gz after every step.
# Usage: HARD_SECONDS=560 bash benchmarks/calls/speed_round18.sh OUT
set -uo pipefail
FINAL=$(cd "$1" && pwd)
OUT=$(mktemp -d /tmp/speed_round18.XXXX)
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-560}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
export CUDA_VISIBLE_DEVICES=0
EGO=configs/paper.py:ego_small,ppgn,simple
if [ "$ngpu" -ge 2 ]; then
  for vis in 0 0,1; do
    CUDA_VISIBLE_DEVICES=$vis step two_gpus_${vis/,/_} 60 120 python benchmarks/epoch_times.py \
      --epochs 450 --chunks 3 --out "$OUT/res/two_gpus_${vis/,/_}.json" configs/paper.py:planar_60,ppgn,simple
  done
fi
step seeds_new 100 200 python benchmarks/seeds_speed.py --seeds 5 --out "$OUT/res/seeds_new.json"
cache_cold_warm 45 90
step bar_new 30 60 python benchmarks/epoch_times.py --epochs 1000 --progress \
  --out "$OUT/res/bar_new.json" $EGO
if [ -d .baseline ]; then
  (cd .baseline && step bar_base 30 60 python benchmarks/epoch_times.py --epochs 1000 \
    --progress --out "$OUT/res/bar_base.json" $EGO)
fi
step bar_quiet 30 60 python benchmarks/epoch_times.py --epochs 1000 \
  --out "$OUT/res/bar_quiet.json" $EGO
if [ -d .baseline ]; then
  (cd .baseline && step seeds_base 100 200 python benchmarks/seeds_speed.py --seeds 5 \
    --out "$OUT/res/seeds_base.json")
fi
tar czf "$FINAL/results.tar.gz" -C "$OUT" res
echo "packed at $(elapsed) s"; ls -la "$FINAL"
