#!/usr/bin/env bash
# Round 44 (issue 12), one H200 (~4 min):
#   1. the PPGN 8x128 Planar-60 train step, batch 64, bf16 + fused blocks, with the mixing
#      layer's bias given an exact zero gradient (DDGJAX_MIX_BIAS_GRAD=0: the instance norm
#      cancels the bias, autodiff sums dy over every entry for rounding noise) against
#      autodiff (1), a fresh process per row, alternating, twice;
#   2. the Ego-small step (seeds_profile.py: one seed / five seeds / wide): as it is, with
#      the bias switch, and with XLA's command buffers also taking while loops and
#      conditionals (--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL: the training
#      chunk's loop then need not return to the host every step).
#   bash benchmarks/calls/round44_bias_cmdbuf.sh OUT
set -u
OUT=${1:?OUT}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
STEP="import sys, json; sys.path.insert(0, 'benchmarks'); import bench_core as b
r = b.bench_train_step('bfloat16', options=['model.ppgn.fused=true'], steps=20)
print(json.dumps({'ms_per_step': r['ms_per_step'], 'ms_per_step_min': r['ms_per_step_min']}))"
for i in 1 2; do
  for v in 1 0; do
    row=$(DDGJAX_MIX_BIAS_GRAD=$v timeout 120 python3 -c "$STEP" 2>>"$OUT/err.txt" | tail -1)
    echo "{\"mix_bias_grad\": $v, \"rep\": $i, \"train_step\": ${row:-null}}" >> "$OUT/summary.jsonl"
  done
done
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
for v in "base||1" "nobias||0" "cmdbuf|--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL|1"; do
  IFS='|' read -r name flags bias <<< "$v"
  mkdir -p "$OUT/$name"
  XLA_FLAGS="$flags" DDGJAX_MIX_BIAS_GRAD=$bias timeout 150 python3 benchmarks/seeds_profile.py \
    --out "$OUT/$name" $BF > "$OUT/$name/log.txt" 2>&1
  rc=$?
  echo "{\"ego\": \"$name\", \"rc\": $rc, \"rows\": $(python3 -c "import json; print(json.dumps(json.load(open('$OUT/$name/summary.json'))['rows']))" 2>/dev/null || echo null)}" >> "$OUT/summary.jsonl"
  tail -3 "$OUT/$name/log.txt" >> "$OUT/err.txt"
  rm -f "$OUT/$name"/*.hlo.txt
done
echo "{\"done_s\": $(( $(date +%s) - T0 ))}" >> "$OUT/summary.jsonl"
tar czf "$OUT/r44.tar.gz" -C "$OUT" base nobias cmdbuf && rm -rf "$OUT/base" "$OUT/nobias" "$OUT/cmdbuf"
