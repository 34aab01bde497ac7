#!/usr/bin/env bash
# Round 54 (issue 13): an ensemble of training seeds on SPECTRE SBM. One recipe run
# (configs/best.py:spectre_sbm, as it is: 2000 epochs, validation every 500) per GPU of a
# 4-GPU machine, training seeds $SEEDS (default 3 4 5 6; seeds 0-2 ran in rounds 13-52),
# then, all at once:
#   GPU k    5 sampling seeds x 40 graphs at 64 steps from run k's best_val (EMA), the
#            recipe's sampler (power:3, logit scale 0.9): sbm54_s<seed>
#   GPU 0    the same sampler with the ensemble of all four best_val checkpoints, the
#            mean of their probabilities (ddgjax.ensemble, mean=probs): sbm54_ens4p
#   GPU 1    the same with the mean of their logits (mean=logits): sbm54_ens4l
# Both ensemble rules were fixed before any sample was drawn; neither is chosen on the
# test split. Graphs only: validity (graph-tool and our fit) and MMDs later on a CPU with
# benchmarks/check_samples.py. $OUT/results.tar.gz.
# EXTRA_ALL: more overrides for every training (a CPU dry run: a tiny model, few epochs).
# PREFIX (default sbm54) names the sample files; ENSEMBLES ("NAME|STEPS|LOGIT_SCALE|MEAN;...",
# the k-th on GPU k; default the two above) lets round 55 reuse this driver:
#   PREFIX=sbm55 SEEDS="7 8 9 10" HARD_SECONDS=592 SAMPLE_SECONDS=115 \
#   EXTRA_ALL="--config.validation.every_epochs=250 --config.train.checkpoint_every_epochs=50" \
#   ENSEMBLES="ens4p|64|0.9|probs;ens4p_scale1|64|1.0|probs;ens4p_T128|128|0.9|probs" \
#   bash benchmarks/calls/round54_sbm_ensemble.sh OUT
# Usage: bash benchmarks/calls/round54_sbm_ensemble.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
RUNS=runs/r54
HARD=${HARD_SECONDS:-585}
SAMPLE=${SAMPLE_SECONDS:-120}
NGPU=${NGPU:-4}
read -ra seeds <<< "${SEEDS:-3 4 5 6}"
PREFIX=${PREFIX:-sbm54}
IFS=';' read -ra ensembles <<< "${ENSEMBLES:-ens4p|64|0.9|probs;ens4l|64|0.9|logits}"
mkdir -p $RUNS "$OUT/res/samples"
vun() {  # NAME STEPS LOGIT_SCALE WORKDIR [vun_eval args...]
  local name=$1 steps=$2 scale=$3; shift 3
  python benchmarks/vun_eval.py --workdir "$@" --checkpoint best_val --ema --validity none \
    --protocol none --seeds 5 --num_samples 40 --num_steps "$steps" --option logit_scale=$scale \
    --option grid=power:3 --name "$name" --out "$OUT/res/samples" > "$OUT/res/vun_$name.log" 2>&1
}
pids=(); k=0
for seed in "${seeds[@]}"; do
  CUDA_VISIBLE_DEVICES=$k python train.py --config configs/best.py:spectre_sbm \
    --workdir $RUNS/s$seed --quiet --config.train.seed=$seed ${EXTRA_ALL:-} \
    > "$OUT/res/train_s$seed.log" 2>&1 &
  pids+=($!); k=$(( (k + 1) % NGPU ))
done
stop_at $(( HARD - SAMPLE )) "${pids[@]}"
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
pids=(); k=0; members=()
for seed in "${seeds[@]}"; do
  cp $RUNS/s$seed/metrics.jsonl "$OUT/res/metrics_s$seed.jsonl" 2>/dev/null
  CUDA_VISIBLE_DEVICES=$k vun ${PREFIX}_s$seed 64 0.9 $RUNS/s$seed &
  pids+=($!); k=$(( (k + 1) % NGPU )); members+=("$RUNS/s$seed")
done
first=${members[0]}
rest=$(IFS=,; echo "${members[*]:1}")
k=0
for e in "${ensembles[@]}"; do
  IFS='|' read -r name steps scale mean <<< "$e"
  CUDA_VISIBLE_DEVICES=$k vun ${PREFIX}_$name "$steps" "$scale" "$first" --ensemble "$rest" \
    --ensemble_mean "$mean" &
  pids+=($!); k=$(( (k + 1) % NGPU ))
done
stop_at $(( HARD - 10 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
