#!/usr/bin/env bash
# Round 11, GPU call 4: clean timings first (nothing else on the card), then SPECTRE SBM
# training resumes alone.
#   1. the issue-14 ablation's timing phase (benchmarks/ablation_steps.py --phase time on
#      the committed docs/results/ablation/ablation_steps.json; freshly initialised
#      parameters of the same models: time does not depend on the weights);
#   2. issue 13: size buckets against plain padding at N <= 187 (bucket_speed.py, bf16);
#   3. issue 12: Ego-small paper config, one run and 5 seeds in one program, with the
#      asynchronous checkpoint writer (seeds_speed.py);
#   4. SBM (configs/best.py:spectre_sbm, 3000 epochs) from .devdata/sbm_r11 until $SBM_SECONDS.
# Usage: bash benchmarks/calls/round11_call4.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res/ablation" "$RUNS"
cp docs/results/ablation/ablation_steps.json "$OUT/res/ablation/"
timeout 200 python benchmarks/ablation_steps.py --phase time --out "$OUT/res/ablation" \
  --workdir /tmp/ablation_none --epochs 2500 --seeds 4 --samples 256 ${ABL_EXTRA:-} \
  > "$OUT/res/ablation_time.log" 2>&1
echo "ablation timing done at $(elapsed) s" >> "$OUT/res/times.txt"
timeout 120 python benchmarks/bucket_speed.py --dtypes bfloat16 --remat off --epochs 2 \
  --out "$OUT/res/bucket_speed_h100.json" ${BUCKET_EXTRA:-} > "$OUT/res/bucket_speed.log" 2>&1
echo "bucket speed done at $(elapsed) s" >> "$OUT/res/times.txt"
timeout 150 python benchmarks/seeds_speed.py --out "$OUT/res/seeds_speed_h100.json" ${SEEDS_EXTRA:-} \
  > "$OUT/res/seeds_speed.log" 2>&1
echo "seeds speed done at $(elapsed) s" >> "$OUT/res/times.txt"
cp -r .devdata/sbm_r11/sbm_best $RUNS/
python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/sbm_best --quiet \
  --config.train.num_epochs=3000 ${TRAIN_EXTRA:-} > "$OUT/res/sbm_train.log" 2>&1 &
SBM=$!
stop_at "${SBM_SECONDS:-470}" $SBM
echo "sbm stopped at $(elapsed) s" >> "$OUT/res/times.txt"
cp $RUNS/sbm_best/metrics.jsonl "$OUT/res/sbm_metrics.jsonl" 2>/dev/null
pack_sbm
pack_results
