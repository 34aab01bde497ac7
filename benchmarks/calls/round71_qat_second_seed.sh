#!/usr/bin/env bash
# Round 71 (issue 12; session 33), one H200 (~6 min): round 69's question on a second
# training seed, with a same-call control. Trains the Planar-60 paper config in bf16 with
# fused blocks, training seed ${SEED:-1}, twice at once: with fp8_weights (quantisation-
# aware training; `qat`) and without (`ctrl`). Then 2 x 1024 graphs per arm from `latest`,
# sampling seeds 0 and 1: qat in f32 (XLA), bf16 (the Mosaic kernels) and weights_y (issue
# 12's 4x setting); ctrl in f32 and weights_y. Score on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{qat_f32,qat_bf16,qat_weights_y,ctrl_f32,ctrl_weights_y}_s{0,1}/samples.json
#   bash benchmarks/calls/round71_qat_second_seed.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
train() {   # name, extra flags
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.4 timeout ${TRAIN_SECONDS:-300} python3 train.py \
    --config configs/paper.py:planar_60,ppgn,simple --workdir /tmp/r71_$1 --quiet \
    --config.train.seed=${SEED:-1} --config.model.compute_dtype=bfloat16 \
    --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 $2 \
    > "$OUT/train_$1.log" 2>&1
  stamp "train_$1" $?
  cp /tmp/r71_$1/metrics.jsonl "$OUT/metrics_$1.jsonl" 2>/dev/null
}
arms() {    # run name, arms...
  local run=$1; shift
  for k in 0 1; do
    for arm in "$@"; do
      mode=$([ "$arm" = weights_y ] && echo weights_y || echo 0)
      args=$([ "$arm" = f32 ] && echo "--compute_dtype float32 --nopallas" \
             || echo "--compute_dtype bfloat16 --pallas")
      XLA_PYTHON_CLIENT_MEM_FRACTION=0.35 DDGJAX_FP8_ACTIVATIONS=$mode timeout 100 \
        python3 sample.py --workdir /tmp/r71_$run --checkpoint latest --num_samples 1024 \
        --seed $k $args --protocol none --out "$OUT/q/${run}_${arm}_s$k" \
        > "$OUT/q/sample_${run}_${arm}_s$k.log" 2>&1
      stamp "quality_${run}_${arm}_s$k" $?
      rm -f "$OUT/q/${run}_${arm}_s$k/grid.png" "$OUT/q/${run}_${arm}_s$k/chain.png"
    done
  done
}
train qat --config.model.ppgn.fp8_weights=true & train ctrl "" & wait
arms qat f32 bf16 weights_y & arms ctrl f32 weights_y & wait
tar czf "$OUT/r71.tar.gz" -C "$OUT" q times.txt gpu.txt metrics_qat.jsonl metrics_ctrl.jsonl \
  train_qat.log train_ctrl.log
rm -rf "$OUT/q"
cat "$OUT/times.txt"; tail -1 "$OUT/metrics_qat.jsonl"; tail -1 "$OUT/metrics_ctrl.jsonl"
