#!/usr/bin/env bash
# Round 48 (issue 12), one H200: XLA's CONCURRENT command-buffer scheduling, after round 47
# found the one-seed Ego-small step 21 % faster with it and the WHILE loop captured.
#   bash benchmarks/calls/round48_concurrent.sh OUT
# 1. Ego-small cold (seeds_speed.py, one run and five seeds vmapped), WHILE + CONCURRENT;
# 2. Ego-small chunks, wall clock: default / CONCURRENT alone / WHILE + CONCURRENT;
# 3. the Planar-60 bf16 train step and its peak memory under the same three;
# 4. sampling 1024 Planar-60 graphs: default / WHILE + CONCURRENT (errors kept).
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
WH="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
CON="--xla_gpu_command_buffer_scheduling_mode=CONCURRENT"
declare -A FLAGS=([default]="" [concurrent]="$CON" [while_concurrent]="$WH $CON")
XLA_FLAGS="$WH $CON" timeout 110 python3 benchmarks/seeds_speed.py --seeds 5 $BF \
  --out "$OUT/ego_cold_a.json" > "$OUT/ego_cold_a.log" 2>&1
XLA_FLAGS="$WH $CON" timeout 45 python3 benchmarks/seeds_speed.py --skip_multi $BF \
  --out "$OUT/ego_cold_b.json" > "$OUT/ego_cold_b.log" 2>&1
grep -h "wall clock\|^(a)" "$OUT"/ego_cold_*.log | cut -c1-300
for name in default concurrent while_concurrent; do
  XLA_FLAGS="${FLAGS[$name]}" timeout 100 python3 benchmarks/seeds_profile.py --wall \
    --out "$OUT/sp_$name" --rows one,seeds,wide --calls 5 $BF 2>&1 \
    | grep -E '^\{|rror' | sed "s/^/$name /" >> "$OUT/chunks.txt"
done
cat "$OUT/chunks.txt"
timeout 200 python3 benchmarks/ab_train_step.py --reps 1 --option model.ppgn.fused=true \
  --setting "" --setting "XLA_FLAGS=$CON" --setting "XLA_FLAGS=$WH $CON" \
  --out "$OUT/planar_train_step.jsonl" > "$OUT/planar_train_step.log" 2>&1
tail -3 "$OUT/planar_train_step.log" | cut -c1-300
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for name in while_concurrent default while_concurrent; do
  XLA_FLAGS="${FLAGS[$name]}" timeout 80 python3 -c "$S" > "$OUT/sample_$name.log" 2>&1
  grep ROW "$OUT/sample_$name.log" | sed "s/^/$name /" | cut -c1-200 >> "$OUT/sample.txt"
done
cat "$OUT/sample.txt"; tail -5 "$OUT/sample_while_concurrent.log" | cut -c1-400
