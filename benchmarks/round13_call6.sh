#!/usr/bin/env bash
# Round 13, call 6 (not run yet; the next session's first call), one GPU:
#   1. issue 13: confirm the pilot's best 64-step sampler at the deliverable's scale: the SBM
#      run's best_val (carry .devdata/sbm_r11), 5 seeds x 40 graphs with logit scale 0.9 on
#      the power:2 grid (round13_call4.sh's sampling, graphs only; graph-tool on a CPU after:
#      benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm);
#   2. issue 12: benchmarks/round12_speed.sh with the time left (XLA command-buffer flags on
#      the Ego-small step, its profile, 5 seeds in one program).
# Stops by $HARD_SECONDS; $OUT holds only results.tar.gz.
# Usage: bash benchmarks/round13_call6.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
W=${W:-.devdata/sbm_r11/sbm_best}
timeout 150 python benchmarks/vun_eval.py --workdir $W --checkpoint best_val --ema \
  --validity none --protocol none --seeds 5 --num_samples 40 --num_steps 64 \
  --option logit_scale=0.9 --option grid=power:2 --name spectre_sbm_best_power2 \
  --out "$OUT/res/samples" > "$OUT/res/vun_best_power2.log" 2>&1
echo "sampled rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
left=$(( ${HARD_SECONDS:-480} - $(elapsed) ))
echo "speed round with $left s" >> "$OUT/res/times.txt"
if [ $left -gt 200 ]; then
  # round12_speed.sh keeps its own clock from here and packs $OUT/res
  HARD_SECONDS=$left bash "$(dirname "$0")/round12_speed.sh" "$OUT"
else
  pack_results
fi
