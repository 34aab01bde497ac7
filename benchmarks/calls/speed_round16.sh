#!/usr/bin/env bash
# Round 16 (issue 12), one GPU: the flat train state (config.train.flat_update) and the
# jitted parameter init, on the small models, beside the code before them.
#   A. profile of the Ego-small train step (PPGN 6x32, 18 nodes, batch 32): kernels per
#      step and device time, flat and leaf by leaf (benchmarks/profile_ppgn.py);
#   C. benchmarks/seeds_speed.py --seeds 5 (one run, then 5 seeds in one program) with
#      this code: packed checkpoints, jitted init, flat state;
#   E. the same with the code of commit e6e0464 (leaf-by-leaf checkpoints, eager init,
#      leaf-by-leaf steps; what round 15 measured), from .baseline/ (carried:
#      git archive e6e0464 ddgjax benchmarks configs | tar -x -C .baseline);
#   D. C's five-seed phase with train.flat_update=false;
#   B. steady train steps (benchmarks/epoch_times.py): Ego-small paper config 1000 epochs
#      and Planar-60 PPGN 8x128 paper config 100 epochs, flat and leaf by leaf;
#   F. C's one-run phase twice with JAX's persistent compilation cache
#      (JAX_COMPILATION_CACHE_DIR, an empty folder): cold, then warm.
# It ran once, at commit 9ffa962 (docs/benchmarks.md "Round 16"). The jitted init that
# commit had was reverted after it (slower set-up on the H200); rerun now, "this code"
# has eager init again.
# Usage: HARD_SECONDS=560 bash benchmarks/calls/speed_round16.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-560}
step profile_ego 40 80 python benchmarks/profile_ppgn.py --out "$OUT/res/profile_ego" \
  --dtypes float32 --hidden 32 --blocks 6 --nodes 18 --train_batch 32 --skip_ceilings \
  --variant leaf=train.flat_update=false
step seeds_new 100 200 python benchmarks/seeds_speed.py --seeds 5 --out "$OUT/res/seeds_new.json"
if [ -d .baseline ]; then
  (cd .baseline && step seeds_base 100 240 python benchmarks/seeds_speed.py --seeds 5 \
    --out "$OUT/res/seeds_base.json")
fi
step seeds_leaf 60 120 python benchmarks/seeds_speed.py --seeds 5 --skip_single \
  --option train.flat_update=false --out "$OUT/res/seeds_leaf.json"
for v in "flat|" "leaf|--option=train.flat_update=false"; do
  name=${v%%|*}; opt=${v#*|}
  step epochs_ego_$name 30 60 python benchmarks/epoch_times.py --epochs 1000 $opt \
    --out "$OUT/res/epochs_ego_$name.json" configs/paper.py:ego_small,ppgn,simple
  step epochs_planar_$name 40 70 python benchmarks/epoch_times.py --epochs 100 $opt \
    --out "$OUT/res/epochs_planar_$name.json" configs/paper.py:planar_60,ppgn,simple
done
rm -rf /tmp/ddgjax_jcache
for k in cold warm; do
  JAX_COMPILATION_CACHE_DIR=/tmp/ddgjax_jcache step seeds_cache_$k 45 90 \
    python benchmarks/seeds_speed.py --skip_multi --out "$OUT/res/seeds_cache_$k.json"
done
pack_results
