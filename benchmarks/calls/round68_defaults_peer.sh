#!/usr/bin/env bash
# Round 68 (issue 12; session 32), one H200 (~5 min): round 65's 4x row again, now under
# the defaults that session 31 set from it: only DDGJAX_FP8_ACTIVATIONS=weights_y (the norm
# kernel, 3 CTAs per SM for it and 2 for the mixing and readout kernels follow from it; no
# launch variable set). Two fresh-process sampling rows, then the peer row
# (bench_speed.py, sampling, bfloat16, torch eager and torch.compile in the same process).
#   bash benchmarks/calls/round68_defaults_peer.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
export DDGJAX_FP8_ACTIVATIONS=weights_y
for k in 1 2; do
  timeout 80 python3 benchmarks/sample_row.py "$OUT/sample_wy$k.json" > "$OUT/sample_wy$k.log" 2>&1
  stamp "sample_wy$k" $?
done
timeout 240 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_wy.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -v Warn "$OUT/bench_speed.log" | tail -3
