#!/usr/bin/env bash
# Round 42 (issue 12), one H200 (~5 min): the fused block's hand-written gradient
# (ddgjax/models/block_vjp.py, DDGJAX_BLOCK_VJP=1) against autodiff (0), bf16 + fused blocks:
#   1. the PPGN 8x128 Planar-60 train step, batch 64 (bench_core.bench_train_step), a fresh
#      process per row, alternating 0 / 1 twice;
#   2. the Ego-small step, one seed / five seeds / one seed at 5x the batch, kernel by
#      kernel (seeds_profile.py), 0 then 1, with the optimized HLO;
#   3. the Planar-60 train step profile with the hand-written gradient (profile_ppgn.py);
#   4. XLA's flag list of this jaxlib (XLA_FLAGS=--help), for later sweeps;
#   5. the Ego-small paper config cold (seeds_speed.py: one run, then five seeds in one
#      program), 1 then 0, each phase a fresh process without a compile cache.
#   bash benchmarks/calls/round42_vjp.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/p0" "$OUT/p1" "$OUT/ppgn1"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
STEP="import sys, json; sys.path.insert(0, 'benchmarks'); import bench_core as b
r = b.bench_train_step('bfloat16', options=['model.ppgn.fused=true'], steps=20)
print(json.dumps({'ms_per_step': r['ms_per_step'], 'ms_per_step_min': r['ms_per_step_min'],
                  'first_call_s': r['first_call_s']}))"
for i in 1 2; do
  for v in 0 1; do
    echo -n "{\"vjp\": $v, \"rep\": $i, \"row\": " >> "$OUT/train_step.jsonl"
    DDGJAX_BLOCK_VJP=$v timeout 120 python3 -c "$STEP" 2>>"$OUT/train_step.err" | tail -1 | tr -d '\n' >> "$OUT/train_step.jsonl"
    echo "}" >> "$OUT/train_step.jsonl"
    echo "step vjp=$v rep=$i $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  done
done
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
for v in 0 1; do
  DDGJAX_BLOCK_VJP=$v timeout 150 python3 benchmarks/seeds_profile.py --out "$OUT/p$v" $BF \
    > "$OUT/seeds_$v.log" 2>&1
  echo "seeds vjp=$v rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
done
DDGJAX_BLOCK_VJP=1 timeout 150 python3 benchmarks/profile_ppgn.py --out "$OUT/ppgn1" \
  --dtypes bfloat16 --skip_ceilings --sample_batch 64 --option model.ppgn.fused=true \
  > "$OUT/ppgn1.log" 2>&1
echo "ppgn vjp=1 rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
for v in 1 0; do
  DDGJAX_BLOCK_VJP=$v timeout 150 python3 benchmarks/seeds_speed.py --seeds 5 $BF \
    --out "$OUT/ego_cold_$v.json" > "$OUT/ego_cold_$v.log" 2>&1
  echo "ego cold vjp=$v rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
done
XLA_FLAGS=--help timeout 60 python3 -c "import jax; jax.numpy.zeros(1)" > "$OUT/xla_flags.txt" 2>&1
tar czf "$OUT/r42.tar.gz" -C "$OUT" p0 p1 ppgn1 xla_flags.txt seeds_0.log seeds_1.log ppgn1.log \
  train_step.err ego_cold_0.log ego_cold_1.log && rm -rf "$OUT/p0" "$OUT/p1" "$OUT/ppgn1" "$OUT/xla_flags.txt"
