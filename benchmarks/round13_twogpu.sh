#!/usr/bin/env bash
# Round 13 (issue 12), the 2-GPU machine: Planar-60 paper config (configs/paper.py:
# planar_60,ppgn,simple, batch 64), 450 epochs in 3 jitted calls, on one GPU
# (CUDA_VISIBLE_DEVICES=0) and on both (the shard_map data-parallel path), float32 and
# bfloat16 with the fused blocks. benchmarks/epoch_times.py reports the whole loop
# (checkpoint saves included) and the jitted calls alone (chunk_ms_per_step).
# (Superseded by round13_call4.sh, which ran these rows beside the SBM sampling.)
# Usage: bash benchmarks/round13_twogpu.sh OUT   (stops starting runs by $HARD_SECONDS)
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res/two"
C=configs/paper.py:planar_60,ppgn,simple
variants=(
  "f32_ref|"
  "f32_fused|--option model.ppgn.fused=true"
  "bf16_fused|--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
)
for v in "${variants[@]}"; do
  name=${v%%|*}; opts=${v#*|}
  for gpus in one two; do
    left=$(( ${HARD_SECONDS:-500} - $(elapsed) )); [ $left -lt 30 ] && break 2
    if [ $gpus = one ]; then vis=0; else vis=0,1; fi
    CUDA_VISIBLE_DEVICES=$vis timeout $(( left < 160 ? left : 160 )) python benchmarks/epoch_times.py --epochs ${EPOCHS:-450} \
      --chunks 3 $opts --out "$OUT/res/two/${name}_$gpus.json" $C > "$OUT/res/two/${name}_$gpus.log" 2>&1
    echo "$name $gpus rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
  done
done
pack_results
