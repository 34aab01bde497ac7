#!/usr/bin/env bash
# Round 21, call 2 (issue 13), on a 4-GPU machine: the graph transformer with random-walk
# inputs (model.gt.walk_features=16, DeFoG's RRWP idea; call 1's plain transformers never
# drew a valid SBM graph), four variants, one per GPU, via
# benchmarks/calls/round14_sbm_variants.sh (time-bound: EPOCHS=6000), then 5 x 40 graphs at 64
# steps from each best_val.
#   gtr     4 layers, 64 / 32 / 32 wide, 4 heads (the config's defaults)
#   gtr8    8 layers, 128 / 64, 8 heads
#   gtr8c   the same, learning rate 5e-4, gradient clipping at 1
#   gtdc    8 layers, 256 / 64 / 64, 8 heads (DiGress's SBM sizes), learning rate 2e-4,
#           clipping at 1 (call 1's 256-wide one at 3e-4 without clipping diverged)
# Usage: bash benchmarks/calls/round21_call2.sh OUT   (PACK_BEST=K as round14_sbm_variants.sh)
set -uo pipefail
W="--config.model.name=gt --config.model.gt.walk_features=${WALKS:-16}"
L8="--config.model.gt.num_layers=8 --config.model.gt.node_dim=128 --config.model.gt.edge_dim=64 --config.model.gt.heads=8"
VARIANTS="gtr:$W|gtr8:$W $L8|gtr8c:$W $L8 --config.train.lr=5e-4 --config.train.grad_clip=1.0|gtdc:$W --config.model.gt.num_layers=8 --config.model.gt.node_dim=256 --config.model.gt.edge_dim=64 --config.model.gt.heads=8 --config.model.gt.global_dim=64 --config.train.lr=2e-4 --config.train.grad_clip=1.0" \
  EPOCHS=${EPOCHS:-6000} CALL=${CALL:-2} GRID=power:3 HARD_SECONDS=${HARD_SECONDS:-555} \
  SAMPLE_SECONDS=${SAMPLE_SECONDS:-60} bash "$(dirname "$0")/round14_sbm_variants.sh" "$1"
