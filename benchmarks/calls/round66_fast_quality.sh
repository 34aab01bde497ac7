#!/usr/bin/env bash
# Round 66 (issue 12; prepared in session 31, not yet run), one H200: the sample quality
# the issue asks for at the fast setting, against float32. Trains the Planar-60 paper
# config in bf16 with fused blocks (training seed ${SEED:-3}, a third checkpoint after
# rounds 60 and 62), then 2 x 1024 graphs per arm from its last checkpoint, sampling seeds
# 0 and 1: f32 (float32, XLA), bf16 (the Pallas kernels, no float8) and weights_y (round
# 65's 4x setting: DDGJAX_FP8_ACTIVATIONS=weights_y, whose defaults now run the norm kernel
# and the CTA counts). The norm-kernel tests compiled on the GPU beside the training. Score
# on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{f32,bf16,weights_y}_s{0,1}/samples.json
#   bash benchmarks/calls/round66_fast_quality.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
RUN=runs/r66
( XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 300 python3 -m pytest -q \
    -n 0 -p no:cacheprovider tests/test_norm_kernel.py -k "ppgn or vmap" \
    > "$OUT/pytest.log" 2>&1; stamp pytest $? ) &
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 300 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir "$RUN" \
  --quiet --config.train.seed=${SEED:-3} --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
stamp train $?
wait
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl" 2>/dev/null
arm_args() {
  case $1 in
    f32) echo "--compute_dtype float32 --nopallas" ;;
    *) echo "--compute_dtype bfloat16 --pallas" ;;
  esac
}
for k in 0 1; do
  for arm in f32 bf16 weights_y; do
    mode=$([ "$arm" = weights_y ] && echo weights_y || echo 0)
    env DDGJAX_FP8_ACTIVATIONS=$mode timeout 120 python3 sample.py --workdir "$RUN" \
      --checkpoint latest --num_samples 1024 --seed $k $(arm_args $arm) --protocol none \
      --out "$OUT/q/${arm}_s$k" > "$OUT/q/sample_${arm}_s$k.log" 2>&1
    stamp "quality_${arm}_s$k" $?
    rm -f "$OUT/q/${arm}_s$k/grid.png" "$OUT/q/${arm}_s$k/chain.png"
  done
done
cat "$OUT/times.txt"
tail -3 "$OUT/pytest.log"; tail -2 "$OUT/train.log"
