#!/usr/bin/env bash
# Round 85 (issue 12; session 36), one H200 (~8 min): the whole peer benchmark again with
# today's defaults (round 38's docs/results/bench_speed.json predates the output layer
# folded into the readout kernel, the bf16 sampler's default since round 83): all four rows,
# fp32 and bf16, beside PyTorch eager and torch.compile in the same process, with round 37's
# settings (PART=main of round37_bench.sh: Mosaic kernels for sampling, fused blocks for
# training). Writes $OUT/bench_speed.json (and its log, gpu.txt, commit.txt, times.txt).
#   bash benchmarks/calls/round85_peer_refresh.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
git rev-parse HEAD > "$OUT/commit.txt" 2>&1
PART=main bash "$(dirname "$0")/round37_bench.sh" "$OUT"
