#!/usr/bin/env bash
# Round 62 (issue 12; prepared in session 30, not yet run), one H200: sample quality of the
# float8 settings on Planar-60. Trains the paper config in bf16 with fused blocks (training
# seed ${SEED:-2}, another than round 60's), then 2 x 1024 graphs per setting in ARMS
# (DDGJAX_FP8_ACTIVATIONS values; default prod weights weights_y) from its last checkpoint,
# same sampling seeds; the kernel tests compiled on the GPU beside the training. Score on the
# CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{prod,weights,weights_y}_s{0,1}/samples.json
#   bash benchmarks/calls/round62_fp8_quality.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
RUN=runs/r62
( XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 300 python3 -m pytest -q \
    -n 0 -p no:cacheprovider tests/test_mgpu_kernels.py \
    -k "float8_weights or fp8_weights or fp8_activations_in_the_ppgn or float8" \
    > "$OUT/pytest.log" 2>&1; stamp pytest $? ) &
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 300 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir "$RUN" \
  --quiet --config.train.seed=${SEED:-2} --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
stamp train $?
wait
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl" 2>/dev/null
for k in 0 1; do
  for arm in ${ARMS:-prod weights weights_y}; do
    env DDGJAX_PALLAS_BACKEND=mosaic DDGJAX_FP8_ACTIVATIONS=$arm timeout 120 python3 sample.py \
      --workdir "$RUN" --checkpoint latest --num_samples 1024 --seed $k --pallas \
      --compute_dtype bfloat16 --protocol none --out "$OUT/q/${arm}_s$k" \
      > "$OUT/q/sample_${arm}_s$k.log" 2>&1
    stamp "quality_${arm}_s$k" $?
    rm -f "$OUT/q/${arm}_s$k/grid.png" "$OUT/q/${arm}_s$k/chain.png"
  done
done
cat "$OUT/times.txt"
tail -3 "$OUT/pytest.log"; tail -2 "$OUT/train.log"
