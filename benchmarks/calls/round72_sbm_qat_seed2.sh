#!/usr/bin/env bash
# Round 72 (issues 12/13; session 33), one H200 (~6 min): round 69's SPECTRE SBM half on a
# second training seed. Trains the recipe (configs/best.py:spectre_sbm) with fp8_weights
# (quantisation-aware training) for 1000 epochs, training seed ${SEED:-2}, then 5 seeds x 40
# graphs at 64 steps through the Mosaic kernels from best_val (EMA): bf16 and weights_y,
# each seed set in one request (vun_eval --one_request). Score on the CPU:
#   python benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm \
#       OUT/samples/r72_{bf16,weights_y}_seed{0,1,2,3,4}.json
#   bash benchmarks/calls/round72_sbm_qat_seed2.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
W=/tmp/r72_sbm
timeout ${TRAIN_SECONDS:-380} python3 train.py --config configs/best.py:spectre_sbm \
  --workdir $W --quiet --config.train.seed=${SEED:-2} --config.train.num_epochs=1000 \
  --config.model.ppgn.fp8_weights=true > "$OUT/train.log" 2>&1
stamp train $?
cp $W/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for mode in 0 weights_y; do
  name=$([ "$mode" = 0 ] && echo bf16 || echo "$mode")
  ( XLA_PYTHON_CLIENT_MEM_FRACTION=0.4 DDGJAX_FP8_ACTIVATIONS=$mode \
      timeout ${SAMPLE_SECONDS:-150} python3 benchmarks/vun_eval.py --workdir $W \
      --checkpoint best_val --ema --validity none --protocol none --seeds 5 --one_request \
      --num_samples 40 --num_steps 64 --pallas --name r72_$name --out "$OUT/samples" \
      > "$OUT/vun_$name.log" 2>&1; stamp "sample_$name" $? ) &
done
wait
tar czf "$OUT/r72.tar.gz" -C "$OUT" samples metrics.jsonl train.log times.txt gpu.txt \
  vun_bf16.log vun_weights_y.log
rm -rf "$OUT/samples"
cat "$OUT/times.txt"; tail -1 "$OUT/metrics.jsonl"
