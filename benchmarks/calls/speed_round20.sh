#!/usr/bin/env bash
# Round 20 (issue 12), one GPU: round 19's overlapped boundaries timed in whole runs of the
# Ego-small paper config (5000 epochs), against the code before them (.baseline/, carried:
# git archive c767b8a ddgjax benchmarks configs | tar -x -C .baseline), in the same call:
#   W. benchmarks/seeds_speed.py --seeds 5 (one run, then 5 seeds in one program), new
#      then old;
#   C. the one run twice with JAX's persistent compilation cache in a fresh directory
#      (every program cached): cold, then warm (the ≤ 20 s target);
#   L. the CLI itself, twice with one fresh cache (benchmarks/calls/cli_rerun.sh).
# Results are packed into OUT/results.tar.gz after every step.
# Usage: HARD_SECONDS=540 bash benchmarks/calls/speed_round20.sh OUT
set -uo pipefail
FINAL=$(cd "$1" && pwd)
OUT=$(mktemp -d /tmp/speed_round20.XXXX)
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-540}
export CUDA_VISIBLE_DEVICES=0
step seeds_new 90 150 python benchmarks/seeds_speed.py --seeds 5 --out "$OUT/res/seeds_new.json"
cache_cold_warm 40 80
step cli_rerun 80 120 bash benchmarks/calls/cli_rerun.sh "$OUT/res/cli"
if [ -d .baseline ]; then
  (cd .baseline && step seeds_base 110 180 python benchmarks/seeds_speed.py --seeds 5 \
    --out "$OUT/res/seeds_base.json")
fi
tar czf "$FINAL/results.tar.gz" -C "$OUT" res
echo "packed at $(elapsed) s"
