#!/usr/bin/env bash
# Round 90 (issues 12 and 13; session 37), one H200 (~5 min): which padded sizes are fast?
# Round 89: 187 real nodes train 1.62x faster padded to 192 (56 against 91 ms, batch 32),
# while Planar-60 padded to 64 was slower (14.9 against 12.2 ms). benchmarks/pad_alignment.py,
# bf16, fused blocks, one round, a fresh process per row: the SBM top bucket on 187, 188,
# 190, 192; Ego-small's PPGN 6x32 (17 nodes, batch 64, and 320 = five seeds' data) on 17,
# 18, 20, 24, 32; SBM-27's (27 nodes, batch 64) on 27, 28, 32.
#   bash benchmarks/calls/round90_pad_sizes.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
R=""
for N in 187 188 190 192; do R="$R --row train:187:$N:32"; done
for N in 17 18 20 24 32; do R="$R --row train:17:$N:64:32:6"; done
for N in 17 20 24; do R="$R --row train:17:$N:320:32:6"; done
for N in 27 28 32; do R="$R --row train:27:$N:64:32:6"; done
timeout ${LIMIT:-540} python3 benchmarks/pad_alignment.py --reps ${REPS:-1} ${ROWS:-$R} \
  --option model.ppgn.fused=true --out "$OUT/res/pad_sizes.jsonl" > "$OUT/res/pad_sizes.log" 2>&1
echo "pad_sizes rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
cat "$OUT/res/times.txt"
python3 -c "
import json
for l in open('$OUT/res/pad_sizes.jsonl'):
    r = json.loads(l); print(r['n'], r['N'], r['size'], r['hidden'], round(r.get('ms_per_step', -1), 3), r.get('error', ''))
"
