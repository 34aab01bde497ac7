#!/usr/bin/env bash
# Round 53 (issue 13): round 52's uflat64 (64 channels, the uniform training grid, the flat
# L_simple weight; 72 % V.U.N. with our fit at training seed 1) against plain 64 channels
# (h64, rounds 19-20), both with training seeds 2 and 3, one per GPU of a 4-GPU machine;
# otherwise round 52's driver (2000 epochs, validation every 250, 5 x 40 graphs at 64
# steps from each best_val with the recipe's sampler).
# Usage: bash benchmarks/calls/round53_sbm_uflat64_seeds.sh OUT
UFLAT64="--config.diffusion.train_grid=uniform --config.diffusion.simple_weighting=flat --config.model.ppgn.hidden=64"
H64="--config.model.ppgn.hidden=64"
export PREFIX=sbm53 VARIANTS="uflat64_s2|2|$UFLAT64;uflat64_s3|3|$UFLAT64;h64_s2|2|$H64;h64_s3|3|$H64"
exec bash "$(dirname "$0")/round52_sbm_uflat_seeds.sh" "$1"
