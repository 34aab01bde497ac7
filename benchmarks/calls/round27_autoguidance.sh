#!/usr/bin/env bash
# Round 27 (issue 13), one GPU (~9 min): autoguidance (ddgjax/guidance.py, after Karras et
# al. 2024) of round 24's h64b8 SBM model (64 channels, batch 8, training seed 1, best_val
# at epoch 1750; carried as .devdata/r24/h64b8) by weaker runs of the same recipe:
#   g64e250, g64e500   the same variant and training seed, 250 / 500 epochs
#   g32e250, g32e500   32 channels, batch 8, training seed 1, 250 / 500 epochs
# (all four train side by side on the card, validation off, until $TRAIN_STOP s), then the
# sampler arms on training-split node counts (benchmarks/sbm_grid_pilot.py: 40 counts from
# the training graphs of 44-187 nodes, sampling seeds 0 and 1, our fit on the host's CPUs;
# no test graph is read) in two processes side by side:
#   a: ctrl (no guide) and the two 64-channel guides at w = 0.5 and 1 (w = 2 for g64e500)
#   b: the two 32-channel guides at w = 0.5 and 1
# and for the longer guide of each width, w = 1 with the logit scale 0.8 (the recipe's 0.9
# puts back the edges a 64-step chain misses; guidance may take some away again).
# The guides' workdirs (latest checkpoint) come back as $OUT/guides.tar.gz, the pilots in
# $OUT/results.tar.gz (res/pilot/{a,b}.{json,md}).
# Knobs for a CPU dry run: EXTRA_ALL (more training overrides), E_SHORT / E_LONG (the
# epochs), PILOT (the pilot's node range and counts), TRAIN_STOP, HARD_SECONDS.
# Usage: bash benchmarks/calls/round27_autoguidance.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
RUNS=runs/r27
HARD=${HARD_SECONDS:-560}
GOOD=${GOOD:-.devdata/r24/h64b8}
mkdir -p $RUNS "$OUT/res/pilot"
BASE="--config configs/best.py:spectre_sbm --quiet --config.train.batch_size=8 \
 --config.train.seed=1 --config.validation.every_epochs=0 \
 --config.train.checkpoint_every_epochs=50 ${EXTRA_ALL:-}"
pids=()
for spec in g64e250:64:${E_SHORT:-250} g64e500:64:${E_LONG:-500} \
            g32e250:32:${E_SHORT:-250} g32e500:32:${E_LONG:-500}; do
  IFS=: read -r name hidden epochs <<< "$spec"
  python train.py $BASE --workdir $RUNS/$name --config.model.ppgn.hidden=$hidden \
    --config.train.num_epochs=$epochs > "$OUT/res/train_$name.log" 2>&1 &
  pids+=($!)
done
stop_at ${TRAIN_STOP:-250} "${pids[@]}"
echo "guides trained at $(elapsed) s" >> "$OUT/res/times.txt"
for name in g64e250 g64e500 g32e250 g32e500; do
  echo "$name latest step: $(ls $RUNS/$name/checkpoints/latest 2>/dev/null | sort -n | tail -1)" \
    >> "$OUT/res/times.txt"
done
tar czf "$OUT/guides.tar.gz" -C $RUNS --exclude='*/checkpoints/best' g64e250 g64e500 g32e250 g32e500
PILOT_ARGS="--workdir $GOOD --checkpoint best_val --ema --guide_checkpoint latest --fit ddgjax \
 ${PILOT:---nodes 44-187 --num 40 --seeds 0,1}"
python benchmarks/sbm_grid_pilot.py $PILOT_ARGS \
  --guide g64e250=$RUNS/g64e250 --guide g64e500=$RUNS/g64e500 \
  --arms "ctrl:;g64e250_w0.5:guide=g64e250,guidance=0.5;g64e250_w1:guide=g64e250,guidance=1;g64e500_w0.5:guide=g64e500,guidance=0.5;g64e500_w1:guide=g64e500,guidance=1;g64e500_w2:guide=g64e500,guidance=2;g64e500_w1_ls0.8:guide=g64e500,guidance=1,logit_scale=0.8" \
  --out "$OUT/res/pilot/a" > "$OUT/res/pilot_a.log" 2>&1 &
pa=$!
python benchmarks/sbm_grid_pilot.py $PILOT_ARGS \
  --guide g32e250=$RUNS/g32e250 --guide g32e500=$RUNS/g32e500 \
  --arms "g32e250_w0.5:guide=g32e250,guidance=0.5;g32e250_w1:guide=g32e250,guidance=1;g32e500_w0.5:guide=g32e500,guidance=0.5;g32e500_w1:guide=g32e500,guidance=1;g32e500_w1_ls0.8:guide=g32e500,guidance=1,logit_scale=0.8" \
  --out "$OUT/res/pilot/b" > "$OUT/res/pilot_b.log" 2>&1 &
pb=$!
stop_at $(( HARD - 15 )) $pa $pb
echo "pilots done at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
