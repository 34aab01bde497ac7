#!/usr/bin/env bash
# Next GPU call for issue 13 (a 4-GPU machine, ~9 min): the batch size, the last untried
# training lever of the SBM recipe, with a same-call control. One variant per GPU
# (benchmarks/calls/round14_sbm_variants.sh: training seed 1, validation every 250 epochs on 128
# samples with our fit, logit scale 0.9, power:3, 2000 epochs or the call's time, then
# 5 x 40 samples at 64 steps from best_val):
#   ctrl   the recipe (batch 32: the buckets 64 / 96 / 128 / 187 take 25 / 34 / 31 / 19
#          graphs a step, 5 steps per epoch)
#   b8     batch 8 (a bucket's cap is floor(B (187 / N_b)^2), so: 25 / 17 / 16 / 8,
#          10 steps per epoch; batch 16 would change only the 187 bucket, 5 -> 6 steps)
#   b64    batch 64 (each bucket one step: 4 steps per epoch)
#   h64b8  64 channels (round 19/20's steadier validity) with batch 8
# The learning rate decays per epoch (0.999), so the batch size also changes how many
# steps each learning rate gets. $OUT/sbm/results.tar.gz (+ checkpoints with PACK_BEST).
# Usage: bash benchmarks/calls/round24_call2.sh OUT
set -uo pipefail
OUT=$1; mkdir -p $OUT/sbm
VARIANTS=${VARIANTS:-"ctrl:|b8:--config.train.batch_size=8|b64:--config.train.batch_size=64|h64b8:--config.model.ppgn.hidden=64 --config.train.batch_size=8"} \
  EPOCHS=${EPOCHS:-2000} GRID=power:3 SEED=1 CALL=1 HARD_SECONDS=${HARD_SECONDS:-555} \
  SAMPLE_SECONDS=${SAMPLE_SECONDS:-75} PACK_BEST=${PACK_BEST:-1} \
  bash benchmarks/calls/round14_sbm_variants.sh $OUT/sbm
