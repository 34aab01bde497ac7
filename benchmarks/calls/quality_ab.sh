#!/usr/bin/env bash
# Sample quality of one on/off switch (an environment variable read when the sampler is
# compiled), both settings from one checkpoint; and the Mosaic kernel tests on the GPU
# backend in one process (no xdist: several workers on one GPU ran out of memory).
# Trains the Planar-60 paper config in bf16 with fused blocks (training seed 1, as rounds
# 28-29), then samples 2 x 1024 graphs with --pallas (Mosaic kernels) per setting, same
# sampling seeds. Score on CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/PREFIX{1,0}_s{0,1}/samples.json
# Usage: bash benchmarks/calls/quality_ab.sh OUT VARIABLE PREFIX RUN_NAME
set -uo pipefail
OUT=${1:?OUT}; VAR=${2:?VARIABLE}; PREFIX=${3:?PREFIX}; RUN=runs/${4:?RUN_NAME}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
( XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 300 python3 -m pytest -q \
    -n 0 -p no:cacheprovider tests/test_mgpu_kernels.py > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/times.txt" ) &
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 400 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir "$RUN" \
  --quiet --config.train.seed=1 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
echo "train rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
wait
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl" 2>/dev/null
for k in 0 1; do
  for v in 1 0; do
    env DDGJAX_PALLAS_BACKEND=mosaic "$VAR=$v" timeout 120 python3 sample.py --workdir "$RUN" \
      --checkpoint latest --num_samples 1024 --seed $k --pallas --compute_dtype bfloat16 \
      --protocol none --out "$OUT/${PREFIX}${v}_s$k" > "$OUT/sample_${PREFIX}${v}_s$k.log" 2>&1
    echo "sample $PREFIX$v s$k rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
    rm -f "$OUT/${PREFIX}${v}_s$k/grid.png"
  done
done
tail -3 "$OUT/pytest.log"
