#!/usr/bin/env bash
# Issue 12: does bfloat16 training (with fused blocks) keep the Planar-60 paper config's
# sample quality? Several training seeds per dtype, so that the dtype's effect can be told
# from the training seed's (round 22: one float32 seed at 0.177-0.180 average MMD, two
# bfloat16 seeds at 0.16 and 0.32). Each job of $JOBS, "NAME:GPU:SEED:DTYPE" (DTYPE f32:
# the paper config as it is; bf16: --config.model.compute_dtype=bfloat16
# --config.model.ppgn.fused=true), trains configs/paper.py:planar_60,ppgn,simple (2500
# epochs, checkpoints every 500) on its GPU, the jobs of one GPU one after another, then
# samples 3 seeds x 1024 graphs from its latest checkpoint in the dtype it trained in
# (graphs only; score on a CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#     --out check_NAME.json OUT/quality/NAME_s*/samples.json).
# Default JOBS (a 4-GPU machine, ~300 s on H200s): float32 seeds 1 and 2 on GPUs 0 and 1,
# bfloat16 seeds 2-5 two per GPU on GPUs 2 and 3. $OUT/quality.tar.gz.
# Usage: bash benchmarks/calls/planar_bf16_quality.sh OUT
set -uo pipefail
OUT=$1; G=/tmp/quality; mkdir -p $G
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > $G/gpu.txt 2>&1
JOBS=${JOBS:-"f1:0:1:f32 f2:1:2:f32 b2:2:2:bf16 b4:3:4:bf16 b3:2:3:bf16 b5:3:5:bf16"}
one() {  # NAME GPU SEED DTYPE
  local n=$1 gpu=$2 seed=$3 extra=()
  [ "$4" = bf16 ] && extra=(--config.model.compute_dtype=bfloat16 --config.model.ppgn.fused=true)
  local t0=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$gpu timeout ${TRAIN_SECONDS:-400} python train.py \
    --config configs/paper.py:planar_60,ppgn,simple --workdir runs/quality_$n --quiet \
    --config.train.seed=$seed --config.train.checkpoint_every_epochs=500 "${extra[@]}" \
    ${EXTRA:-} > $G/train_$n.log 2>&1
  echo "$n seed=$seed dtype=$4 gpu=$gpu train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $G/times.txt
  cp runs/quality_$n/metrics.jsonl $G/metrics_$n.jsonl 2>/dev/null
  for k in 0 1 2; do
    CUDA_VISIBLE_DEVICES=$gpu timeout 120 python sample.py --workdir runs/quality_$n \
      --checkpoint latest --num_samples ${NUM_SAMPLES:-1024} --seed $k --protocol none \
      --out $G/${n}_s$k > $G/sample_${n}_s$k.log 2>&1
    rm -f $G/${n}_s$k/grid.png
  done
}
declare -A queue
for job in $JOBS; do
  IFS=: read -r n gpu seed dtype <<< "$job"
  queue[$gpu]="${queue[$gpu]:-} $n:$seed:$dtype"
done
for gpu in "${!queue[@]}"; do
  ( for j in ${queue[$gpu]}; do IFS=: read -r n seed dtype <<< "$j"; one $n $gpu $seed $dtype; done ) &
done
wait
tar czf "$OUT/quality.tar.gz" -C /tmp quality; cat $G/times.txt
