#!/usr/bin/env bash
# Round 77 (issue 12; session 34), one H200 (~5 min): Planar-60 under activation QAT on a
# second training seed, and round 76's missing float32 arm. Round 76 (fp8_weights and
# fp8_activations, training seed 3) found weights_y 30 % worse than bf16 on Planar-60 (where
# weights-only QAT of the same seed, round 69, was 9 % better) but the SBM degree gap gone.
#   (a) the Planar-60 paper config, bf16 + fused blocks, fp8_weights and fp8_activations,
#       training seed 1 (round 71's seed), then 2 x 1024 graphs per arm from `latest`:
#       f32 (XLA), bf16 (the Mosaic kernels), weights_y; sampling seeds 0 and 1.
#   (b) round 76's checkpoint (carried as .devdata/r76/r76_planar): f32, seeds 0 and 1.
# Score on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{f32,bf16,weights_y}_s{0,1}/samples.json OUT/q/r76f32_s{0,1}/samples.json
#   bash benchmarks/calls/round77_planar_act_qat.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
QAT="--config.model.ppgn.fp8_weights=true --config.model.ppgn.fp8_activations=true"
sample() {   # RUN ARM SEED NAME
  local mode args
  mode=$([ "$2" = weights_y ] && echo weights_y || echo 0)
  args=$([ "$2" = f32 ] && echo "--compute_dtype float32 --nopallas" \
         || echo "--compute_dtype bfloat16 --pallas")
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 DDGJAX_FP8_ACTIVATIONS=$mode timeout 100 \
    python3 sample.py --workdir "$1" --checkpoint latest --num_samples 1024 --seed "$3" \
    $args --protocol none --out "$OUT/q/$4" > "$OUT/q/sample_$4.log" 2>&1
  stamp "quality_$4" $?
  rm -f "$OUT/q/$4/grid.png" "$OUT/q/$4/chain.png"
}
( for k in 0 1; do sample .devdata/r76/r76_planar f32 $k r76f32_s$k; done ) &
RUN=/tmp/r77_planar
XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 timeout 260 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir $RUN --quiet \
  --config.train.seed=1 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 $QAT \
  > "$OUT/train_planar.log" 2>&1
stamp train_planar $?
cp $RUN/metrics.jsonl "$OUT/metrics_planar.jsonl" 2>/dev/null
wait
for k in 0 1; do
  ( for arm in f32 bf16 weights_y; do sample $RUN $arm $k ${arm}_s$k; done ) &
done
wait
tar czf "$OUT/r77.tar.gz" -C "$OUT" q times.txt gpu.txt metrics_planar.jsonl train_planar.log
rm -rf "$OUT/q"
cat "$OUT/times.txt"; tail -n 1 "$OUT/metrics_planar.jsonl"
