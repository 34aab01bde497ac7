#!/usr/bin/env bash
# Round 13, call 4 (the 2-GPU machine):
#   1. issue 12, data-parallel scaling: Planar-60 paper config (batch 64), $EPOCHS epochs
#      in 3 jitted calls, one GPU (CUDA_VISIBLE_DEVICES=0) then both, per variant of
#      $VARIANTS (benchmarks/epoch_times.py: whole loop and jitted calls alone);
#   2. issue 13, the SPECTRE SBM deliverable's graphs (call 3 sampled and scored them but
#      ran past the call's limit before packing): each row of $ROWS
#      (NAME:STEPS:VUN_EVAL_OPTIONS, |-separated) in its own process, rows spread over
#      the GPUs, 5 seeds x 40 graphs from $W's $CKPT (EMA), --protocol none (MMDs and
#      graph-tool validity from the files on a CPU: benchmarks/check_samples.py).
# Stops by $HARD_SECONDS; $OUT holds only results.tar.gz.
# Usage: bash benchmarks/calls/round13_call4.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-480}
mkdir -p "$OUT/res/two"
C=configs/paper.py:planar_60,ppgn,simple
IFS='|' read -ra variants <<< "${VARIANTS:-f32_ref:|bf16_fused:--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true}"
for v in "${variants[@]}"; do
  IFS=':' read -r name opts <<< "$v"
  for gpus in one two; do
    left=$(( HARD - 200 - $(elapsed) )); [ $left -lt 30 ] && break 2
    if [ $gpus = one ]; then vis=0; else vis=0,1; fi
    CUDA_VISIBLE_DEVICES=$vis timeout $(( left < 120 ? left : 120 )) python benchmarks/epoch_times.py \
      --epochs ${EPOCHS:-450} --chunks 3 $opts --out "$OUT/res/two/${name}_$gpus.json" $C \
      > "$OUT/res/two/${name}_$gpus.log" 2>&1
    echo "$name $gpus rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
  done
done
W=${W:-.devdata/sbm_r11/sbm_best}
ROWS=${ROWS:-"best:64:--option logit_scale=0.9|best_T1024:1024:|best_plain:64:"}  # GPU 0, 1, 0
ngpu=$(nvidia-smi -L | wc -l)
IFS='|' read -ra rows <<< "$ROWS"
pids=(); k=0
for row in "${rows[@]}"; do
  IFS=':' read -r name steps opts <<< "$row"
  CUDA_VISIBLE_DEVICES=$(( k % ngpu )) python benchmarks/vun_eval.py --workdir $W \
    --checkpoint ${CKPT:-best_val} --ema --validity none --protocol none --seeds 5 \
    --num_samples 40 --num_steps $steps $opts --name spectre_sbm_$name \
    --out "$OUT/res/samples" > "$OUT/res/vun_$name.log" 2>&1 &
  pids+=($!); k=$(( k + 1 ))
done
stop_at "$HARD" "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
