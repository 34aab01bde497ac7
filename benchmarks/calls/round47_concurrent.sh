#!/usr/bin/env bash
# Round 47 (issue 12), one H200: XLA's concurrent command buffers for latency-bound steps.
#   bash benchmarks/calls/round47_concurrent.sh OUT   (at commit 0fc77d5: the "unrolled" row
#   and make_train_chunk_seeds(unrolled=True) were removed after it)
# 1. Ego-small (PPGN 6x32, bf16 + fused blocks) jitted chunks of 50 steps, wall clock
#    (seeds_profile.py --wall): one seed, five seeds vmapped, five seeds unrolled (each
#    seed's step traced on its own), one seed at five times the batch; under the default
#    flags and three command-buffer settings, a fresh process each;
# 2. whole cold runs (seeds_speed.py): one run and five seeds unrolled, concurrent regions;
# 3. the Planar-60 bf16 train step (ab_train_step.py) under the same settings;
# 4. sampling 1024 Planar-60 graphs (bench_core.bench_sampling), default and regions.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
WH="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
REG="--xla_gpu_command_buffer_scheduling_mode=CONCURRENT_REGIONS"
CON="--xla_gpu_command_buffer_scheduling_mode=CONCURRENT"
declare -A FLAGS=([default]="" [regions]="$REG" [while_regions]="$WH $REG" [while_concurrent]="$WH $CON")
for name in default regions while_regions while_concurrent; do
  echo "== $name" >> "$OUT/chunks.txt"
  XLA_FLAGS="${FLAGS[$name]}" timeout 150 python3 benchmarks/seeds_profile.py --wall \
    --out "$OUT/sp_$name" --rows one,seeds,unrolled,wide --calls 5 $BF 2>&1 \
    | grep -E '^\{|rror' | sed "s/^/$name /" >> "$OUT/chunks.txt"
done
cat "$OUT/chunks.txt"
XLA_FLAGS="$WH $REG" timeout 130 python3 benchmarks/seeds_speed.py --seeds 5 $BF \
  --option=train.seeds_unrolled=true --out "$OUT/ego_cold_regions_unrolled.json" \
  > "$OUT/ego_cold_regions_unrolled.log" 2>&1
tail -3 "$OUT/ego_cold_regions_unrolled.log"
timeout 200 python3 benchmarks/ab_train_step.py --reps 1 --option model.ppgn.fused=true \
  --setting "" --setting "XLA_FLAGS=$REG" --setting "XLA_FLAGS=$WH $REG" \
  --out "$OUT/planar_train_step.jsonl" > "$OUT/planar_train_step.log" 2>&1
tail -4 "$OUT/planar_train_step.log"
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for name in default while_regions default while_regions; do
  XLA_FLAGS="${FLAGS[$name]}" timeout 80 python3 -c "$S" 2>&1 | grep ROW \
    | sed "s/^/$name /" >> "$OUT/sample.txt"
done
cat "$OUT/sample.txt"
