#!/usr/bin/env bash
# Round 32 (issue 12): sample quality with the input embedding folded into the first block
# (DDGJAX_FOLD_EMBED=1, the default) against the unfolded model, from one checkpoint, with
# the Mosaic kernel tests on the GPU (quality_ab.sh); then, from the same checkpoint, the
# float8 product probe: 2 x 1024 graphs with DDGJAX_FP8_PRODUCT=1 (same sampling seeds) and
# the product alone in bf16 and float8 (benchmarks/fp8_product.py).
# Score on CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/fold{1,0}_s{0,1}/samples.json OUT/fp8_s{0,1}/samples.json
# Usage: bash benchmarks/calls/round32_fold_quality.sh OUT
OUT=${1:?OUT}
bash "$(dirname "$0")/quality_ab.sh" "$OUT" DDGJAX_FOLD_EMBED fold r32q
t0=$(date +%s)
for k in 0 1; do
  DDGJAX_PALLAS_BACKEND=mosaic DDGJAX_FP8_PRODUCT=1 timeout 120 python3 sample.py \
    --workdir runs/r32q --checkpoint latest --num_samples 1024 --seed $k --pallas \
    --compute_dtype bfloat16 --protocol none --out "$OUT/fp8_s$k" > "$OUT/sample_fp8_s$k.log" 2>&1
  echo "sample fp8 s$k rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
  rm -f "$OUT/fp8_s$k/grid.png"
done
timeout 120 python3 benchmarks/fp8_product.py --out "$OUT/fp8_product.json" > "$OUT/fp8_product.log" 2>&1
echo "fp8_product rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
cd "$OUT" && tar czf samples.tgz fold*_s* fp8_s* sample_*.log && rm -rf fold*_s* fp8_s* sample_*.log
