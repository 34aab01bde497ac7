#!/usr/bin/env bash
# Round 51 (issue 13): two training levers never tried on SPECTRE SBM, beside a same-call
# control, one variant per GPU of a 4-GPU machine (round14_sbm_variants.sh: training seed
# 1, validation every 250 epochs, 2000 epochs, then 5 seeds x 40 graphs at 64 steps from
# each best_val with the recipe's sampler, power:3 and logit scale 0.9):
#   ctrl    configs/best.py:spectre_sbm as it is (power:2 training grid, L_simple's
#           1 - 2 beta_bar + 1/T weight)
#   flat    the flat L_simple weight (config.diffusion.simple_weighting=flat): the noisy
#           levels, where the partition forms, weigh as much as the clean ones
#   tmid    the mid:2 training grid: half the draws within 1/16 of beta_bar = 1/4
#   uflat   the uniform training grid with the flat weight (the plain x0 cross-entropy)
# Usage: bash benchmarks/calls/round51_sbm_weighting.sh OUT
set -u
export CALL=1 EPOCHS=2000 GRID=power:3 HARD_SECONDS=${HARD_SECONDS:-575} \
  SAMPLE_SECONDS=${SAMPLE_SECONDS:-70} PACK_BEST=${PACK_BEST:-1}
export VARIANTS="ctrl:|flat:--config.diffusion.simple_weighting=flat|tmid:--config.diffusion.train_grid=mid:2|uflat:--config.diffusion.train_grid=uniform --config.diffusion.simple_weighting=flat"
exec bash "$(dirname "$0")/round14_sbm_variants.sh" "$1"
