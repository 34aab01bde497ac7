#!/usr/bin/env bash
# Round 26, second SBM call (issue 13), one GPU (~6 min): Algorithm 3, the de-randomised
# chain (each pair drawn once from p(A_0 | A_t), at its own level; bitflip.reverse_step),
# against the recipe's Algorithm 2 on two carried 64-channel checkpoints (training seed
# 1): .devdata/r20/h64 (round 20, best_val epoch 2000) and .devdata/r24/h64b8 (round 24,
# best_val epoch 1750). 64 steps.
# 1. Pilot on training node counts (the decision; no test graph read):
#    benchmarks/sbm_grid_pilot.py, 2 seeds x 40 graphs per arm, our fit.
# 2. The test protocol (5 x 40, node counts drawn from the training split) for the recipe's sampler
#    and two Algorithm 3 arms, graphs only; our fit on them by sbm_failures.py.
# $OUT/derand.tar.gz.
# Usage: bash benchmarks/calls/round26_derandomised.sh OUT
set -uo pipefail
OUT=$1; mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
ARMS="a2_s09:steps=64,algorithm=2,logit_scale=0.9,grid=power:3;a3_s10:steps=64,algorithm=3,logit_scale=1.0,grid=power:3;a3_s09:steps=64,algorithm=3,logit_scale=0.9,grid=power:3;a3_unif:steps=64,algorithm=3,logit_scale=1.0,grid=uniform"
one_checkpoint() {  # NAME DIR: the pilot, then the three 5 x 40 rows
  local name=$1 dir=$2 arm an opts
  timeout 260 python benchmarks/sbm_grid_pilot.py --workdir $dir --checkpoint best_val --ema \
    --nodes 44-187 --num 40 --seeds 0,1 --fit ddgjax --arms "$ARMS" \
    --out "$OUT/res/pilot_$name" > "$OUT/res/pilot_$name.log" 2>&1
  echo "pilot $name rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
  for arm in "a2_s09:--option algorithm=2 --option logit_scale=0.9" \
             "a3_s10:--option algorithm=3 --option logit_scale=1.0" \
             "a3_s09:--option algorithm=3 --option logit_scale=0.9"; do
    an=${arm%%:*}; opts=${arm#*:}
    timeout 100 python benchmarks/vun_eval.py --workdir $dir --checkpoint best_val --ema \
      --validity none --protocol none --seeds 5 --num_samples 40 --num_steps 64 \
      --option grid=power:3 $opts --name sbm26_${name}_$an --out "$OUT/res/samples" \
      > "$OUT/res/vun_${name}_$an.log" 2>&1
    echo "vun $name $an rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
    timeout 120 python benchmarks/sbm_failures.py --reference spectre_sbm:test \
      --generated $(ls "$OUT"/res/samples/sbm26_${name}_${an}_seed*.json) --fit ddgjax \
      --out "$OUT/res/fail_${name}_$an" > "$OUT/res/fail_${name}_$an.log" 2>&1 &
  done
  wait
}
one_checkpoint h64 .devdata/r20/h64 &
one_checkpoint h64b8 .devdata/r24/h64b8 &
wait
echo "done at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
for f in "$OUT"/res/fail_*.log; do echo "$(basename $f) $(grep '^generated' $f | cut -c1-120)"; done
for f in "$OUT"/res/pilot_*.md; do echo "$f"; grep "^| a" "$f" | cut -d'|' -f2,5,6,7,8,9,10; done
tar czf "$OUT/derand.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
