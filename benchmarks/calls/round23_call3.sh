#!/usr/bin/env bash
# Round 23, call 3 (issue 12), one GPU: the fused block's second pair-MLP layer as one GEMM
# batched over the two MLPs (this code) against the block-diagonal [2h, 2h] GEMM (the code
# before it, carried as .baseline/: `git archive eb8bbfd`), each in its own process, new
# then old then new: the bf16 fused train step at batch 64 and the XLA fused bf16 sampling
# of 1024 graphs (benchmarks/batch_scaling.py). $OUT/*.json, $OUT/times.txt.
# Usage: bash benchmarks/calls/round23_call3.sh OUT
set -uo pipefail
OUT=$1; T0=$(date +%s)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
ARGS=(--sample_batches 1024 --sample_options model.ppgn.fused=true --train_batches 64
      --train_options model.ppgn.fused=true ${QUICK:-})
one() {  # NAME DIR
  ( cd "$2" && timeout ${LIMIT:-90} python benchmarks/batch_scaling.py --out "$OUT/$1.json" \
      "${ARGS[@]}" ) > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
}
one new1 . ; one old .baseline ; [ "${THIRD:-1}" = 1 ] && one new2 .
cat "$OUT/times.txt"
