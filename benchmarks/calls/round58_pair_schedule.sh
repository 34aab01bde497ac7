#!/usr/bin/env bash
# Round 58 (issue 12), one H200: the warp-specialized pair kernel's schedules
# (DDGJAX_PAIR_SCHEDULE: warpgroups taking turns on the tensor cores, two output staging
# tiles): the kernel alone under each (pair_schedule.py), the bf16 sampling row under the
# plain and the new schedules, then the kernel tests compiled on the GPU.
#   bash benchmarks/calls/round58_pair_schedule.sh OUT
# ARMS: space-separated PRECISION:SCHEDULE, PRECISION one of bf16 (the defaults), fp8
# (DDGJAX_FP8_PRODUCT=1), prod (DDGJAX_FP8_ACTIVATIONS=prod).
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
[ "${KERNELS:-1}" = 1 ] && { timeout 240 python3 benchmarks/pair_schedule.py --out "$OUT/schedule.json" \
  > "$OUT/schedule.log" 2>&1; stamp kernels $?; }
ARMS=${ARMS:-prod:plain prod:pingpong prod:pingpong_buffers2 bf16:plain bf16:pingpong}
REV=$(echo $ARMS | tr ' ' '\n' | tac | tr '\n' ' ')
# each arm twice (forward, then backward order), a fresh process each:
# bench_core.bench_sampling, 1024 Planar-60 graphs, 32 steps, bf16, the Mosaic kernels
for pass in 1 2; do
  for arm in $([ $pass = 1 ] && echo $ARMS || echo $REV); do
    prec=${arm%%:*}; sched=${arm#*:}
    case $prec in
      bf16) env="DDGJAX_FP8_PRODUCT=0" ;;
      fp8) env="DDGJAX_FP8_PRODUCT=1" ;;
      prod) env="DDGJAX_FP8_ACTIVATIONS=prod" ;;
    esac
    f="$OUT/sample_${prec}_${sched}_$pass"
    env $env DDGJAX_PAIR_SCHEDULE=$sched timeout 120 python3 -c "
import json, sys
sys.path.insert(0, 'benchmarks')
import bench_core
from ddgjax.models import pallas_launch
r = bench_core.bench_sampling('bfloat16', options=['model.ppgn.pallas=true'], repeat=${REPEAT:-5})
r['kernel_switches'] = pallas_launch.trace_settings_record()
json.dump(r, open(sys.argv[1], 'w'), indent=1)
print(sys.argv[1], round(r['seconds'], 4), r['seconds_all'])" "$f.json" > "$f.log" 2>&1
    stamp "sample_${prec}_${sched}_$pass" $?
  done
done
XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda timeout 200 python3 -m pytest -q -n 0 \
  -p no:cacheprovider tests/test_mgpu_kernels.py \
  -k "${TESTS:-pair_schedule or kernel_variants or warp_specialized_pair_kernel_in_the_ppgn}" \
  > "$OUT/pytest.log" 2>&1; stamp pytest $?
cat "$OUT/times.txt"
grep '"schedule"' "$OUT/schedule.log" 2>/dev/null; tail -3 "$OUT/schedule.log"
for f in "$OUT"/sample_*.log; do tail -1 "$f"; grep -i "error\|Traceback" "$f" | tail -2; done
tail -5 "$OUT/pytest.log"
