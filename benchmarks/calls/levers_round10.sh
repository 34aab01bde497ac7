#!/usr/bin/env bash
# Round 10 (issue 10): capacity. configs/best.py:planar_60 with 10 PPGN blocks instead of 8,
# then the full Planar-60 protocol (5 seeds x 1024, paper protocol) for the two 32-step
# samplers with their graphs (KEEP_GRAPHS=0: metrics only), and the run's latest
# parameters. Round 10 ran it with KEEP_GRAPHS=0 (the script as of commit b63ff27 and
# before); round 10b, which retrained it to keep its graphs, with the default.
# Usage: bash benchmarks/calls/levers_round10.sh OUT DATA_DIR
set -euo pipefail
OUT=$1; DATA_DIR=$2
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$OUT/p60" "$RUNS"
python benchmarks/planar_levers.py train --out "$OUT/res" --runs $RUNS \
  --data "$DATA_DIR/planar_60.json" --variants best_p60_d10 --deadline "${DEADLINE:-450}" \
  --extra "${EXTRA:-}" > "$OUT/res/train_phase.log" 2>&1
for s in ${P60_LIST:-32:2:power:4:0 32:1:power:4:0.7}; do
  IFS=: read -r steps alg gk gv mix <<< "$s"
  name="d10_${steps}_alg${alg}_${gk}${gv}_mix${mix}"
  python benchmarks/vun_eval.py --workdir $RUNS/best_p60_d10 --checkpoint latest --ema \
    --validity planar --protocol paper --seeds "${SEEDS:-5}" --num_samples "${P60_N:-1024}" \
    --num_steps "$steps" --option algorithm=$alg --option grid=$gk:$gv --option renoise_mix=$mix \
    $([ "${KEEP_GRAPHS:-1}" = 1 ] || echo --no_graphs) \
    --name "$name" --out "$OUT/p60" > "$OUT/res/$name.log" 2>&1 || true
  cp "$OUT/p60/${name}_vun.json" "$OUT/res/" || true
done
cp $RUNS/best_p60_d10/metrics.jsonl "$OUT/res/metrics_best_p60_d10.jsonl" || true
# the latest parameters only (a second parameter set would pass the 16 MiB return limit)
rm -f "$OUT"/res/*.tar.gz
rm -rf $RUNS/best_p60_d10_slim/checkpoints/best_val
tar czf "$OUT/best_p60_d10.tar.gz" -C $RUNS --transform 's/^best_p60_d10_slim/best_p60_d10/' best_p60_d10_slim
if [ "${KEEP_GRAPHS:-1}" = 1 ]; then
  tar czf "$OUT/samples_seed0.tar.gz" -C "$OUT/p60" $(cd "$OUT/p60" && ls *_seed0.json)
fi
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res" "$OUT/p60"
