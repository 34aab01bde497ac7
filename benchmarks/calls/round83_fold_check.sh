#!/usr/bin/env bash
# Round 83 (issue 12; session 35), one H200 (~4 min, the session's last device time): the
# readout fold after the fix of its hi/lo split (a bit mask; round 82's round trip through
# bfloat16 was dropped by XLA, so lo was zero and the logits off by 1.6e-3): (a) the fold
# probe (N = 16, K-major) against the exact logits; (b) the fold and one-accumulator
# tests compiled on the GPU; (c) the bf16 sampling row with the new default (fold on for
# bf16 readouts) and with DDGJAX_READOUT_FOLD=0, one fresh process each.
#   bash benchmarks/calls/round83_fold_check.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 90 python3 benchmarks/readout_fold_probe.py \
  --widths 16 --layouts kmajor --rounds 3 --out "$OUT/fold_probe.json" > "$OUT/fold_probe.log" 2>&1
stamp fold_probe $?
JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_MEM_FRACTION=0.4 timeout 110 python3 -m pytest -q -n 0 \
  -p no:cacheprovider tests/test_mgpu_kernels.py -k "folded or one_accumulator" \
  > "$OUT/pytest.log" 2>&1
stamp pytest $?
for arm in default nofold; do
  v=$([ $arm = nofold ] && echo 0 || echo "")
  DDGJAX_READOUT_FOLD=$v timeout 45 python3 benchmarks/sample_row.py \
    "$OUT/sample_bf16_$arm.json" > "$OUT/sample_bf16_$arm.log" 2>&1
  stamp "sample_bf16_$arm" $?
done
cat "$OUT/times.txt"; grep -v Warn "$OUT/fold_probe.log" | tail -6
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done; tail -3 "$OUT/pytest.log"
tar czf /tmp/r83.tar.gz -C "$OUT" . 2>/dev/null && mv /tmp/r83.tar.gz "$OUT/r83.tar.gz"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name r83.tar.gz ! -name times.txt -exec rm -rf {} +
