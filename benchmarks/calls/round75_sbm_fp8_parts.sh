#!/usr/bin/env bash
# Round 75 (issue 12; session 34), one H200 (~4 min): which float8 rounding costs the SPECTRE
# SBM degree MMD under weights_y on a model trained with fp8_weights (round 69's checkpoint,
# training seed 1, carried as .devdata/r69/r69_sbm). 5 seeds x 40 graphs at 64 steps
# from best_val (EMA) through the Mosaic kernels, three processes at once: bf16, weights
# (float8 block outputs, products and weights; the mixing output in bf16) and weights_y (the
# mixing output in float8 too). Score on the CPU:
#   DDGJAX_SBM_FIT=ddgjax python benchmarks/check_samples.py --data spectre_sbm \
#       --protocol spectre --validity sbm OUT/samples/r75_{bf16,weights,weights_y}_seed{0..4}.json
#   bash benchmarks/calls/round75_sbm_fp8_parts.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
W=.devdata/r69/r69_sbm
for mode in 0 weights weights_y; do
  name=$([ "$mode" = 0 ] && echo bf16 || echo "$mode")
  ( XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 DDGJAX_FP8_ACTIVATIONS=$mode \
      timeout ${SAMPLE_SECONDS:-240} python3 benchmarks/vun_eval.py --workdir $W \
      --checkpoint best_val --ema --validity none --protocol none --seeds 5 --one_request \
      --num_samples 40 --num_steps 64 --pallas --name r75_$name --out "$OUT/samples" \
      > "$OUT/vun_$name.log" 2>&1; stamp "sample_$name" $? ) &
done
wait
tar czf "$OUT/r75.tar.gz" -C "$OUT" samples times.txt gpu.txt vun_bf16.log vun_weights.log \
  vun_weights_y.log
rm -rf "$OUT/samples"
cat "$OUT/times.txt"; tail -n 2 "$OUT"/vun_*.log
