#!/usr/bin/env bash
# Round 11, GPU call 1 (issues 13, 14, 15), everything in parallel on one GPU:
#   * SPECTRE SBM: configs/best.py:spectre_sbm trains until SIGINT at $SBM_SECONDS
#     (resumable: the workdir comes back in sbm_ckpt.tar.gz, call 2 goes on from it);
#   * SPECTRE Community-20: configs/best.py:spectre_comm20 to the end, then 5 sampling
#     seeds x 20 graphs from best_val (selected on the validation split) and latest;
#   * the issue-14 ablation (paper protocol: 2500 epochs, 4 seeds together, last
#     checkpoint, 4 curves) without timing (timed alone in a later call);
#   * issue 15 on the round-10 Planar-60 model (.devdata/models): test NLL + completion;
#   * the 9 small paper-table models (reproduce_tables.py --phase train), then their NLL.
# Timings in this call are taken with the GPU shared; clean timings come later.
# As run, it ran into the 600 s limit: background jobs of a non-interactive shell ignore
# SIGINT, so `kill -INT` did not stop the SBM run and nothing after it ran (the SBM
# checkpoints, Comm-20 samples and table NLLs were lost; the ablation JSON came back).
# round11_call2.sh stops runs with SIGTERM instead.
# Usage: bash benchmarks/calls/round11_call1.sh OUT
# (CPU smoke test: tiny settings through TRAIN_EXTRA, ABL_EXTRA, P60_EXTRA, TAB_EXTRA, NLL_EXTRA.)
set -uo pipefail
OUT=$1
RUNS=runs/r11
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet ${TRAIN_EXTRA:-} \
  > "$OUT/res/sbm_train.log" 2>&1 &
SBM=$!
( python train.py --config configs/best.py:spectre_comm20 --workdir $RUNS/comm20_best --quiet ${TRAIN_EXTRA:-} \
    > "$OUT/res/comm20_train.log" 2>&1
  for ck in best_val latest; do for s in 0 1 2 3 4; do
    python sample.py --workdir $RUNS/comm20_best --checkpoint $ck --num_samples 20 --seed $s \
      --protocol none --quiet --out $RUNS/comm20_samples/${ck}_seed$s >> "$OUT/res/comm20_sample.log" 2>&1
  done; done ) &
COMM=$!
python benchmarks/ablation_steps.py --out "$OUT/ablation" --workdir $RUNS/ablation \
  --epochs 2500 --seeds 4 --samples 256 --phase train_sample --eval_workers 6 ${ABL_EXTRA:-} \
  > "$OUT/res/ablation.log" 2>&1 &
ABL=$!
( mkdir -p $RUNS/p60 && tar xzf .devdata/models/best_p60_d10.tar.gz -C $RUNS/p60
  python benchmarks/completion_nll.py --nll_workdir best_planar_60_d10=$RUNS/p60/best_p60_d10 \
    --completion_workdir $RUNS/p60/best_p60_d10 --checkpoint latest --ema \
    --hidden 0.1,0.3,0.5 --add_nodes 10 --num_samples 8 --resample 4,3 \
    ${P60_EXTRA:-} --out "$OUT/res/completion_nll_planar60" > "$OUT/res/completion_nll_planar60.log" 2>&1 ) &
P60=$!
( SMALL=$(for d in community_small ego_small sbm_27; do for m in ppgn_simple ppgn_vb edp_simple; do
      printf "%s_%s," $d $m; done; done)
  python benchmarks/reproduce_tables.py --out $RUNS/tables --phase train --parallel 3 \
    --only "${SMALL%,}" ${TAB_EXTRA:-} > "$OUT/res/tables_train.log" 2>&1
  args=""; for r in ${SMALL//,/ }; do args="$args --nll_workdir $r=$RUNS/tables/$r"; done
  python benchmarks/completion_nll.py $args --checkpoint best ${NLL_EXTRA:-} \
    --out "$OUT/res/nll_tables_small" > "$OUT/res/nll_tables_small.log" 2>&1 ) &
TAB=$!
# SBM: stop at $SBM_SECONDS (the last checkpoint is at most 100 epochs old)
while kill -0 $SBM 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt "${SBM_SECONDS:-520}" ]; do sleep 5; done
kill -INT $SBM 2>/dev/null; wait $SBM
echo "sbm stopped at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
for p in $COMM $ABL $P60 $TAB; do
  while kill -0 $p 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt "${HARD_SECONDS:-545}" ]; do sleep 3; done
done
echo "done waiting at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
cp $RUNS/comm20_best/metrics.jsonl "$OUT/res/comm20_metrics.jsonl" 2>/dev/null
for p in $COMM $ABL $P60 $TAB; do kill -INT $p 2>/dev/null; done; sleep 2
# the SBM run (full checkpoints, for resuming in the next call) in <= 15 MiB parts:
#   cat sbm_ckpt.tar.gz.part_* | tar xz
tar czf - -C $RUNS sbm_best | split -b 15m - "$OUT/sbm_ckpt.tar.gz.part_"
mv $RUNS/comm20_samples "$OUT/res/" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$OUT" res ablation && rm -rf "$OUT/res" "$OUT/ablation"
ls -la "$OUT"
