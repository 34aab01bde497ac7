#!/usr/bin/env bash
# Round 78 (issue 12; session 34), one H200 (~6 min): (a) whether a Mosaic GPU wgmma takes a
# transposed left operand (benchmarks/probe_wgmma_transposed_a.py: the lowering the
# readout's output-layer fold needs); (b) the peer row under weights_y on this session's
# card (as rounds 68 and 73: bench_speed.py, sampling, bfloat16, torch eager and
# torch.compile in the same process), another point of the card-to-card spread.
#   bash benchmarks/calls/round78_peer_probe.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 90 python3 benchmarks/probe_wgmma_transposed_a.py --out "$OUT/probe_transposed_a.json" \
  > "$OUT/probe.log" 2>&1; stamp probe $?
export DDGJAX_FP8_ACTIVATIONS=weights_y
timeout 250 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_wy.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"; grep -v Warn "$OUT/probe.log" | tail -5; grep -v Warn "$OUT/bench_speed.log" | tail -3
