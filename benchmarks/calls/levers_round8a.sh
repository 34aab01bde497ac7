#!/usr/bin/env bash
# Planar levers round 8, first GPU call (issue 10): train configs/best.py:planar_60 (log noise
# channel, training grid power:2, 5000 epochs, model selection by validity every 500 epochs)
# while the per-level diagnostic compares compute precisions on the round-3 ct_marginal_5k
# checkpoint. Usage: bash benchmarks/calls/levers_round8a.sh OUT DATA TARS
set -euo pipefail
OUT=$1; DATA=$2; TARS=$3
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS"
python benchmarks/planar_levers.py train --out "$OUT/res" --runs $RUNS --data "$DATA" \
  --variants "${VARIANTS:-best_p60}" --deadline "${DEADLINE:-500}" --extra "${EXTRA:-}" \
  > "$OUT/res/train_phase.log" 2>&1 &
TRAIN=$!
[ -d $RUNS/ct_marginal_5k ] || tar xzf "$TARS/ct_marginal_5k.tar.gz" -C $RUNS
for mode in bfloat16:default float32:default float32:highest; do
  python benchmarks/per_level_nll.py --workdir $RUNS/ct_marginal_5k --checkpoint latest --ema \
    --data "$DATA" --split test --draws "${DRAWS:-8}" --compute_dtype "${mode%%:*}" \
    --matmul_precision "$([ "${mode##*:}" = default ] || echo "${mode##*:}")" \
    --out "$OUT/res/precision_${mode%%:*}_${mode##*:}.json" \
    > "$OUT/res/precision_${mode%%:*}_${mode##*:}.log" 2>&1
done
wait $TRAIN
mkdir -p "$OUT/models" && mv "$OUT"/res/*.tar.gz "$OUT/" 2>/dev/null || true
for d in $RUNS/*/; do cp "$d/metrics.jsonl" "$OUT/res/metrics_$(basename "$d").jsonl" 2>/dev/null || true; done
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res" "$OUT/models"
