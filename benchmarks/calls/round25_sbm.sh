#!/usr/bin/env bash
# Round 25 (issue 13): is round 24's best SBM variant (64 channels, batch 8: validation
# peak 73.4 % at epoch 1750, training seed 1) a training-seed fluke? One GPU (~9 min):
# * its best_val (carried as .devdata/r24/h64b8, from `round24_call2.sh`'s PACK_BEST)
#   sampled 5 x 40 at 64 steps with the recipe's sampler (the call sampled only 3 seeds);
# * the same variant trained with training seeds 2 and 3 side by side on the same card
#   (configs/best.py:spectre_sbm, --config.model.ppgn.hidden=64 --config.train.batch_size=8,
#   validation every 250 epochs as in round 24), stopped at $HARD_SECONDS - $SAMPLE_SECONDS,
#   then 5 x 40 samples each from best_val.
# Graphs only; validity (graph-tool and our fit) and MMDs later on a CPU with
# benchmarks/check_samples.py. $OUT/results.tar.gz.
# EXTRA_ALL: more overrides for both trainings (a CPU dry run: a tiny model, few epochs).
# Usage: bash benchmarks/calls/round25_sbm.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
RUNS=runs/r25
HARD=${HARD_SECONDS:-550}
SAMPLE=${SAMPLE_SECONDS:-70}
mkdir -p $RUNS "$OUT/res/samples"
SAMPLER="--option logit_scale=0.9 --option grid=power:3"
vun() {  # WORKDIR NAME
  python benchmarks/vun_eval.py --workdir "$1" --checkpoint best_val --ema --validity none \
    --protocol none --seeds 5 --num_samples 40 --num_steps 64 $SAMPLER --name "$2" \
    --out "$OUT/res/samples" > "$OUT/res/vun_$2.log" 2>&1
}
pids=()
for seed in 2 3; do
  python train.py --config configs/best.py:spectre_sbm --workdir $RUNS/s$seed --quiet \
    --config.train.seed=$seed --config.model.ppgn.hidden=64 --config.train.batch_size=8 \
    --config.validation.every_epochs=250 --config.train.checkpoint_every_epochs=50 \
    --config.sample.grid=power:3 --config.train.num_epochs=${EPOCHS:-2000} ${EXTRA_ALL:-} \
    > "$OUT/res/train_s$seed.log" 2>&1 &
  pids+=($!)
done
vun ${CARRIED:-.devdata/r24/h64b8} sbm25_h64b8_s1
echo "carried checkpoint sampled at $(elapsed) s" >> "$OUT/res/times.txt"
stop_at $(( HARD - SAMPLE )) "${pids[@]}"
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
pids=()
for seed in 2 3; do
  cp $RUNS/s$seed/metrics.jsonl "$OUT/res/metrics_s$seed.jsonl" 2>/dev/null
  vun $RUNS/s$seed sbm25_h64b8_s$seed &
  pids+=($!)
done
stop_at $(( HARD - 10 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
