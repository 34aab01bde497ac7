#!/usr/bin/env bash
# Round 86 (issue 12; session 36), one H200 (~2 min): the prototype that session 35 said
# decides the whole-block kernel question for small models: one Ego-small PPGN block's
# forward (N = 17, 32 channels, bf16) as XLA's fused block against two Pallas Triton
# kernels (the pair-MLP kernel, then a product-mix-norm kernel with one program per
# graph), at batch 64 (one run) and 320 (five seeds), 4 and 8 warps.
#   bash benchmarks/calls/round86_whole_block.sh OUT             # as first run: one block per call
#   CHAIN=12 WARPS=8,16 bash benchmarks/calls/round86_whole_block.sh OUT  # 12 blocks chained per call
#   CHAIN=12 WARPS=4,8 EXTRA=--three_d bash benchmarks/calls/round86_whole_block.sh OUT  # 3-D accumulator
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
git rev-parse HEAD > "$OUT/commit.txt" 2>&1
T0=$(date +%s)
timeout 400 python3 benchmarks/whole_block_probe.py --batches 64,320 --warps ${WARPS:-4,8} --chain ${CHAIN:-1} ${EXTRA:-} \
  --out "$OUT/whole_block.json" > "$OUT/whole_block.log" 2>&1
echo "probe rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
cat "$OUT/times.txt"; grep -v Warn "$OUT/whole_block.log" | tail -12
