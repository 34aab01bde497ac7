#!/usr/bin/env bash
# Round 79 (issue 12; session 34), one H200 (~3.5 min, the session's last device time): a
# third Planar-60 checkpoint trained with fp8_weights alone (the float8 recipe), training
# seed 2, to see whether weights_y's quality holds beyond rounds 69-71's two. f32 (XLA)
# and weights_y, 2 x 1024 graphs each from `latest`, sampling seeds 0 and 1. Score on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{f32,weights_y}_s{0,1}/samples.json
#   bash benchmarks/calls/round79_planar_qat_seed2.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
RUN=/tmp/r79_planar
XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 timeout 150 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir $RUN --quiet \
  --config.train.seed=2 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 \
  --config.model.ppgn.fp8_weights=true > "$OUT/train_planar.log" 2>&1
stamp train_planar $?
cp $RUN/metrics.jsonl "$OUT/metrics_planar.jsonl" 2>/dev/null
for arm in f32 weights_y; do
  ( mode=$([ "$arm" = weights_y ] && echo weights_y || echo 0)
    args=$([ "$arm" = f32 ] && echo "--compute_dtype float32 --nopallas" \
           || echo "--compute_dtype bfloat16 --pallas")
    for k in 0 1; do
      XLA_PYTHON_CLIENT_MEM_FRACTION=0.4 DDGJAX_FP8_ACTIVATIONS=$mode timeout 45 \
        python3 sample.py --workdir $RUN --checkpoint latest --num_samples 1024 --seed $k \
        $args --protocol none --out "$OUT/q/${arm}_s$k" > "$OUT/q/sample_${arm}_s$k.log" 2>&1
      stamp "quality_${arm}_s$k" $?
      rm -f "$OUT/q/${arm}_s$k/grid.png" "$OUT/q/${arm}_s$k/chain.png"
    done ) &
done
wait
tar czf "$OUT/r79.tar.gz" -C "$OUT" q times.txt gpu.txt metrics_planar.jsonl train_planar.log
rm -rf "$OUT/q"
cat "$OUT/times.txt"; tail -n 1 "$OUT/metrics_planar.jsonl"
