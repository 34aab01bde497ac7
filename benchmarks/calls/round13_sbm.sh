#!/usr/bin/env bash
# Round 13 (issue 13): round12_sbm.sh (the SBM run resumed toward 5000 epochs) with a
# sampler pilot beside it on the carried checkpoint (.devdata/sbm_r11/sbm_best, latest,
# EMA): 2 seeds x 40 graphs of 44-187 nodes drawn from the training counts, per arm of
# $ARMS (sbm_grid_pilot.py --arms), fitted with ddgjax's SBM fit here and refitted with
# graph-tool on a CPU afterwards (--refit).
# Usage: bash benchmarks/calls/round13_sbm.sh OUT
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several JAX processes share the GPU
OUT=$1
mkdir -p "$OUT/res"
ARMS=${ARMS:-"a2_64:steps=64;a1_64:steps=64,algorithm=1;mix05_64:steps=64,algorithm=1,renoise_mix=0.5;a2_256:steps=256;a2_1024:steps=1024;a1_256:steps=256,algorithm=1;ls08_64:steps=64,logit_scale=0.8;a2_128:steps=128"}
python benchmarks/sbm_grid_pilot.py --workdir .devdata/sbm_r11/sbm_best --checkpoint latest \
  --ema --nodes 44-187 --num 40 --seeds 0,1 --fit ddgjax --out "$OUT/res/pilot" \
  --arms "$ARMS" > "$OUT/res/pilot.log" 2>&1 &
ALSO_PIDS=$! bash "$(dirname "$0")/round12_sbm.sh" "$OUT"
