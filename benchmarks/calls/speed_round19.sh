#!/usr/bin/env bash
# Round 19 (issue 12), one GPU: the loop that runs a chunk's boundary work (losses,
# logging, checkpoint saves) while the next chunk trains, against the loop before it
# (.baseline/, carried: git archive c767b8a ddgjax benchmarks configs), in the same call.
# benchmarks/seeds_speed.py on the Ego-small paper config cut to 2000 epochs (20 boundaries
# of 100 epochs): one run, alternately new/base twice; then 5 seeds in one program, 1000
# epochs, new and base. Results are packed into OUT/results.tar.gz after every step.
# Usage: HARD_SECONDS=150 bash benchmarks/calls/speed_round19.sh OUT
set -uo pipefail
FINAL=$(cd "$1" && pwd)
OUT=$(mktemp -d /tmp/speed_round19.XXXX)
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-150}
export CUDA_VISIBLE_DEVICES=0
for k in 1 2; do
  step single_new_$k 20 40 python benchmarks/seeds_speed.py --epochs 2000 --skip_multi \
    --out "$OUT/res/single_new_$k.json"
  (cd .baseline && step single_base_$k 20 40 python benchmarks/seeds_speed.py --epochs 2000 \
    --skip_multi --out "$OUT/res/single_base_$k.json")
done
step seeds_new 20 40 python benchmarks/seeds_speed.py --epochs 1000 --skip_single \
  --out "$OUT/res/seeds_new.json"
(cd .baseline && step seeds_base 20 40 python benchmarks/seeds_speed.py --epochs 1000 \
  --skip_single --out "$OUT/res/seeds_base.json")
tar czf "$FINAL/results.tar.gz" -C "$OUT" res
echo "packed at $(elapsed) s"
