#!/usr/bin/env bash
# Issue 12: the Planar-60 paper config (configs/paper.py:planar_60,ppgn,simple, 2500
# epochs, 7500 steps) trained in bfloat16 with fused blocks, timed, on the GPUs each run
# names, one run after another; then 3 seeds x 1024 graphs from the first run's latest
# checkpoint (graphs only: MMDs on a CPU with benchmarks/check_samples.py --data planar_60
# --protocol paper --validity planar). "trained ... in S s" in each train_NAME.log is the
# CLI's own loop time (compiles included); times.txt has each process's wall time.
#   RUNS        "NAME:GPU,GPU,... ..." (default "x4:0,1,2,3 x2:0,1")
#   CKPT_EVERY  checkpoint every this many epochs (default 2500: only at the end)
# $OUT/planar_minute.tar.gz. Round 22 (docs/benchmarks.md) ran it as
#   RUNS="x2:0,1" CKPT_EVERY=500 and RUNS="x4:0,1,2,3 x2c:0,1" on 4 x H200.
# One GPU (issue 12's one-minute target): RUNS="x1:0" bash benchmarks/calls/planar_minute.sh OUT
# (session 38 ran it before the fixes below; it ran out of its 300 s and nothing came back).
# Usage: bash benchmarks/calls/planar_minute.sh OUT
set -uo pipefail
OUT=$1; G=/tmp/planar_minute; mkdir -p $G
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > $G/gpu.txt 2>&1
first=
for run in ${RUNS:-x4:0,1,2,3 x2:0,1}; do
  n=${run%%:*}; first=${first:-$n}
  t0=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=${run#*:} timeout 300 python train.py \
    --config configs/paper.py:planar_60,ppgn,simple --workdir runs/p60_$n --quiet \
    --config.model.compute_dtype=bfloat16 --config.model.ppgn.fused=true \
    --config.train.checkpoint_every_epochs=${CKPT_EVERY:-2500} > $G/train_$n.log 2>&1
  echo "$n train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $G/times.txt
  cp runs/p60_$n/metrics.jsonl $G/metrics_$n.jsonl
done
tar czf "$OUT/planar_minute.tar.gz" -C /tmp planar_minute   # the timings first
# one sampling seed per visible GPU, in turn (session 38's one-GPU call ran out of its 300 s
# with nothing written yet; there the seeds meant for GPUs 1 and 2 would have run on the CPU)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); ngpu=$(( ngpu > 0 ? ngpu : 1 ))
for s in 0 1 2; do
  CUDA_VISIBLE_DEVICES=$(( s % ngpu )) timeout 90 python sample.py --workdir runs/p60_$first \
    --checkpoint latest --num_samples 1024 --seed $s --protocol none --out $G/s$s \
    > $G/sample_s$s.log 2>&1 &
  [ $(( (s + 1) % ngpu )) -eq 0 ] && wait
done
wait
rm -f $G/s*/grid.png
tar czf "$OUT/planar_minute.tar.gz" -C /tmp planar_minute; cat $G/times.txt
