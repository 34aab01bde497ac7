#!/usr/bin/env bash
# Planar levers round 7 (issue 10), one GPU call: train three variants side by side
# (training grid power:2, log noise channel, both; 2500 epochs) while sweeping the new
# samplers on the round-3 ct_marginal_5k checkpoint; then sample the new runs and run the
# per-level diagnostic on all four. Usage: bash benchmarks/calls/levers_round7.sh OUT DATA TARS
set -euo pipefail
OUT=$1; DATA=$2; TARS=$3
RUNS=runs/levers
SWEEP_5K=alg1_32_pow3,alg2_32_pow4,alg1_32_pow3_a2b002,alg1_32_pow3_a2b005,alg1_32_pow3_a2b01,alg1_32_pow3_mix01,alg1_32_pow3_mix03,alg1_32_pow3_ls15,alg1_32_pow3_ls2,alg2_32_pow4_ls15,alg2_32_pow4_ls2
SWEEP_NEW=alg1_32_pow3,alg2_32_pow4,alg1_128_pow3_argmax,alg1_32_pow3_a2b005,alg1_32_pow3_mix03
# CPU smoke: DEADLINE=60 NUM_SAMPLES=8 DRAWS=1 SAMPLERS_5K=alg1_32_pow3 SAMPLERS_NEW=alg1_32_pow3 \
#   EXTRA="--config.model.ppgn.hidden=8 --config.model.ppgn.num_blocks=2 --config.train.num_epochs=2"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS"
python benchmarks/planar_levers.py train --out "$OUT/res" --runs $RUNS --data "$DATA" \
  --variants ct_marg_tg2,ct_marg_log,ct_marg_tg2_log --deadline "${DEADLINE:-390}" --extra "${EXTRA:-}" \
  > "$OUT/res/train_phase.log" 2>&1 &
TRAIN=$!
python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --tars "$TARS" \
  --variants ct_marginal_5k --result_name levers_round7_5k.json \
  --num_samples "${NUM_SAMPLES:-512}" --samplers "${SAMPLERS_5K:-$SWEEP_5K}" \
  > "$OUT/res/sample_5k.log" 2>&1
wait $TRAIN
python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --tars "$OUT/res" \
  --variants ct_marg_tg2,ct_marg_log,ct_marg_tg2_log --result_name levers_round7_new.json \
  --num_samples "${NUM_SAMPLES:-512}" --samplers "${SAMPLERS_NEW:-$SWEEP_NEW}" \
  > "$OUT/res/sample_new.log" 2>&1 &
SAMPLE=$!
for r in ct_marginal_5k ct_marg_tg2 ct_marg_log ct_marg_tg2_log; do
  python benchmarks/per_level_nll.py --workdir $RUNS/$r --checkpoint latest --ema --data "$DATA" \
    --split test --draws "${DRAWS:-8}" --out "$OUT/res/per_level_$r.json" > "$OUT/res/per_level_$r.log" 2>&1
done
wait $SAMPLE
mkdir -p "$OUT/models" && mv "$OUT"/res/*.tar.gz "$OUT/models/" || true
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
tar cf "$OUT/models.tar" -C "$OUT" models && rm -rf "$OUT/models"
