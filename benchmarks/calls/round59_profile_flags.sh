#!/usr/bin/env bash
# Round 59 (issue 12), one H200: where a sampling forward goes now (the Mosaic kernels,
# bf16 defaults and DDGJAX_FP8_ACTIVATIONS=prod), and XLA's fusion flags on the bf16 train
# step (fused blocks) and on the sampling row.
#   bash benchmarks/calls/round59_profile_flags.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
# 1. profiles of one 1024-graph forward (device time per kernel)
timeout 150 python3 benchmarks/profile_ppgn.py --out "$OUT/prof_bf16" --dtypes bfloat16 \
  --option model.ppgn.pallas=true --skip_train --skip_ceilings --calls 3 > "$OUT/prof_bf16.log" 2>&1
stamp prof_bf16 $?
DDGJAX_FP8_ACTIVATIONS=prod timeout 150 python3 benchmarks/profile_ppgn.py --out "$OUT/prof_prod" \
  --dtypes bfloat16 --option model.ppgn.pallas=true --skip_train --skip_ceilings --calls 3 \
  > "$OUT/prof_prod.log" 2>&1
stamp prof_prod $?
# 2. the bf16 train step (fused blocks) under XLA flags, a fresh process each
FLAGS="xla_gpu_experimental_all_fusions_with_triton=true
xla_gpu_experimental_enable_fusion_block_level_rewriter=true
xla_gpu_unsupported_enable_triton_multi_output_fusion=true
xla_gpu_experimental_enable_triton_heroless_priority_fusion=true
xla_gpu_enable_triton_gemm=false
xla_gpu_experimental_enable_triton_warp_specialization=true
xla_gpu_enable_cublaslt=true"
SETTINGS=(--setting "")
for f in $FLAGS; do SETTINGS+=(--setting "XLA_FLAGS=--$f"); done
SETTINGS+=(--setting "")
timeout 420 python3 benchmarks/ab_train_step.py "${SETTINGS[@]}" --reps 1 \
  --option model.ppgn.fused=true --timeout 90 --out "$OUT/train_flags.jsonl" \
  > "$OUT/train_flags.log" 2>&1
stamp train_flags $?
# 3. the sampling row (Mosaic kernels, DDGJAX_FP8_ACTIVATIONS=prod) under three of them
SFLAGS="xla_gpu_experimental_all_fusions_with_triton=true
xla_gpu_experimental_enable_fusion_block_level_rewriter=true
xla_gpu_unsupported_enable_triton_multi_output_fusion=true"
for f in none $SFLAGS none; do
  name=${f%%=*}
  fl=$([ "$f" = none ] && echo "" || echo "--$f")
  XLA_FLAGS="$fl" DDGJAX_FP8_ACTIVATIONS=prod timeout 90 python3 -c "
import json, sys
sys.path.insert(0, 'benchmarks')
import bench_core
r = bench_core.bench_sampling('bfloat16', options=['model.ppgn.pallas=true'], repeat=3)
r['xla_flags'] = sys.argv[2]
print(json.dumps(r))" "$name" "$fl" >> "$OUT/sample_flags.jsonl" 2> "$OUT/sample_$name.err"
  stamp "sample_$name" $?
done
cat "$OUT/times.txt"
grep -h "^  {" "$OUT"/prof_*.log
cat "$OUT/train_flags.log" | tail -14
python3 -c "
import json
for l in open('$OUT/sample_flags.jsonl'):
    r = json.loads(l); print(round(r['seconds'], 4), r['xla_flags'])" 2>&1 | tail -12
