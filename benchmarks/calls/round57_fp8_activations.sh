#!/usr/bin/env bash
# Round 57 (issue 12), one H200: the kernels that read float8 activations
# (DDGJAX_FP8_ACTIVATIONS): each kernel beside its bf16 form (mgpu_kernels.py --fp8), the
# bf16 sampling row with float8 pair outputs (today's fastest) against float8 activations
# (bench_speed.py, no PyTorch), then the kernel tests compiled on the GPU.
#   bash benchmarks/calls/round57_fp8_activations.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
[ "${KERNELS:-1}" = 1 ] && timeout 200 python3 benchmarks/mgpu_kernels.py --fp8 --repeats 20 ${ONLY:+--only "$ONLY"} --out "$OUT/kernels.json" \
  > "$OUT/kernels.log" 2>&1 && stamp kernels $?
B="--tf32 on --no_batched --repeat_sample ${REPEAT:-3} --ddgjax_option model.ppgn.pallas=true
   --rows sample --dtypes bfloat16 --skip_torch"
for arm in ${ARMS:-fp8prod fp8act}; do
  case $arm in
    fp8prod) env=DDGJAX_FP8_PRODUCT=1 ;;
    fp8act) env=DDGJAX_FP8_ACTIVATIONS=1 ;;
    fp8actprod) env=DDGJAX_FP8_ACTIVATIONS=prod ;;
  esac
  env $env timeout 150 python3 benchmarks/bench_speed.py $B --out "$OUT/sample_$arm.json" \
    > "$OUT/sample_$arm.log" 2>&1; stamp "sample_$arm" $?
done
# TORCH_ENV (e.g. DDGJAX_FP8_ACTIVATIONS=prod): the sample row once more beside PyTorch
if [ -n "${TORCH_ENV:-}" ]; then
  env $TORCH_ENV timeout 300 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
    --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
    --out "$OUT/bench_speed_torch.json" > "$OUT/bench_speed_torch.log" 2>&1
  stamp torch $?
fi
XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 240 python3 -m pytest -q -n 0 \
  -p no:cacheprovider tests/test_mgpu_kernels.py \
  -k "${TESTS:-float8_activations or fp8_activations_in or fp8_product_under_mosaic}" \
  > "$OUT/pytest.log" 2>&1; stamp pytest $?
cat "$OUT/times.txt"
tail -25 "$OUT/kernels.log" 2>/dev/null
grep "variant\|torch\|ddgjax" "$OUT/bench_speed_torch.log" 2>/dev/null | tail -6
for arm in ${ARMS:-fp8prod fp8act}; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], [(r.get('dtype'), r.get('ddgjax_s')) for r in d['rows']])" "$OUT/sample_$arm.json" 2>&1 | tail -1
  grep -i "error\|Traceback" "$OUT/sample_$arm.log" | tail -3
  grep "ddgjax_variant:" "$OUT/sample_$arm.log" | tail -1
done
tail -5 "$OUT/pytest.log"
