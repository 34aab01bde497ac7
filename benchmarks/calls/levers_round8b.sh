#!/usr/bin/env bash
# Planar levers round 8, second GPU call (issue 10): train configs/best.py:spectre_planar_64
# while sweeping samplers on the round-8a Planar-60 run (latest and best_val), then the
# SPECTRE V.U.N. protocol (5 seeds x 40 graphs) for several samplers on the Planar-64 run.
# Usage: bash benchmarks/calls/levers_round8b.sh OUT DATA_DIR TARS
set -euo pipefail
OUT=$1; DATA_DIR=$2; TARS=$3
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS"
python benchmarks/planar_levers.py train --out "$OUT/res" --runs $RUNS \
  --data "$DATA_DIR/planar_60.json" --variants best_p64 --deadline "${DEADLINE:-380}" \
  --extra "${EXTRA:-}" > "$OUT/res/train_phase.log" 2>&1 &
TRAIN=$!
[ -d $RUNS/best_p60 ] || tar xzf "$TARS/best_p60.tar.gz" -C $RUNS
SWEEP=${SWEEP:-alg1_32_pow3,alg1_32_pow3_mix03,alg1_32_pow3_mix05,alg1_32_pow3_mix07,alg1_32_pow3_mix085,alg1_32_pow4_mix05,alg1_32_pow4_mix07,alg1_32_pow3_mix05_a2b002,alg2_32_pow4,alg1_64_pow3_mix05,alg1_128_pow3_argmax}
for ck in latest best_val; do
  python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --tars "$TARS" \
    --variants best_p60 --checkpoint $ck --result_name "levers_round8_p60_$ck.json" \
    --num_samples "${NUM_SAMPLES:-512}" --samplers "$SWEEP" > "$OUT/res/sample_p60_$ck.log" 2>&1
  SWEEP=${SWEEP_VAL:-alg1_32_pow3_mix05,alg1_32_pow3_mix07,alg2_32_pow4}
done
wait $TRAIN
P64_SAMPLERS=${P64_SAMPLERS:-"64:2:power:3:0 64:1:power:3:0.5 64:1:power:3:0.7 32:1:power:3:0.7 64:1:power:3:0.85 32:2:power:4:0"}
for s in $P64_SAMPLERS; do
  IFS=: read -r steps alg gk gv mix <<< "$s"
  python benchmarks/vun_eval.py --workdir $RUNS/best_p64 --checkpoint latest --ema --validity planar \
    --protocol spectre --seeds "${SEEDS:-5}" --num_steps "$steps" --option algorithm=$alg \
    --option grid=$gk:$gv --option renoise_mix=$mix --no_graphs \
    --name "p64r8_${steps}_alg${alg}_${gk}${gv}_mix${mix}" --out "$OUT/res" \
    > "$OUT/res/vun_${steps}_${alg}_${gv}_${mix}.log" 2>&1 || true
done
mv "$OUT"/res/*.tar.gz "$OUT/" 2>/dev/null || true
for d in $RUNS/*/; do cp "$d/metrics.jsonl" "$OUT/res/metrics_$(basename "$d").jsonl" 2>/dev/null || true; done
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
