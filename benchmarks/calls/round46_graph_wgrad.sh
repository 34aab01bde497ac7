#!/usr/bin/env bash
# Round 46 (issue 12), one H200 (~2.5 min): the pair-feature Dense layers' weight gradients
# as one GEMM per graph and a sum (DDGJAX_GRAPH_WGRAD=1, ppgn.graph_einsum) against one GEMM
# over all rows (0; at Ego-small's 20 736 rows XLA pads the rows to 20 992 before each
# split-K weight-gradient GEMM: 22 pad kernels per step, round 41), bf16 + fused blocks:
#   1. the Ego-small step (seeds_profile.py: one seed / five seeds / wide), 0 then 1;
#   2. the PPGN 8x128 Planar-60 train step, batch 64, 0 then 1.
#   bash benchmarks/calls/round46_graph_wgrad.sh OUT
set -u
OUT=${1:?OUT}
export PYTHONUNBUFFERED=1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
for v in 0 1; do
  mkdir -p "$OUT/p$v"
  DDGJAX_GRAPH_WGRAD=$v timeout 70 python3 benchmarks/seeds_profile.py --out "$OUT/p$v" $BF \
    --calls 3 > "$OUT/p$v/log.txt" 2>&1
  echo "{\"graph_wgrad\": $v, \"ego\": $(python3 -c "import json; print(json.dumps(json.load(open('$OUT/p$v/summary.json'))['rows']))" 2>/dev/null || echo null)}" >> "$OUT/summary.jsonl"
  rm -f "$OUT/p$v"/*.hlo.txt
done
STEP="import sys, json; sys.path.insert(0, 'benchmarks'); import bench_core as b
r = b.bench_train_step('bfloat16', options=['model.ppgn.fused=true'], steps=20, repeat=3)
print(json.dumps({'ms_per_step': r['ms_per_step'], 'ms_per_step_min': r['ms_per_step_min']}))"
for v in 0 1; do
  row=$(DDGJAX_GRAPH_WGRAD=$v timeout 50 python3 -c "$STEP" 2>>"$OUT/err.txt" | tail -1)
  echo "{\"graph_wgrad\": $v, \"train_step\": ${row:-null}}" >> "$OUT/summary.jsonl"
done
tar czf "$OUT/r46.tar.gz" -C "$OUT" p0 p1 && rm -rf "$OUT/p0" "$OUT/p1"
