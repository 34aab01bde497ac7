#!/usr/bin/env bash
# Round 67 (issues 12/13; prepared in session 31). Run in session 32, it ran out of time:
# training stopped at its 380 s timeout (epoch 1800) and every 45 s sampling timeout struck
# before a graph was written (docs/results/sbm/round67/first_call_times.txt). Use
# round67b_sbm_fp8_weights.sh, which ran. One H200 (~9 min planned): do the
# float8 weight settings keep SPECTRE SBM samples? (Rounds 60-62 checked them on Planar-60
# only; round 40 checked DDGJAX_FP8_PRODUCT on SBM.) Trains configs/best.py:spectre_sbm as
# round 40 did (training seed 1, until TRAIN_SECONDS), then samples its best_val (EMA) 5
# seeds x 40 graphs at 64 steps with the Mosaic kernels four ways: bf16, prod, weights,
# weights_y (DDGJAX_FP8_ACTIVATIONS; the last with round 65's launch defaults). Score on the
# CPU (our fit first, graph-tool's where time allows):
#   python benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm \
#       OUT/samples/r67_{bf16,prod,weights,weights_y}_seed{0,1,2,3,4}.json
#   bash benchmarks/calls/round67_sbm_fp8_weights.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
W=/tmp/r67_sbm
timeout ${TRAIN_SECONDS:-400} python3 train.py --config configs/best.py:spectre_sbm --workdir $W \
  --quiet --config.train.seed=1 > "$OUT/train.log" 2>&1
stamp train $?
cp $W/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for mode in 0 prod weights weights_y; do
  name=$([ "$mode" = 0 ] && echo bf16 || echo "$mode")
  DDGJAX_FP8_ACTIVATIONS=$mode timeout ${SAMPLE_SECONDS:-45} python3 benchmarks/vun_eval.py \
    --workdir $W --checkpoint best_val --ema --validity none --protocol none --seeds 5 \
    --num_samples 40 --num_steps 64 --pallas --name r67_$name --out "$OUT/samples" \
    > "$OUT/vun_$name.log" 2>&1
  stamp "sample_$name" $?
done
tar czf "$OUT/r67.tar.gz" -C "$OUT" samples metrics.jsonl train.log times.txt gpu.txt \
  vun_bf16.log vun_prod.log vun_weights.log vun_weights_y.log
cat "$OUT/times.txt"; tail -3 "$OUT/metrics.jsonl"
