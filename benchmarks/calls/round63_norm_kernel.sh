#!/usr/bin/env bash
# Round 63 (issue 12), one H200: the instance norm as a Mosaic GPU kernel (norm_mgpu,
# DDGJAX_NORM_KERNEL=1) in place of XLA's transpose fusion (4.33 of 24.2 ms per sampling
# forward under weights, round 61). (1) The pass alone (norm_kernel.py: XLA's fusion, the
# kernel's reference, the kernel at 2/4/6 tiles in flight). (2) The sampling row with the
# kernel under weights_y, weights and bf16, and weights_y without it, in fresh processes,
# alternating. (3) Where a sampling forward's time goes now (profile_ppgn.py). (4) The peer
# row in one process (bench_speed.py; MODE, default weights_y).
#   bash benchmarks/calls/round63_norm_kernel.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 150 python3 benchmarks/norm_kernel.py --out "$OUT/norm_kernel.json" \
  > "$OUT/norm_kernel.log" 2>&1; stamp norm_kernel $?
# arm = fp8 mode : norm kernel flag
for arm in weights_y:1 weights_y:0 weights:1 0:1 weights_y:1 weights_y:0; do
  mode=${arm%:*}; nk=${arm#*:}; tag="${mode}_nk${nk}"
  n=$([ -f "$OUT/sample_${tag}_1.json" ] && echo 2 || echo 1)
  DDGJAX_FP8_ACTIVATIONS=$mode DDGJAX_NORM_KERNEL=$nk timeout 100 python3 \
    benchmarks/sample_row.py "$OUT/sample_${tag}_$n.json" > "$OUT/sample_${tag}_$n.log" 2>&1
  stamp "sample_${tag}_$n" $?
done
DDGJAX_FP8_ACTIVATIONS=weights_y DDGJAX_NORM_KERNEL=1 timeout 120 python3 \
  benchmarks/profile_ppgn.py --out "$OUT/prof" --dtypes bfloat16 \
  --option model.ppgn.pallas=true --skip_train --skip_ceilings --calls 3 --sample_steps 32 \
  > "$OUT/prof.log" 2>&1
stamp prof $?
gzip -f "$OUT"/prof/*.hlo.txt
DDGJAX_FP8_ACTIVATIONS=${MODE:-weights_y} DDGJAX_NORM_KERNEL=1 timeout 280 python3 \
  benchmarks/bench_speed.py --tf32 on --no_batched --repeat_sample 3 \
  --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_norm_kernel.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"
grep '"name"' "$OUT/norm_kernel.log" | cut -c1-200
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -h "^  {" "$OUT/prof.log"
grep -v Warn "$OUT/bench_speed.log" | tail -4
