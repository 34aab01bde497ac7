#!/usr/bin/env bash
# Round 11, GPU call 2 (issues 13, 15), in parallel on one GPU:
#   * SPECTRE SBM: configs/best.py:spectre_sbm, from .devdata/sbm_r11/sbm_best when that
#     holds a previous call's workdir, stopped with SIGTERM at $SBM_SECONDS (the CLI
#     turns it into an interrupt: checkpoints stay complete); comes back in 15 MiB parts;
#   * SPECTRE Community-20 (unless COMM20=0): configs/best.py:spectre_comm20 to the end,
#     then 5 sampling seeds x 20 graphs from best_val (selected on the validation split)
#     and from latest, MMDs with the spectre_emd and spectre protocols;
#   * $TABLES (default: the 9 small models of the paper's tables): train, then test NLL.
# Stops everything by $HARD_SECONDS after the start (the call's limit is 600 s).
# Usage: bash benchmarks/calls/round11_call2.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res" "$RUNS/tables"
[ -d .devdata/sbm_r11/sbm_best ] && cp -r .devdata/sbm_r11/sbm_best $RUNS/
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet ${TRAIN_EXTRA:-} \
  > "$OUT/res/sbm_train.log" 2>&1 &
SBM=$!
COMM=""
if [ "${COMM20:-1}" = 1 ]; then
( python train.py --config configs/best.py:spectre_comm20 --workdir $RUNS/comm20_best --quiet \
    ${TRAIN_EXTRA:-} > "$OUT/res/comm20_train.log" 2>&1
  for ck in best_val latest; do for proto in spectre_emd spectre; do
    python benchmarks/vun_eval.py --workdir $RUNS/comm20_best --checkpoint $ck --ema \
      --validity none --protocol $proto --seeds 5 --num_samples 20 ${VUN_EXTRA:-} \
      --name comm20_${ck}_${proto} --out "$OUT/res/comm20" > "$OUT/res/comm20_${ck}_${proto}.log" 2>&1
  done; done ) &
COMM=$!
fi
TABLES=${TABLES-$(for d in community_small ego_small sbm_27; do for m in ppgn_simple ppgn_vb edp_simple; do
    printf "%s_%s," $d $m; done; done)}
TAB=""
if [ -n "$TABLES" ]; then
( python benchmarks/reproduce_tables.py --out $RUNS/tables --phase train --parallel 3 \
    --only "${TABLES%,}" ${TAB_EXTRA:-} > "$OUT/res/tables_train.log" 2>&1
  args=""; for r in ${TABLES//,/ }; do args="$args --nll_workdir $r=$RUNS/tables/$r"; done
  python benchmarks/completion_nll.py $args --checkpoint best ${NLL_EXTRA:-} \
    --out "$OUT/res/nll_tables" > "$OUT/res/nll_tables.log" 2>&1
  for r in ${TABLES//,/ }; do cp $RUNS/tables/$r/train.log "$OUT/res/train_$r.log"; done ) &
TAB=$!
fi
stop_at "${SBM_SECONDS:-460}" $SBM
echo "sbm stopped at $(elapsed) s" >> "$OUT/res/times.txt"
stop_at "${HARD_SECONDS:-500}" $COMM $TAB
echo "all stopped at $(elapsed) s" >> "$OUT/res/times.txt"
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
cp $RUNS/comm20_best/metrics.jsonl "$OUT/res/comm20_metrics.jsonl" 2>/dev/null
pack_sbm
pack_results
