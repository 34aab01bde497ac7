#!/usr/bin/env bash
# Round 10 (issue 10): capacity. configs/best.py:planar_60 with 10 PPGN blocks instead of 8,
# then the full Planar-60 protocol (5 seeds x 1024, paper protocol) for the two 32-step
# samplers of round 8c. Usage: bash benchmarks/levers_round10.sh OUT DATA_DIR
set -euo pipefail
OUT=$1; DATA_DIR=$2
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$OUT/p60" "$RUNS"
python benchmarks/planar_levers.py train --out "$OUT/res" --runs $RUNS \
  --data "$DATA_DIR/planar_60.json" --variants best_p60_d10 --deadline "${DEADLINE:-430}" \
  --extra "${EXTRA:-}" > "$OUT/res/train_phase.log" 2>&1
for s in ${P60_LIST:-32:2:power:4:0 32:1:power:4:0.7}; do
  IFS=: read -r steps alg gk gv mix <<< "$s"
  name="d10_${steps}_alg${alg}_${gk}${gv}_mix${mix}"
  python benchmarks/vun_eval.py --workdir $RUNS/best_p60_d10 --checkpoint latest --ema \
    --validity planar --protocol paper --seeds "${SEEDS:-5}" --num_samples "${P60_N:-1024}" \
    --num_steps "$steps" --option algorithm=$alg --option grid=$gk:$gv --option renoise_mix=$mix \
    --no_graphs --name "$name" --out "$OUT/res" > "$OUT/res/$name.log" 2>&1 || true
done
cp $RUNS/best_p60_d10/metrics.jsonl "$OUT/res/metrics_best_p60_d10.jsonl" || true
mv "$OUT"/res/*.tar.gz "$OUT/" 2>/dev/null || true
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res" "$OUT/p60"
