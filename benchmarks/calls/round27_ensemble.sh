#!/usr/bin/env bash
# Round 27 (issue 13), third call, one GPU (~4 min): an ensemble of the two 64-channel SBM
# runs (ddgjax.guidance with weight -1/2: every step samples from the mean of both
# models' logits) against each run alone, in the same call. Runs (best_val, EMA):
#   .devdata/r24/h64b8   64 channels, batch 8, training seed 1 (epoch 1750)
#   .devdata/r20/h64     64 channels, batch 25, training seed 1 (epoch 2000)
# Each arm: 5 sampling seeds x 40 graphs at 64 steps (benchmarks/vun_eval.py, as every SBM
# row; the recipe's sampler, power:3 and logit scale 0.9), then our SBM fit of the 200
# graphs (benchmarks/sbm_failures.py) on the host's CPUs. No pilot: round 27's pilots (80
# graphs) moved by 9 points between two calls on the same settings.
# $OUT/results.tar.gz: res/samples, res/fail, logs.  Knobs: SAMPLES, STEPS, HARD_SECONDS.
# Usage: bash benchmarks/calls/round27_ensemble.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-400}
A=.devdata/r24/h64b8; B=.devdata/r20/h64
mkdir -p "$OUT/res/samples" "$OUT/res/fail"
S="--checkpoint best_val --ema --validity none --protocol none ${SAMPLES:---seeds 5 --num_samples 40} \
 --num_steps ${STEPS:-64} --out $OUT/res/samples"
pids=(); names=(r27_h64b8 r27_h64 r27_mean)
python benchmarks/vun_eval.py --workdir $A $S --name r27_h64b8 > "$OUT/res/vun_h64b8.log" 2>&1 &
pids+=($!)
python benchmarks/vun_eval.py --workdir $B $S --name r27_h64 > "$OUT/res/vun_h64.log" 2>&1 &
pids+=($!)
python benchmarks/vun_eval.py --workdir $A $S --name r27_mean --guide $B \
  --guide_checkpoint best_val --guidance -0.5 > "$OUT/res/vun_mean.log" 2>&1 &
pids+=($!)
stop_at $(( HARD - 60 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
fit_sets $(( HARD - 10 )) "${names[@]}"
pack_results
