#!/usr/bin/env bash
# Round 23, call 1 (issue 12), a 4-GPU machine, two questions side by side:
# * GPUs 1-3: does bfloat16 training keep the Planar-60 paper config's sample quality?
#   benchmarks/calls/planar_bf16_quality.sh with float32 seed 1 on GPU 1, bf16 seeds 2, 3, 5 on
#   GPU 2, bf16 seed 4 then float32 seed 2 on GPU 3 (round 22 has float32 seed 0 and bf16
#   seeds 0 and 1).
# * GPU 0, then GPU 1 once its training is done: is a graph cheaper in a smaller batch
#   (benchmarks/batch_scaling.py: sampling per 1024 graphs at batches 16-1024, Pallas and
#   XLA-fused paths; the bf16 fused train step at batches 16, 32, 64).
# Everything still running at $HARD_SECONDS (default 570) is stopped; $OUT/round23.tar.gz.
# Usage: bash benchmarks/calls/round23_call1.sh OUT
set -uo pipefail
OUT=$1; G=/tmp/quality; S=/tmp/r23; mkdir -p $G $S
HARD=${HARD_SECONDS:-570}; T0=$(date +%s)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > $S/gpu.txt 2>&1
JOBS=${JOBS:-"f1:1:1:f32 b2:2:2:bf16 b3:2:3:bf16 b5:2:5:bf16 b4:3:4:bf16 f2:3:2:f32"} \
  bash benchmarks/calls/planar_bf16_quality.sh $S > $S/quality_driver.log 2>&1 &
qpid=$!
( CUDA_VISIBLE_DEVICES=0 python benchmarks/batch_scaling.py --out $S/scaling_pallas.json \
    --sample_options "model.ppgn.pallas=true" ${QUICK:-} > $S/scaling_pallas.log 2>&1
  echo "scaling_pallas rc=$? at $(( $(date +%s) - T0 )) s" >> $S/times.txt ) &
spid=$!
( f1_busy() { ! grep -q "^f1 " $G/times.txt 2>/dev/null || pgrep -f "workdir runs/quality_f1" > /dev/null; }
  while f1_busy || { sleep 3; f1_busy; }; do sleep 3; done   # f1 trained and sampled
  CUDA_VISIBLE_DEVICES=1 python benchmarks/batch_scaling.py --out $S/scaling_fused.json \
    --sample_options "model.ppgn.fused=true" --train_batches "" ${QUICK:-} > $S/scaling_fused.log 2>&1
  echo "scaling_fused rc=$? at $(( $(date +%s) - T0 )) s" >> $S/times.txt ) &
fpid=$!
while [ $(( $(date +%s) - T0 )) -lt $(( HARD - 20 )) ] && kill -0 $qpid 2>/dev/null; do sleep 3; done
while [ $(( $(date +%s) - T0 )) -lt $(( HARD - 20 )) ] && { kill -0 $spid || kill -0 $fpid; } 2>/dev/null; do sleep 3; done
echo "stopping at $(( $(date +%s) - T0 )) s" >> $S/times.txt
for p in $qpid $spid $fpid; do kill -TERM -- $p 2>/dev/null; done
pkill -TERM -f "runs/quality_" ; pkill -TERM -f "batch_scaling.py"; sleep 5
cp -r $G $S/ 2>/dev/null
tar czf "$OUT/round23.tar.gz" -C /tmp r23; cat $S/times.txt $G/times.txt
# a file over 16 MiB does not come back: then 15 MiB parts (cat them | tar xz)
if [ $(stat -c %s "$OUT/round23.tar.gz") -gt 16000000 ]; then
  split -b 15m "$OUT/round23.tar.gz" "$OUT/round23.tar.gz.part_" && rm "$OUT/round23.tar.gz"
fi
