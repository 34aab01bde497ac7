#!/usr/bin/env bash
# Round 28 (issue 12): sample quality with the Mosaic GPU kernels against the Triton ones.
# Trains the Planar-60 paper config in bf16 with fused blocks (training seed 1, checkpoint
# only at the end), then samples 2 x 1024 graphs with --pallas under each backend (same
# sampling seeds). Score on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/{mosaic,triton}_s{0,1}/samples.json
# Usage: bash benchmarks/calls/round28_quality.sh OUT
set -uo pipefail
OUT=${1:?OUT}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
timeout 400 python3 train.py --config configs/paper.py:planar_60,ppgn,simple --workdir runs/r28q \
  --quiet --config.train.seed=1 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
echo "train rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
cp runs/r28q/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for k in 0 1; do
  for b in mosaic triton; do
    DDGJAX_PALLAS_BACKEND=$b timeout 120 python3 sample.py --workdir runs/r28q --checkpoint latest \
      --num_samples 1024 --seed $k --pallas --compute_dtype bfloat16 --protocol none \
      --out "$OUT/${b}_s$k" > "$OUT/sample_${b}_s$k.log" 2>&1
    echo "sample $b s$k rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
    rm -f "$OUT/${b}_s$k/grid.png"
  done
done
ls -la "$OUT"/*_s0
