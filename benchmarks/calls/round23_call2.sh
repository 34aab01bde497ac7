#!/usr/bin/env bash
# Round 23, call 2, a 4-GPU machine:
# * GPUs 0 and 1 (issue 13's training time): benchmarks/calls/validation_overlap.sh, the SBM
#   recipe for 750 epochs with background validation scoring (GPU 0) against the code
#   before it (.baseline/, `git archive b2a6e0f`, GPU 1); then (issue 12) on GPU 0
#   benchmarks/batch_scaling.py for the Pallas sampling path (batches 16-1024), on GPU 1
#   for the bf16 fused train step (batches 16, 32, 64).
# * GPUs 2 and 3 (issue 13): two SBM training levers never tried on SBM, with
#   benchmarks/calls/round14_sbm_variants.sh (training seed 1, validation every 250 epochs,
#   power:3 grid, 5 x 40 samples from best_val at 64 steps): the uniform (ER 1/2, the
#   paper's) prior instead of the marginal one (`uprior`), and no per-epoch learning-rate
#   decay (`nodecay`).
# Everything still running at $HARD_SECONDS (default 560) is stopped.
# $OUT: overlap.tar.gz, sbm/results.tar.gz, call2.tar.gz (logs/: the scaling JSONs, logs, times).
# Usage: bash benchmarks/calls/round23_call2.sh OUT
set -uo pipefail
OUT=$1; L=$OUT/logs; mkdir -p $OUT/sbm $L
HARD=${HARD_SECONDS:-560}; T0=$(date +%s)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
GPUS=2,3 VARIANTS=${VARIANTS:-"uprior:--config.diffusion.prior=uniform|nodecay:--config.train.lr_decay_per_epoch=1.0"} \
  EPOCHS=${EPOCHS:-2000} GRID=power:3 SEED=1 CALL=1 HARD_SECONDS=$(( HARD - 10 )) \
  SAMPLE_SECONDS=${SAMPLE_SECONDS:-60} bash benchmarks/calls/round14_sbm_variants.sh $OUT/sbm \
  > $L/sbm_driver.log 2>&1 &
vpid=$!
left() { echo $(( HARD - 15 - $(date +%s) + T0 )); }
( timeout $(( HARD - 60 )) bash benchmarks/calls/validation_overlap.sh $OUT > $L/overlap_driver.log 2>&1
  echo "overlap done at $(( $(date +%s) - T0 )) s" >> $L/times.txt
  CUDA_VISIBLE_DEVICES=0 timeout $(left) python benchmarks/batch_scaling.py --out $L/scaling_pallas.json \
    --sample_options "model.ppgn.pallas=true" --sample_batches 16,64,256,1024 --train_batches "" \
    ${QUICK:-} > $L/scaling_pallas.log 2>&1 &
  CUDA_VISIBLE_DEVICES=1 timeout $(left) python benchmarks/batch_scaling.py --out $L/scaling_train.json \
    --sample_batches "" --train_batches 16,32,64 ${QUICK:-} > $L/scaling_train.log 2>&1 &
  wait
  echo "scaling done at $(( $(date +%s) - T0 )) s" >> $L/times.txt ) &
wait
echo "all done at $(( $(date +%s) - T0 )) s" >> $L/times.txt
cat $L/times.txt
tar czf $OUT/call2.tar.gz -C $OUT logs && rm -rf $L
