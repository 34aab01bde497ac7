#!/usr/bin/env bash
# Round 12 (issue 13): SPECTRE SBM, configs/best.py:spectre_sbm, resumed to 5000 epochs
# (TRAIN_EXTRA, default --config.train.num_epochs=5000), then sampled.
#   * the workdir: this machine's $RUNS/sbm_best when a previous call on it left a newer
#     one, else .devdata/sbm_r11/sbm_best (carried);
#   * training stops with SIGTERM at $SBM_SECONDS (checkpoints stay complete);
#   * when training has reached its last epoch: 5 sampling seeds x 40 graphs (the test
#     split's size) at the config's 64 steps from best_val (EMA), and from latest, MMDs
#     with the SPECTRE protocol (validity is decided later by graph-tool on a CPU);
#     (not with SKIP_SAMPLING=1);
#   * everything stops by $HARD_SECONDS; the workdir comes back in 15 MiB parts.
# Usage: bash benchmarks/calls/round12_sbm.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
latest_step() { ls "$1/checkpoints/latest" 2>/dev/null | sort -n | tail -1; }
here=$(latest_step $RUNS/sbm_best); carried=$(latest_step .devdata/sbm_r11/sbm_best)
if [ "${carried:-0}" -gt "${here:-0}" ]; then
  rm -rf $RUNS/sbm_best && cp -r .devdata/sbm_r11/sbm_best $RUNS/
fi
echo "workdir at step $(latest_step $RUNS/sbm_best) (this machine had ${here:-none}, carried ${carried:-none})" \
  > "$OUT/res/start.txt"
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet \
  ${TRAIN_EXTRA:---config.train.num_epochs=5000} > "$OUT/res/sbm_train.log" 2>&1 &
stop_at "${SBM_SECONDS:-500}" $!
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
if [ -z "${SKIP_SAMPLING:-}" ] && tail -1 $RUNS/sbm_best/metrics.jsonl 2>/dev/null | grep -q '"event": "end"'; then
  ( for ck in best_val latest; do
      python benchmarks/vun_eval.py --workdir $RUNS/sbm_best --checkpoint $ck --ema \
        --validity none --protocol spectre --seeds 5 --num_samples 40 ${VUN_EXTRA:-} \
        --name spectre_sbm_${ck} --out "$OUT/res/samples" > "$OUT/res/vun_${ck}.log" 2>&1
      echo "sampled $ck at $(elapsed) s" >> "$OUT/res/times.txt"
    done ) &
  stop_at "${HARD_SECONDS:-540}" $!
fi
# processes started beside this script (ALSO_PIDS) finish before the results are packed
[ -n "${ALSO_PIDS:-}" ] && stop_at "${HARD_SECONDS:-540}" $ALSO_PIDS
pack_sbm
pack_results
