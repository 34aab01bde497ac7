#!/usr/bin/env bash
# Round 88 (issue 12's scale target; session 37), one H200 (~6 min): the largest N at which
# PPGN 8x128 trains with batch 32 on the card the issue names (the table in
# docs/benchmarks.md was measured on an H100 in session 8). benchmarks/max_nodes.py, fused
# blocks, bf16 and float32, with and without remat per block; JAX's allocator may take 95 %
# of the card (XLA_PYTHON_CLIENT_MEM_FRACTION=0.95; the H100 run had JAX's default 75 %).
#   bash benchmarks/calls/round88_max_nodes_h200.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
XLA_PYTHON_CLIENT_MEM_FRACTION=${MEM_FRACTION:-0.95} timeout ${LIMIT:-540} \
  python3 benchmarks/max_nodes.py --out "$OUT/res/max_nodes_h200.json" \
  --nodes ${NODES:-128,187,256,320,384,448,512,576,640,768} --batch 32 \
  --option model.ppgn.fused=true --plot "$OUT/res/max_nodes_h200.png" \
  > "$OUT/res/max_nodes.log" 2>&1
echo "max_nodes rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
cat "$OUT/res/times.txt"; tail -6 "$OUT/res/max_nodes.log"
