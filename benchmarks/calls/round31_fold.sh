#!/usr/bin/env bash
# Round 31 (issue 12): the input embedding folded into the first block's kernels
# (DDGJAX_FOLD_EMBED, PPGNBlockFused's embed) against the unfolded model; Mosaic kernels
# with the readout kernel (both defaults).
#   bash benchmarks/calls/round31_fold.sh OUT
# 1. sampling 1024 Planar-60 graphs, 32 steps, bf16 + pallas: fold 0 / 1 (a fresh process
#    each, alternating, twice);
# 2. the kernel tests on the GPU backend, one process (JAX_PLATFORMS=cuda, no xdist);
# 3. the profile of one 1024-graph forward, folded.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for v in 0 1 0 1; do
  DDGJAX_FOLD_EMBED=$v timeout 150 python3 -c "$S" 2>&1 | grep ROW | sed "s/^/fold$v /" >> "$OUT/sample.txt"
done
python3 - "$OUT/sample.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v, _, row = line.split(" ", 2)
    print("sample", v, round(json.loads(row)["seconds"], 4))
PY
JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 python3 -m pytest -q -n 0 \
  -p no:cacheprovider tests/test_mgpu_kernels.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log"
timeout 200 python3 benchmarks/profile_ppgn.py --out "$OUT/profile_fold" --dtypes bfloat16 \
  --option model.ppgn.pallas=true --skip_train --skip_ceilings > "$OUT/profile_fold.log" 2>&1
echo "profile rc=$?"; grep -A16 "== sample_forward" "$OUT/profile_fold.log"
rm -f "$OUT"/profile_fold/*.hlo.txt
