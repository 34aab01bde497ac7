#!/usr/bin/env bash
# Round 11, GPU call 2 (issues 13, 15), in parallel on one GPU:
#   * SPECTRE SBM: configs/best.py:spectre_sbm resumes from .devdata/sbm_r11/sbm_best
#     (the previous call's workdir) until SIGINT at $SBM_SECONDS; comes back in parts;
#   * the three Planar-60 models of the paper's table (configs/paper.py, 2500 epochs),
#     each stopped at $P60_SECONDS if not done, then their test NLL (best checkpoint, the
#     paper's selection; the epochs reached are in their metrics.jsonl).
# Usage: bash benchmarks/round11_call2.sh OUT
set -uo pipefail
OUT=$1
RUNS=runs/r11
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS/tables"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
cp -r .devdata/sbm_r11/sbm_best $RUNS/
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet ${TRAIN_EXTRA:-} \
  > "$OUT/res/sbm_train.log" 2>&1 &
SBM=$!
P=""
for m in ppgn,simple ppgn,vb edp,simple; do
  name=planar_60_${m/,/_}
  python train.py --config "configs/paper.py:planar_60,$m" --workdir $RUNS/tables/$name --quiet \
    ${P60_EXTRA:-} > "$OUT/res/train_$name.log" 2>&1 &
  P="$P $!"
done
stop_at() {  # stop_at SECONDS PID...: SIGINT each PID still running at SECONDS
  local limit=$1; shift
  for p in "$@"; do
    while kill -0 $p 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt "$limit" ]; do sleep 3; done
    kill -INT $p 2>/dev/null; wait $p
  done
}
stop_at "${P60_SECONDS:-430}" $P
echo "planar table runs ended at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
args=""; for m in ppgn_simple ppgn_vb edp_simple; do
  args="$args --nll_workdir planar_60_$m=$RUNS/tables/planar_60_$m"; done
python benchmarks/completion_nll.py $args --checkpoint best ${NLL_EXTRA:-} \
  --out "$OUT/res/nll_tables_planar60" > "$OUT/res/nll_tables_planar60.log" 2>&1 &
NLL=$!
stop_at "${SBM_SECONDS:-530}" $SBM
echo "sbm stopped at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
stop_at "${HARD_SECONDS:-550}" $NLL
for m in ppgn_simple ppgn_vb edp_simple; do
  cp $RUNS/tables/planar_60_$m/metrics.jsonl "$OUT/res/metrics_planar_60_$m.jsonl" 2>/dev/null; done
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
tar czf - -C $RUNS sbm_best | split -b 15m - "$OUT/sbm_ckpt.tar.gz.part_"
tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
ls -la "$OUT"
