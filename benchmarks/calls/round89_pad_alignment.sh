#!/usr/bin/env bash
# Round 89 (issues 12 and 13; session 37), one H200 (~5 min): does padding to an aligned node
# count pay? Round 88 found the bf16 train step at N = 187 (98 ms) nearly as slow as at 256
# (107 ms). benchmarks/pad_alignment.py, bf16, fused blocks, a fresh process per row, two
# rounds: the Planar-60 train step (batch 64) with 60 real nodes on 60 and on 64; the SBM top
# bucket (batch 32) with 187 real nodes on 187 and on 192; sampling 1024 Planar-60 graphs
# (32 steps, Algorithm 2, the Pallas kernels) on 60 and on 64.
#   bash benchmarks/calls/round89_pad_alignment.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
timeout ${LIMIT:-540} python3 benchmarks/pad_alignment.py --reps ${REPS:-2} \
  ${ROWS:---row train:60:60:64 --row train:60:64:64 --row train:187:187:32 --row train:187:192:32 --row sample:60:60:1024 --row sample:60:64:1024} \
  --option model.ppgn.fused=true --sample_option model.ppgn.pallas=true \
  --out "$OUT/res/pad_alignment.jsonl" > "$OUT/res/pad_alignment.log" 2>&1
echo "pad_alignment rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
cat "$OUT/res/times.txt" "$OUT/res/pad_alignment.log"
