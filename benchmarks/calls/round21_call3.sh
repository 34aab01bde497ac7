#!/usr/bin/env bash
# Round 21, call 3 (issue 12), one GPU: does bfloat16 training with fused blocks keep the
# Planar-60 paper config's sample quality? Side by side on the card: the paper config as it
# is (float32, reference blocks, training seed 0) and bf16 + fused blocks with training
# seed 1 (call 1 trained seed 0 that way), checkpoints every 500 epochs; then 3 seeds x
# 1024 graphs from each run's latest checkpoint, in the dtype it trained in (graphs only;
# MMDs on a CPU with benchmarks/check_samples.py --data planar_60 --protocol paper).
# $OUT/p60q.tar.gz. Usage: bash benchmarks/calls/round21_call3.sh OUT
set -uo pipefail
OUT=$1; G=/tmp/p60q; mkdir -p $G
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > $G/gpu.txt
run() {  # NAME SEED OVERRIDES...
  local n=$1 s=$2; shift 2
  local t0=$(date +%s%N)
  timeout ${TRAIN_SECONDS:-330} python train.py --config configs/paper.py:planar_60,ppgn,simple \
    --workdir runs/q_$n --quiet --config.train.seed=$s \
    --config.train.checkpoint_every_epochs=500 "$@" > $G/train_$n.log 2>&1
  echo "$n train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $G/times.txt
  cp runs/q_$n/metrics.jsonl $G/metrics_$n.jsonl
  for k in 0 1 2; do
    timeout 60 python sample.py --workdir runs/q_$n --checkpoint latest --num_samples 1024 \
      --seed $k --protocol none --out $G/${n}_s$k > $G/sample_${n}_s$k.log 2>&1
    rm -f $G/${n}_s$k/grid.png
  done
}
run f32 0 &
run bf16 1 --config.model.compute_dtype=bfloat16 --config.model.ppgn.fused=true &
wait
tar czf "$OUT/p60q.tar.gz" -C /tmp p60q; cat $G/times.txt
