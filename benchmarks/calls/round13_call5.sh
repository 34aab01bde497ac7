#!/usr/bin/env bash
# Round 13, call 5 (issue 13): sampler pilot at 64 steps on the SBM run's best_val
# (epoch 1500, EMA): where the logit scale acts (logit_scale_above) and its grid, 2 seeds
# x 40 graphs of training-split sizes per arm, ddgjax's fit here (graph-tool later with
# sbm_grid_pilot.py --refit). Stops by $HARD_SECONDS; $OUT holds only results.tar.gz.
# Usage: bash benchmarks/calls/round13_call5.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
ARMS=${ARMS:-"ls09:steps=64,logit_scale=0.9;ls09_above01:steps=64,logit_scale=0.9,logit_scale_above=0.1;ls08_above01:steps=64,logit_scale=0.8,logit_scale_above=0.1;ls085_above003:steps=64,logit_scale=0.85,logit_scale_above=0.03;ls09_uniform:steps=64,logit_scale=0.9,grid=uniform;ls09_power2:steps=64,logit_scale=0.9,grid=power:2"}
python benchmarks/sbm_grid_pilot.py --workdir .devdata/sbm_r11/sbm_best --checkpoint best_val \
  --ema --nodes 44-187 --num 40 --seeds 0,1 --fit ddgjax --out "$OUT/res/pilot_e1500_levels" \
  --arms "$ARMS" > "$OUT/res/pilot.log" 2>&1 &
stop_at "${HARD_SECONDS:-240}" $!
pack_results
