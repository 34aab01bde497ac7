#!/usr/bin/env bash
# Round 43 (issue 12), one H200 (~3 min): round 42 again after the hand-written gradient
# kept its tensor outputs and bias sums in the compute dtype (as autodiff does):
#   1. the PPGN 8x128 Planar-60 train step, batch 64, bf16 + fused, a fresh process per
#      row, DDGJAX_BLOCK_VJP 0 / 1 alternating, twice;
#   2. the Ego-small step (seeds_profile.py: one seed / five seeds / wide), 0 then 1;
#   3. the Planar-60 train step profile with the gradient (profile_ppgn.py).
#   bash benchmarks/calls/round43_vjp2.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/p0" "$OUT/p1" "$OUT/ppgn1"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
STEP="import sys, json; sys.path.insert(0, 'benchmarks'); import bench_core as b
r = b.bench_train_step('bfloat16', options=['model.ppgn.fused=true'], steps=20)
print(json.dumps({'ms_per_step': r['ms_per_step'], 'ms_per_step_min': r['ms_per_step_min']}))"
for i in 1 2; do
  for v in 0 1; do
    row=$(DDGJAX_BLOCK_VJP=$v timeout 120 python3 -c "$STEP" 2>>"$OUT/err.txt" | tail -1)
    echo "{\"vjp\": $v, \"rep\": $i, \"row\": ${row:-null}}" >> "$OUT/summary.jsonl"
  done
done
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
for v in 0 1; do
  DDGJAX_BLOCK_VJP=$v timeout 150 python3 benchmarks/seeds_profile.py --out "$OUT/p$v" $BF \
    > "$OUT/p$v/log.txt" 2>&1
  echo "{\"seeds_profile_vjp\": $v, \"rc\": $?, \"rows\": $(python3 -c "import json; print(json.dumps(json.load(open('$OUT/p$v/summary.json'))['rows']))" 2>/dev/null || echo null)}" >> "$OUT/summary.jsonl"
done
DDGJAX_BLOCK_VJP=1 timeout 150 python3 benchmarks/profile_ppgn.py --out "$OUT/ppgn1" \
  --dtypes bfloat16 --skip_ceilings --sample_batch 64 --option model.ppgn.fused=true \
  > "$OUT/ppgn1/log.txt" 2>&1
echo "{\"done_s\": $(( $(date +%s) - T0 ))}" >> "$OUT/summary.jsonl"
tar czf "$OUT/r43.tar.gz" -C "$OUT" p0 p1 ppgn1 err.txt && rm -rf "$OUT/p0" "$OUT/p1" "$OUT/ppgn1"
