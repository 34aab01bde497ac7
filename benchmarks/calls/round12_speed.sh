#!/usr/bin/env bash
# Round 12 (issue 12), one GPU: where the small-model step goes, and whether XLA's
# command buffers (CUDA graphs, including the scan's WHILE loop) take the launch gaps out.
#   A. Ego-small paper config (PPGN 6x32, configs/paper.py:ego_small,ppgn,simple), 1000
#      epochs, steady ms/step under each XLA_FLAGS variant below, each in its own process
#      (a flag this XLA does not know fails only its own row);
#   B. the profile of that train step at its shape (kernels by name and count per step,
#      the optimized HLO): benchmarks/profile_ppgn.py;
#   C. the 5-seed phase of benchmarks/seeds_speed.py (one run vs 5 seeds in one program).
# Usage: bash benchmarks/calls/round12_speed.sh OUT   (stops everything by $HARD_SECONDS)
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p "$OUT/res/flags"
CFG=configs/paper.py:ego_small,ppgn,simple
variants=(
  "default|"
  "cmdbuf_off|--xla_gpu_enable_command_buffer="
  "cmdbuf_while|--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL"
  "cmdbuf_while_min1|--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL --xla_gpu_graph_min_graph_size=1"
)
for v in "${variants[@]}"; do
  name=${v%%|*}; flags=${v#*|}
  left=$(( ${HARD_SECONDS:-540} - $(elapsed) )); [ $left -lt 40 ] && break
  XLA_FLAGS="$flags" timeout $(( left < 75 ? left : 75 )) python benchmarks/epoch_times.py --epochs ${EPOCHS:-1000} \
    --out "$OUT/res/flags/$name.json" $CFG > "$OUT/res/flags/$name.log" 2>&1
  echo "$name rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
done
left=$(( ${HARD_SECONDS:-540} - $(elapsed) ))
if [ $left -gt 40 ]; then
  timeout $(( left < 90 ? left : 90 )) python benchmarks/profile_ppgn.py --out "$OUT/res/profile_ego" \
    --dtypes float32 --hidden 32 --blocks 6 --nodes 18 --train_batch 32 --skip_ceilings \
    ${PROFILE_EXTRA:-} > "$OUT/res/profile_ego.log" 2>&1
  echo "profile rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
fi
left=$(( ${HARD_SECONDS:-540} - $(elapsed) ))
if [ $left -gt 30 ]; then
  timeout $left python benchmarks/seeds_speed.py --seeds 5 ${SEEDS_EXTRA:-} \
    --out "$OUT/res/seeds_speed.json" > "$OUT/res/seeds_speed.log" 2>&1
  echo "seeds rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
fi
pack_results
