#!/usr/bin/env bash
# Round 32 (issue 12; prepared in session 21, which had no device time left): sample quality
# with the input embedding folded into the first block (DDGJAX_FOLD_EMBED=1, the default)
# against the unfolded model, from one checkpoint; and the Mosaic kernel tests on the GPU
# backend in one process (two of them failed in round 31 on a bug of the tests' helper,
# fixed since and not rerun on a GPU).
# Trains the Planar-60 paper config in bf16 with fused blocks (training seed 1, as rounds
# 28-29), then samples 2 x 1024 graphs with --pallas per setting (same sampling seeds).
# Score on CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/fold{1,0}_s{0,1}/samples.json
# Usage: bash benchmarks/calls/round32_fold_quality.sh OUT
set -uo pipefail
OUT=${1:?OUT}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
( XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 300 python3 -m pytest -q \
    -n 0 -p no:cacheprovider tests/test_mgpu_kernels.py > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/times.txt" ) &
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 400 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir runs/r32q \
  --quiet --config.train.seed=1 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
echo "train rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
wait
cp runs/r32q/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for k in 0 1; do
  for fold in 1 0; do
    DDGJAX_FOLD_EMBED=$fold timeout 120 python3 sample.py --workdir runs/r32q --checkpoint latest \
      --num_samples 1024 --seed $k --pallas --compute_dtype bfloat16 --protocol none \
      --out "$OUT/fold${fold}_s$k" > "$OUT/sample_fold${fold}_s$k.log" 2>&1
    echo "sample fold$fold s$k rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
    rm -f "$OUT/fold${fold}_s$k/grid.png"
  done
done
tail -3 "$OUT/pytest.log"
