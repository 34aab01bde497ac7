#!/usr/bin/env bash
# Round 9 (issue 10): choose Planar-60's 32-step sampler by validity on sampling seed 100
# (1024 graphs; validity needs no test graphs), then evaluate the choice under the full
# protocol (seeds 0-4 x 1024, paper protocol against the test split) and keep its graphs.
# Usage: bash benchmarks/calls/levers_round9.sh OUT DATA_DIR TARS
set -euo pipefail
OUT=$1; DATA_DIR=$2; TARS=$3
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$OUT/p60" "$RUNS"
[ -d $RUNS/best_p60 ] || tar xzf "$TARS/best_p60.tar.gz" -C $RUNS
CANDIDATES=${CANDIDATES:-alg2_32_pow4,alg2_32_pow4_final,alg2_32_pow4_argmax,alg2_32_pow5,alg2_32_pow3_final,alg2_32_pow4_argmax_final,alg1_32_pow4_mix085,alg1_32_pow5_mix07,alg1_32_pow4_mix07}
python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --variants best_p60 \
  --checkpoint latest --seed 100 --num_samples "${NUM_SAMPLES:-1024}" --samplers "$CANDIDATES" \
  --result_name select_seed100.json > "$OUT/res/select.log" 2>&1
ARGS=$(python benchmarks/select_sampler.py "$OUT/res/select_seed100.json" best_p60 2>> "$OUT/res/select.log")
echo "vun_eval args: $ARGS" >> "$OUT/res/select.log"
python benchmarks/vun_eval.py --workdir $RUNS/best_p60 --checkpoint latest $ARGS \
  --validity planar --protocol paper --seeds 5 --num_samples "${P60_N:-1024}" \
  --name planar_60_best --out "$OUT/p60" > "$OUT/res/p60_vun.log" 2>&1
cp "$OUT/p60/planar_60_best_vun.json" "$OUT/res/"
tar czf "$OUT/results.tar.gz" -C "$OUT" res
tar czf "$OUT/p60_seed0.tar.gz" -C "$OUT/p60" planar_60_best_seed0.json
rm -rf "$OUT/res" "$OUT/p60"
