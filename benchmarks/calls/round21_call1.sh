#!/usr/bin/env bash
# Round 21, call 1 (issues 13 and 12), on a 4-GPU machine:
#   GPUs 0-2: three graph-transformer denoisers (model.name=gt) on SPECTRE SBM, the recipe
#     configs/best.py:spectre_sbm otherwise (benchmarks/calls/round14_sbm_variants.sh, time-bound:
#     EPOCHS=6000 so that $HARD_SECONDS binds, then 5 x 40 graphs at 64 steps from best_val);
#   GPU 3: (a) the uniform and mid:2 sampling grids on round 20's h64 checkpoint at 5 x 40
#     (node counts from the training split, scored against the test split;
#     benchmarks/calls/sbm_h64_arms.sh TEST=1; carry the
#     tarball $CKPT), then (b) the Planar-60 paper config trained in bfloat16 with fused
#     blocks on one GPU, timed, checkpoints every 500 epochs, and 3 seeds x 1024 graphs
#     sampled from it (graphs only; MMDs on a CPU) for the quality check against float32.
# $OUT: results.tar.gz (the GT variants), arms.tar.gz, p60.tar.gz.
# Usage: CKPT=.devdata/r20/ckpt_h64_best_val.tar.gz bash benchmarks/calls/round21_call1.sh OUT
set -uo pipefail
OUT=$1
HARD=${HARD_SECONDS:-555}
G3=/tmp/p60; mkdir -p $G3
(
  CUDA_VISIBLE_DEVICES=3 TEST=1 HARD_SECONDS=200 \
    ARMS="unif:grid=uniform,logit_scale=0.9;mid2:grid=mid:2,logit_scale=0.9" \
    bash benchmarks/calls/sbm_h64_arms.sh "$OUT" > $G3/arms_driver.log 2>&1
  export CUDA_VISIBLE_DEVICES=3 XLA_PYTHON_CLIENT_PREALLOCATE=false
  t0=$(date +%s%N)
  timeout 240 python train.py --config configs/paper.py:planar_60,ppgn,simple \
    --workdir runs/p60bf --quiet --config.model.compute_dtype=bfloat16 \
    --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=500 \
    > $G3/train.log 2>&1
  echo "train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $G3/times.txt
  cp runs/p60bf/metrics.jsonl runs/p60bf/config.json $G3/ 2>/dev/null
  for s in 0 1 2; do
    timeout 60 python sample.py --workdir runs/p60bf --checkpoint latest --num_samples 1024 \
      --seed $s --protocol none --out $G3/s$s > $G3/sample_s$s.log 2>&1
    echo "sample s$s rc=$?" >> $G3/times.txt
    rm -f $G3/s$s/grid.png
  done
  tar czf "$OUT/p60.tar.gz" -C /tmp p60
) &
g3=$!
VARIANTS="gt:--config.model.name=gt|gtw8:--config.model.name=gt --config.model.gt.num_layers=8 --config.model.gt.node_dim=128 --config.model.gt.edge_dim=64 --config.model.gt.heads=8|gtd:--config.model.name=gt --config.model.gt.num_layers=8 --config.model.gt.node_dim=256 --config.model.gt.edge_dim=64 --config.model.gt.heads=8 --config.model.gt.global_dim=64 --config.train.lr=3e-4" \
  EPOCHS=${EPOCHS:-6000} CALL=1 GRID=power:3 HARD_SECONDS=$HARD SAMPLE_SECONDS=${SAMPLE_SECONDS:-60} \
  bash benchmarks/calls/round14_sbm_variants.sh "$OUT"
wait $g3
ls -la "$OUT"
