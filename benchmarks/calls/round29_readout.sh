#!/usr/bin/env bash
# Next GPU call (issue 12), prepared in session 20 without GPU time left: time the Mosaic
# readout kernel (ddgjax/models/readout_mgpu.py, off by default: DDGJAX_MGPU_READOUT=1),
# and see where the Mosaic forward's time goes.
#   bash benchmarks/calls/round29_readout.sh OUT
# 1. every kernel alone, the readout included (benchmarks/mgpu_kernels.py);
# 2. sampling 1024 Planar-60 graphs, 32 steps, bf16 + pallas: Triton, Mosaic, Mosaic with
#    the readout kernel (a fresh process each, alternating, twice);
# 3. the kernel tests on the GPU backend (JAX_PLATFORMS=cuda; conftest pins CPU otherwise);
# 4. the profile of one 1024-graph forward with the Mosaic kernels, with and without the
#    readout kernel (benchmarks/profile_ppgn.py, kernels by name).
# If the readout row is faster and its samples check out (rerun round28_quality.sh with
# DDGJAX_MGPU_READOUT=1), make it the default in pallas_launch.mosaic_readout.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 300 python3 benchmarks/mgpu_kernels.py --out "$OUT/kernels.json" > "$OUT/kernels.log" 2>&1
echo "kernels rc=$?"; tail -16 "$OUT/kernels.log"
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for v in triton mosaic mosaic_readout triton mosaic mosaic_readout; do
  ro=0; [ "$v" = mosaic_readout ] && ro=1
  DDGJAX_MGPU_READOUT=$ro DDGJAX_PALLAS_BACKEND=${v%_readout} timeout 150 python3 -c "$S" 2>&1 \
    | grep ROW | sed "s/^/$v /" >> "$OUT/sample.txt"
done
python3 - "$OUT/sample.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v, _, row = line.split(" ", 2)
    print("sample", v, round(json.loads(row)["seconds"], 4))
PY
JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 python3 -m pytest -q -n 0 -p no:cacheprovider tests/test_mgpu_kernels.py \
  > "$OUT/pytest.log" 2>&1
tail -2 "$OUT/pytest.log"
for ro in 0 1; do
  DDGJAX_MGPU_READOUT=$ro timeout 200 python3 benchmarks/profile_ppgn.py --out "$OUT/profile_ro$ro" \
    --dtypes bfloat16 --option model.ppgn.pallas=true --skip_train --skip_ceilings \
    > "$OUT/profile_ro$ro.log" 2>&1
  echo "profile readout=$ro rc=$?"
done
