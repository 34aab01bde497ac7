#!/usr/bin/env bash
# Round 74 (issue 12; session 34), one H200 (~6 min): the per-channel product written as a
# broadcast-multiply-reduce (DDGJAX_CHANNEL_PRODUCT=reduce) against the batched GEMM
# (einsum, the default). Small models (Ego-small PPGN 6x32, N = 18) are bound by their
# kernels' count and small GEMM tiles, so a product with no GEMM tiles to pad may shorten
# their step and the five-seed step; the Planar-60 train step is the control.
#   bash benchmarks/calls/round74_channel_product.sh OUT   (at commit b2aa17f: the switch and
#   benchmarks/channel_product.py were removed after this round)
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 150 python3 benchmarks/channel_product.py --out "$OUT/channel_product.json" \
  > "$OUT/channel_product.log" 2>&1; stamp channel_product $?
OPTS="--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
for rep in 1 2; do
  for mode in einsum reduce; do
    DDGJAX_CHANNEL_PRODUCT=$mode timeout 120 python3 benchmarks/seeds_profile.py --wall \
      --out "$OUT/ego_${mode}_$rep" $OPTS > "$OUT/ego_${mode}_$rep.log" 2>&1
    stamp "ego_${mode}_$rep" $?
  done
done
timeout 200 python3 benchmarks/ab_train_step.py --setting "DDGJAX_CHANNEL_PRODUCT=einsum" \
  --setting "DDGJAX_CHANNEL_PRODUCT=reduce" --reps 2 --option model.ppgn.fused=true \
  --out "$OUT/planar_train_step.jsonl" > "$OUT/planar_train_step.log" 2>&1
stamp planar_train_step $?
cat "$OUT/times.txt"
tail -12 "$OUT/channel_product.log"
grep -h "ms" "$OUT"/ego_*.log | grep -iv warn | tail -16
cat "$OUT/planar_train_step.jsonl"
# (the call returns at most 8 files: everything in one archive)
tar czf /tmp/round74.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/round74.tgz "$OUT/"
