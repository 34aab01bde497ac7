#!/usr/bin/env bash
# Round 45 (issue 12), one H200 (~2.5 min): the Ego-small paper config cold after round 44
# (the mixing bias's exact zero gradient, now always on with the instance norm), bf16 +
# fused blocks: one run and five seeds in one program, then one run again; each phase a
# fresh process, no compile cache (seeds_speed.py).
#   bash benchmarks/calls/round45_ego_cold.sh OUT
set -u
OUT=${1:?OUT}
export PYTHONUNBUFFERED=1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
timeout 110 python3 benchmarks/seeds_speed.py --seeds 5 $BF --out "$OUT/ego_cold_a.json" \
  > "$OUT/ego_cold_a.log" 2>&1
timeout 45 python3 benchmarks/seeds_speed.py --skip_multi $BF --out "$OUT/ego_cold_b.json" \
  > "$OUT/ego_cold_b.log" 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
