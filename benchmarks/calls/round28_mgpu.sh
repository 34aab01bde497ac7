#!/usr/bin/env bash
# Round 28 (issue 12): the Mosaic GPU (wgmma) kernels against the Triton ones on one GPU.
#   bash benchmarks/calls/round28_mgpu.sh OUT
# 1. each kernel alone at the Planar-60 sampling shape (benchmarks/mgpu_kernels.py, called
#    mgpu_pair_mlp.py in calls 1-2 and run directly there, not through this driver; calls
#    1-5 of round 28 also scanned the compile cache with cuobjdump -sass, which could not
#    read the objects found there: the scan was removed);
# 2. sampling 1024 Planar-60 graphs, 32 steps, bf16 + pallas, per backend (fresh process
#    each, alternating, twice; SAMPLE_BACKENDS to choose; call 5 of round 28 also ran
#    the warp-specialized pair-MLP kernel, since removed);
# 3. the bf16 train step (batch 64) with pallas=true per backend, and with fused blocks
#    (SKIP_TRAIN=1 skips it);
# 4. the kernel tests on the GPU (JAX_PLATFORMS=cuda: tests/conftest.py otherwise pins the
#    CPU backend, as it did in calls 3-5 of round 28, whose pytest logs are CPU runs).
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 300 python3 benchmarks/mgpu_kernels.py --out "$OUT/kernels.json" \
  > "$OUT/kernels.log" 2>&1; echo "kernels rc=$?"
tail -14 "$OUT/kernels.log"
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for b in ${SAMPLE_BACKENDS:-triton mosaic triton mosaic}; do
  DDGJAX_PALLAS_BACKEND=$b timeout 150 python3 -c "$S" 2>&1 | grep ROW | sed "s/^/$b /" >> "$OUT/sample.txt"
done
python3 - "$OUT/sample.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    b, _, row = line.split(" ", 2)
    print("sample", b, round(json.loads(row)["seconds"], 4))
PY
T="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_train_step as t
print('ROW', json.dumps(t('bfloat16', options=sys.argv[1:])))"
[ -n "${SKIP_TRAIN:-}" ] || for v in "triton model.ppgn.pallas=true" "mosaic model.ppgn.pallas=true" "mosaic model.ppgn.fused=true"; do
  set -- $v
  DDGJAX_PALLAS_BACKEND=$1 timeout 150 python3 -c "$T" "$2" 2>&1 | grep ROW | sed "s/^/$1 $2 /" >> "$OUT/train.txt"
done
[ -f "$OUT/train.txt" ] && cut -c1-220 "$OUT/train.txt"
JAX_PLATFORMS=cuda timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_mgpu_kernels.py \
  > "$OUT/pytest.log" 2>&1
tail -2 "$OUT/pytest.log"
