#!/usr/bin/env bash
# Round 61 (issue 12; prepared in session 30, not yet run), one H200: what round 60 left
# open for DDGJAX_FP8_ACTIVATIONS=weights. (1) The kernels again (fp8_weight_kernels.py: the
# mixing kernel's two-accumulator form written after round 60, the readout at 128-row
# tiles). (2) The sampling row under weights and weights_y (written after round 60).
# (3) Where a whole sampling run's time goes: the forward's device time (profile_ppgn.py)
# against the wall clock of 32 steps. (4) The peer row in one process (bench_speed.py;
# MODE=weights_y for the other setting). Quality: round62_fp8_quality.sh.
#   bash benchmarks/calls/round61_fp8_weights_next.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 200 python3 benchmarks/fp8_weight_kernels.py --out "$OUT/kernels.json" \
  > "$OUT/kernels.log" 2>&1; stamp kernels $?
# the sampling row under weights and weights_y (the mixing output in float8 too), each
# twice, alternating, a fresh process each
for arm in weights weights_y weights_y weights; do
  n=$([ -f "$OUT/sample_${arm}_1.json" ] && echo 2 || echo 1)
  DDGJAX_FP8_ACTIVATIONS=$arm timeout 120 python3 benchmarks/sample_row.py \
    "$OUT/sample_${arm}_$n.json" > "$OUT/sample_${arm}_$n.log" 2>&1
  stamp "sample_${arm}_$n" $?
done
DDGJAX_FP8_ACTIVATIONS=weights timeout 150 python3 benchmarks/profile_ppgn.py \
  --out "$OUT/prof_weights" --dtypes bfloat16 --option model.ppgn.pallas=true --skip_train \
  --skip_ceilings --calls 3 --sample_steps 32 > "$OUT/prof_weights.log" 2>&1
stamp prof_weights $?
rm -f "$OUT"/prof_weights/*.hlo.txt
DDGJAX_FP8_ACTIVATIONS=${MODE:-weights} timeout 330 python3 benchmarks/bench_speed.py --tf32 on \
  --no_batched --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample \
  --dtypes bfloat16 --out "$OUT/bench_speed_fp8weights.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"
grep '"name"' "$OUT/kernels.log"
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -h "^  {" "$OUT/prof_weights.log"
grep -v Warn "$OUT/bench_speed.log" | tail -4
