#!/usr/bin/env bash
# Round 67b (issues 12/13; session 32), one H200 (~8 min): round 67 again after its first
# call ran out of time (training stopped by its 380 s timeout at epoch 1800, then every
# sampling process by its 45 s one, before any graph was written). Do the float8 weight
# settings keep SPECTRE SBM samples? Trains configs/best.py:spectre_sbm for 1000 epochs
# (training seed 1; best_val among the validations at epochs 500 and 1000), then samples
# its best_val (EMA) 5 seeds x 40 graphs at 64 steps through the Mosaic kernels four ways,
# in four processes at once: bf16, prod, weights, weights_y (DDGJAX_FP8_ACTIVATIONS). The
# best_val checkpoint comes back (ckpt.tar.gz.part*) for CPU pilots. Score on the CPU:
#   python benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm \
#       OUT/samples/r67_{bf16,prod,weights,weights_y}_seed{0,1,2,3,4}.json
#   bash benchmarks/calls/round67b_sbm_fp8_weights.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
W=/tmp/r67_sbm
timeout ${TRAIN_SECONDS:-300} python3 train.py --config configs/best.py:spectre_sbm --workdir $W \
  --quiet --config.train.seed=1 --config.train.num_epochs=${EPOCHS:-1000} > "$OUT/train.log" 2>&1
stamp train $?
cp $W/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for mode in 0 prod weights weights_y; do
  name=$([ "$mode" = 0 ] && echo bf16 || echo "$mode")
  ( XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 DDGJAX_FP8_ACTIVATIONS=$mode \
      timeout ${SAMPLE_SECONDS:-200} python3 benchmarks/vun_eval.py \
      --workdir $W --checkpoint best_val --ema --validity none --protocol none --seeds 5 \
      --num_samples 40 --num_steps 64 --pallas --name r67_$name --out "$OUT/samples" \
      > "$OUT/vun_$name.log" 2>&1; stamp "sample_$name" $? ) &
done
wait
tar czf "$OUT/r67b.tar.gz" -C "$OUT" samples metrics.jsonl train.log times.txt gpu.txt \
  vun_bf16.log vun_prod.log vun_weights.log vun_weights_y.log
tar czf "$OUT/ckpt.tar.gz" -C /tmp r67_sbm/config.json r67_sbm/dataset.json \
  r67_sbm/checkpoints/best_val
split -b 15M "$OUT/ckpt.tar.gz" "$OUT/ckpt.tar.gz.part" && rm "$OUT/ckpt.tar.gz"
rm -rf "$OUT/samples"
cat "$OUT/times.txt"; ls -la "$OUT"; tail -2 "$OUT/metrics.jsonl"
