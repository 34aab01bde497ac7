#!/usr/bin/env bash
# Round 73 (issue 12; session 33), one H200 (~4 min): the peer row under weights_y with the
# committed code (round 70's peer row ran the per-graph statistics through a gather that
# was then reverted). bench_speed.py, sampling, bfloat16, torch eager and torch.compile in
# the same process, as rounds 68 and 70.
#   bash benchmarks/calls/round73_peer_scatter.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
export DDGJAX_FP8_ACTIVATIONS=weights_y
timeout 230 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_wy.json" > "$OUT/bench_speed.log" 2>&1
echo "bench_speed rc=$? $(( $(date +%s) - T0 )) s" > "$OUT/times.txt"
cat "$OUT/times.txt"; grep -v Warn "$OUT/bench_speed.log" | tail -3
