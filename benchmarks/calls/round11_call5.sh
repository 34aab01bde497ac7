#!/usr/bin/env bash
# Round 11, GPU call 5 (issues 13, 15):
#   * SPECTRE SBM resumes from .devdata/sbm_r11 (3000 epochs) until $SBM_SECONDS, then
#     5 sampling seeds x 40 graphs with 64 steps from best_val (selected on the validation
#     split by SBM validity, our fit) and from latest (vun_eval.py, SPECTRE protocol),
#     then the test NLL of the best_val model;
#   * meanwhile $TABLES (default: the 9 small models of the paper's tables), 3 at a time,
#     each trained (configs/paper.py) and then its test NLL (best checkpoint) at once.
# Usage: bash benchmarks/calls/round11_call5.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res/nll" "$OUT/res/sbm" "$RUNS/tables"
table_run() {  # table_run DATASET MODEL LOSS: train the paper config, then its test NLL
  local name=$1_$2_$3
  python train.py --config "configs/paper.py:$1,$2,$3" --workdir $RUNS/tables/$name --quiet \
    ${TAB_EXTRA:-} > "$OUT/res/nll/train_$name.log" 2>&1 &&
  python benchmarks/completion_nll.py --nll_workdir $name=$RUNS/tables/$name --checkpoint best \
    ${NLL_EXTRA:-} --out "$OUT/res/nll/$name" > "$OUT/res/nll/nll_$name.log" 2>&1
}
export -f table_run; export RUNS OUT
cp -r .devdata/sbm_r11/sbm_best $RUNS/
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet \
  --config.train.num_epochs=3000 ${TRAIN_EXTRA:-} > "$OUT/res/sbm_train.log" 2>&1 &
SBM=$!
TABLES=${TABLES-"community_small ego_small sbm_27"}
( for d in $TABLES; do for ml in "ppgn simple" "ppgn vb" "edp simple"; do echo "$d $ml"; done; done |
    xargs -P 3 -L 1 bash -c 'table_run $0 $1 $2' ) &
TAB=$!
stop_at "${SBM_SECONDS:-330}" $SBM
echo "sbm stopped at $(elapsed) s" >> "$OUT/res/times.txt"
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
( for ck in best_val latest; do
    timeout 150 python benchmarks/vun_eval.py --workdir $RUNS/sbm_best --checkpoint $ck --ema \
      --validity sbm --protocol spectre --seeds 5 --num_samples 40 --num_steps 64 ${VUN_EXTRA:-} \
      --name spectre_sbm_$ck --out "$OUT/res/sbm" > "$OUT/res/sbm_vun_$ck.log" 2>&1 &
  done
  timeout 150 python benchmarks/completion_nll.py --nll_workdir spectre_sbm_best=$RUNS/sbm_best \
    --checkpoint best_val --ema ${NLL_EXTRA:-} --out "$OUT/res/nll/spectre_sbm_best" \
    > "$OUT/res/nll/nll_spectre_sbm_best.log" 2>&1
  wait ) &
EV=$!
stop_at "${HARD_SECONDS:-520}" $EV $TAB
echo "all stopped at $(elapsed) s" >> "$OUT/res/times.txt"
pack_sbm
pack_results
