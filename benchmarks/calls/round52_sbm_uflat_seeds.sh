#!/usr/bin/env bash
# Round 52 (issue 13): is round 51's best SBM variant (uflat: the uniform training grid with
# the flat L_simple weight; 67 % V.U.N. with our fit against the same call's control's
# 58.5 %, training seed 1) more than a training-seed draw? One variant per GPU of a
# 4-GPU machine, configs/best.py:spectre_sbm, validation every 250 epochs, 2000 epochs:
#   uflat_s2, uflat_s3   uflat with training seeds 2 and 3
#   ctrl_s2              the recipe with training seed 2 (this call's control)
#   uflat64_s1           uflat with 64 channels (round 19-20's level-best width), seed 1
# then 5 seeds x 40 graphs at 64 steps from each best_val with the recipe's sampler
# (power:3, logit scale 0.9). Beside the first training, on GPU 0: round 51's uflat
# best_val (carried, $CARRIED, unpacked from ckpt_uflat.tar.gz) sampled 5 x 40 at 1024
# steps without the logit scale (the model's ceiling, as rounds 13 and 20 did).
# Graphs only: validity (graph-tool and our fit) and MMDs later on a CPU with
# benchmarks/check_samples.py. $OUT/results.tar.gz.
# EXTRA_ALL: more overrides for every training (a CPU dry run: a tiny model, few epochs).
# VARIANTS ("NAME|SEED|OVERRIDES;..."; at most 4, one per GPU) and PREFIX (the sample
# files' prefix, default sbm52) let a later round reuse this driver (round 53).
# Usage: bash benchmarks/calls/round52_sbm_uflat_seeds.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
RUNS=runs/r52
HARD=${HARD_SECONDS:-575}
SAMPLE=${SAMPLE_SECONDS:-70}
mkdir -p $RUNS "$OUT/res/samples"
UFLAT="--config.diffusion.train_grid=uniform --config.diffusion.simple_weighting=flat"
variants=("uflat_s2|2|$UFLAT" "uflat_s3|3|$UFLAT" "ctrl_s2|2|" "uflat64_s1|1|$UFLAT --config.model.ppgn.hidden=64")
if [ -n "${VARIANTS:-}" ]; then IFS=';' read -ra variants <<< "$VARIANTS"; fi
PREFIX=${PREFIX:-sbm52}
vun() {  # WORKDIR NAME STEPS LOGIT_SCALE
  python benchmarks/vun_eval.py --workdir "$1" --checkpoint best_val --ema --validity none \
    --protocol none --seeds 5 --num_samples 40 --num_steps "$3" --option logit_scale="$4" \
    --option grid=power:3 --name "$2" --out "$OUT/res/samples" > "$OUT/res/vun_$2.log" 2>&1
}
pids=(); names=(); k=0
for v in "${variants[@]}"; do
  IFS='|' read -r name seed extra <<< "$v"
  names+=("$name")
  CUDA_VISIBLE_DEVICES=$k python train.py --config configs/best.py:spectre_sbm \
    --workdir $RUNS/$name --quiet --config.train.seed=$seed \
    --config.validation.every_epochs=250 --config.train.checkpoint_every_epochs=50 \
    --config.sample.grid=power:3 --config.train.num_epochs=${EPOCHS:-2000} $extra ${EXTRA_ALL:-} \
    > "$OUT/res/train_$name.log" 2>&1 &
  pids+=($!); k=$(( (k + 1) % 4 ))
done
if [ -d "${CARRIED:-.devdata/r51/uflat}" ]; then
  CUDA_VISIBLE_DEVICES=0 vun ${CARRIED:-.devdata/r51/uflat} sbm52_uflat_s1_T1024 1024 1.0
  echo "carried checkpoint sampled at $(elapsed) s" >> "$OUT/res/times.txt"
fi
stop_at $(( HARD - SAMPLE )) "${pids[@]}"
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
pids=(); k=0
for name in "${names[@]}"; do
  cp $RUNS/$name/metrics.jsonl "$OUT/res/metrics_$name.jsonl" 2>/dev/null
  CUDA_VISIBLE_DEVICES=$k vun $RUNS/$name ${PREFIX}_$name 64 0.9 &
  pids+=($!); k=$(( (k + 1) % 4 ))
done
stop_at $(( HARD - 10 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
