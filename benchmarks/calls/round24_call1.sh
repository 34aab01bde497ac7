#!/usr/bin/env bash
# Next GPU call (issue 12, with issue 13's training time): does training through the
# Pallas kernels (session 16: backward from residuals, no forward recomputed) pay off?
# A 4-GPU machine (on fewer GPUs the jobs share cards: then only GPU 0's rows are timings):
# * GPU 0: the bf16 PPGN 8x128 train step at batches 32 and 64, fused XLA blocks against
#   the Pallas kernels, in one process (benchmarks/batch_scaling.py); then the Pallas
#   sampling row (1024 graphs; rounds 4/15/23: 1.46-1.47 s) with 1, 2, 4 and 8 row tiles
#   per program ($SUBTILES: DDGJAX_PAIR_MLP_SUBTILES = DDGJAX_MIX_SUBTILES, the weights
#   read once per program), one process each; then the Pallas train step with 4.
# * GPUs 1 and 2: the Planar-60 paper config in bf16, training seed 1 (round 22's 0.1605
#   average MMD with fused blocks), with the Pallas kernels (GPU 1) and with fused blocks
#   (GPU 2) side by side, checkpoint only at the end; then 3 x 1024 samples each
#   (score on the CPU: check_samples.py --data planar_60 --protocol paper).
# * GPU 3: the SBM recipe's bucketed epoch (benchmarks/bucket_speed.py, bf16, buckets only),
#   fused against Pallas.
# Everything still running at $HARD_SECONDS (default 540) is stopped. $OUT/round24.tar.gz.
# Usage: bash benchmarks/calls/round24_call1.sh OUT
set -uo pipefail
OUT=$1; S=/tmp/r24; mkdir -p $S; HARD=${HARD_SECONDS:-540}; T0=$(date +%s)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > $S/gpu.txt 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 1 ] || ngpu=1
gpu() { echo $(( $1 % ngpu )); }
left() { echo $(( HARD - 15 - $(date +%s) + T0 )); }
note() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $S/times.txt; }
( CUDA_VISIBLE_DEVICES=$(gpu 0) timeout $(left) python benchmarks/batch_scaling.py \
    --out $S/train_step.json --sample_batches "" --train_batches 32,64 \
    --train_options "model.ppgn.fused=true;model.ppgn.pallas=true" ${QUICK:-} > $S/train_step.log 2>&1
  note "train_step rc=$?"
  for k in ${SUBTILES:-1 2 4 8}; do
    DDGJAX_PAIR_MLP_SUBTILES=$k DDGJAX_MIX_SUBTILES=$k CUDA_VISIBLE_DEVICES=$(gpu 0) \
      timeout $(left) python benchmarks/batch_scaling.py --out $S/sample_sub$k.json \
      --sample_batches 1024 --sample_options model.ppgn.pallas=true --train_batches "" \
      ${QUICK:-} > $S/sample_sub$k.log 2>&1
    note "sample_sub$k rc=$?"
  done
  DDGJAX_PAIR_MLP_SUBTILES=4 DDGJAX_MIX_SUBTILES=4 CUDA_VISIBLE_DEVICES=$(gpu 0) \
    timeout $(left) python benchmarks/batch_scaling.py --out $S/train_step_sub4.json \
    --sample_batches "" --train_batches 64 --train_options model.ppgn.pallas=true \
    ${QUICK:-} > $S/train_step_sub4.log 2>&1
  note "train_step_sub4 rc=$?" ) &
planar() {  # NAME GPU OPTION
  local t0=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$2 timeout $(left) python train.py \
    --config configs/paper.py:planar_60,ppgn,simple --workdir runs/r24_$1 --quiet \
    --config.train.seed=1 --config.model.compute_dtype=bfloat16 --config.model.ppgn.$3=true \
    --config.train.checkpoint_every_epochs=2500 ${EXTRA:-} > $S/train_$1.log 2>&1
  note "$1 train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
  cp runs/r24_$1/metrics.jsonl $S/metrics_$1.jsonl 2>/dev/null
  for k in 0 1 2; do
    CUDA_VISIBLE_DEVICES=$2 timeout $(left) python sample.py --workdir runs/r24_$1 \
      --checkpoint latest --num_samples ${NUM_SAMPLES:-1024} --seed $k --protocol none \
      --out $S/${1}_s$k > $S/sample_${1}_s$k.log 2>&1
    rm -f $S/${1}_s$k/grid.png
  done
  note "$1 sampled"
}
planar pallas $(gpu 1) pallas &
planar fused $(gpu 2) fused &
( for opt in fused pallas; do
    CUDA_VISIBLE_DEVICES=$(gpu 3) timeout $(left) python benchmarks/bucket_speed.py \
      --out $S/buckets_$opt.json --epochs ${BUCKET_EPOCHS:-5} --dtypes bfloat16 --remat off \
      --modes buckets --option model.ppgn.$opt=true ${BUCKET_EXTRA:-} > $S/buckets_$opt.log 2>&1
    note "buckets_$opt rc=$?"
  done ) &
wait
tar czf "$OUT/round24.tar.gz" -C /tmp r24; cat $S/times.txt
if [ $(stat -c %s "$OUT/round24.tar.gz") -gt 16000000 ]; then
  split -b 15m "$OUT/round24.tar.gz" "$OUT/round24.tar.gz.part_" && rm "$OUT/round24.tar.gz"
fi
