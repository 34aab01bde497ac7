#!/usr/bin/env bash
# Round 98 (issue 12's two-GPU target; session 38), the 2 x H200 machine (~4 min): round 18's
# measurement (the Planar-60 paper config, batch 64, 450 epochs in 3 jitted calls,
# benchmarks/epoch_times.py) repeated with today's code, on GPU 0 alone and then on both,
# in float32 (round 18's setting) and in bf16 with fused blocks (today's fast setting; a
# shorter step leaves the gradient all-reduce a larger share).
#   bash benchmarks/calls/round98_two_gpus_refresh.sh OUT
set -u
OUT=${1:?OUT}
R=$OUT/res
mkdir -p "$R" /tmp/r98
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > "$R/gpu.txt" 2>&1
T0=$(date +%s)
P60=configs/paper.py:planar_60,ppgn,simple
for setting in f32 bf16; do
  opts=""
  [ $setting = bf16 ] && opts="--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
  for vis in 0 0,1; do
    name=${setting}_gpus_${vis/,/_}
    CUDA_VISIBLE_DEVICES=$vis timeout 100 python3 benchmarks/epoch_times.py --epochs 450 \
      --chunks 3 $opts --out "$R/$name.json" $P60 > /tmp/r98/$name.log 2>&1
    echo "$name rc=$? $(( $(date +%s) - T0 )) s" >> "$R/times.txt"
  done
done
tar czf "$R/logs.tar.gz" -C /tmp r98
cat "$R/times.txt"; tail -n 3 /tmp/r98/*.log
