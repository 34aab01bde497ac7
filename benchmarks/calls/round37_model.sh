#!/usr/bin/env bash
# Round 37, call 2 (issue 12): the float8 pair outputs (DDGJAX_FP8_PRODUCT) and the
# warp-specialized pair kernel (DDGJAX_PAIR_WS) in the PPGN's sampling forward.
#   bash benchmarks/calls/round37_model.sh OUT
# 1. sampling 1024 Planar-60 graphs, 32 steps, bf16 + pallas (Mosaic kernels, readout
#    kernel, folded embedding: the defaults), a fresh process per row, alternating:
#    neither / both / ws / fp8 / neither / both;
# 2. quality_ab.sh: the Planar-60 paper config trained in bf16 + fused blocks (seed 1),
#    2 x 1024 samples with DDGJAX_FP8_PRODUCT=1 and =0, both with DDGJAX_PAIR_WS=1, and the
#    Mosaic kernel tests on the GPU backend. Score on CPU:
#    python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#        OUT/q/fp8{1,0}_s{0,1}/samples.json
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for fw in 00 11 01 10 00 11; do
  DDGJAX_FP8_PRODUCT=${fw:0:1} DDGJAX_PAIR_WS=${fw:1:1} timeout 100 python3 -c "$S" 2>&1 \
    | grep ROW | sed "s/^/fp8ws$fw /" >> "$OUT/sample.txt"
done
python3 - "$OUT/sample.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v, _, row = line.split(" ", 2)
    print("sample", v, round(json.loads(row)["seconds"], 4))
PY
DDGJAX_PAIR_WS=1 bash "$(dirname "$0")/quality_ab.sh" "$OUT/q" DDGJAX_FP8_PRODUCT fp8 r37q
cd "$OUT" && tar czf q_samples.tgz q/fp8*_s* && rm -rf q/fp8*_s*
