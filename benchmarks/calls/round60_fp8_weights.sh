#!/usr/bin/env bash
# Round 60 (issue 12), one H200: float8 weights on float8 block outputs
# (DDGJAX_FP8_ACTIVATIONS=weights). The three kernels beside their bf16 and float8 forms
# (fp8_weight_kernels.py); the bf16 sampling row under prod, 1 and weights (each twice,
# alternating, a fresh process each); then sample quality: the Planar-60 paper config
# trained in bf16 with fused blocks (training seed 1), 2 x 1024 graphs per setting (prod,
# weights) from its last checkpoint, with the kernel tests compiled on the GPU beside the
# training. Score on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/{prod,weights}_s{0,1}/samples.json
#   bash benchmarks/calls/round60_fp8_weights.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 200 python3 benchmarks/fp8_weight_kernels.py --out "$OUT/kernels.json" \
  > "$OUT/kernels.log" 2>&1; stamp kernels $?
ARMS=${ARMS:-prod 1 weights}
REV=$(echo $ARMS | tr ' ' '\n' | tac | tr '\n' ' ')
for pass in 1 2; do
  for arm in $([ $pass = 1 ] && echo $ARMS || echo $REV); do
    DDGJAX_FP8_ACTIVATIONS=$arm timeout 120 python3 -c "
import json, sys
sys.path.insert(0, 'benchmarks')
import bench_core
from ddgjax.models import pallas_launch
r = bench_core.bench_sampling('bfloat16', options=['model.ppgn.pallas=true'], repeat=5)
r['kernel_switches'] = pallas_launch.trace_settings_record()
json.dump(r, open(sys.argv[1], 'w'), indent=1)
print(sys.argv[1], round(r['seconds'], 4), r['seconds_all'])" "$OUT/sample_${arm}_$pass.json" \
      > "$OUT/sample_${arm}_$pass.log" 2>&1
    stamp "sample_${arm}_$pass" $?
  done
done
RUN=runs/r60
( XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 300 python3 -m pytest -q \
    -n 0 -p no:cacheprovider tests/test_mgpu_kernels.py \
    -k "float8_weights or fp8_weights or fp8_activations_in_the_ppgn or reads_float8" \
    > "$OUT/pytest.log" 2>&1; stamp pytest $? ) &
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 300 python3 train.py \
  --config configs/paper.py:planar_60,ppgn,simple --workdir "$RUN" \
  --quiet --config.train.seed=1 --config.model.compute_dtype=bfloat16 \
  --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=2500 > "$OUT/train.log" 2>&1
stamp train $?
wait
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl" 2>/dev/null
for k in 0 1; do
  for arm in prod weights; do
    env DDGJAX_PALLAS_BACKEND=mosaic DDGJAX_FP8_ACTIVATIONS=$arm timeout 120 python3 sample.py \
      --workdir "$RUN" --checkpoint latest --num_samples 1024 --seed $k --pallas \
      --compute_dtype bfloat16 --protocol none --out "$OUT/q/${arm}_s$k" \
      > "$OUT/q/sample_${arm}_s$k.log" 2>&1
    stamp "quality_${arm}_s$k" $?
    rm -f "$OUT/q/${arm}_s$k/grid.png" "$OUT/q/${arm}_s$k/chain.png"
  done
done
cat "$OUT/times.txt"
cat "$OUT/kernels.log" | grep '"name"'
for f in "$OUT"/sample_*.log; do tail -1 "$f"; grep -i "error\|Traceback" "$f" | tail -2; done
tail -3 "$OUT/pytest.log"; tail -2 "$OUT/train.log"
