#!/usr/bin/env bash
# Round 21 (issue 12), one GPU: where the PPGN 8x128 train step (batch 64, N = 60,
# bfloat16, fused blocks: the issue's "train step <= 8 ms" row) spends its device time,
# kernel by kernel, and whether XLA's cuDNN GEMM fusions change it:
#   base   benchmarks/profile_ppgn.py --dtypes bfloat16 --option model.ppgn.fused=true
#   cudnn  the same with XLA_FLAGS=--xla_gpu_cudnn_gemm_fusion_level=2
# (each also profiles the 1024-graph sampling forward). Results are packed into
# OUT/results.tar.gz after every step.
# Usage: HARD_SECONDS=200 bash benchmarks/calls/speed_round21.sh OUT
# (a CPU dry run: PROFILE_EXTRA="--sample_batch 4 --train_batch 4 --nodes 12 --calls 1")
set -uo pipefail
FINAL=$(cd "$1" && pwd)
OUT=$(mktemp -d /tmp/speed_round21.XXXX)
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-200}
export CUDA_VISIBLE_DEVICES=0
PROFILE="python benchmarks/profile_ppgn.py --dtypes bfloat16 --option model.ppgn.fused=true \
  --skip_ceilings --calls 5 ${PROFILE_EXTRA:-}"
step base 40 100 $PROFILE --out "$OUT/res/base"
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_cudnn_gemm_fusion_level=2" step cudnn 40 100 \
  $PROFILE --out "$OUT/res/cudnn"
tar czf "$FINAL/results.tar.gz" -C "$OUT" res
echo "packed at $(elapsed) s"
