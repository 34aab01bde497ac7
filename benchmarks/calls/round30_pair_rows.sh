#!/usr/bin/env bash
# Round 30 (issue 12): the pair-MLP Mosaic kernel with the tile's rows as the MMAs' M and
# the hidden layer in registers (pair_mlp_mgpu form "rows") against round 28's transposed
# form; the readout kernel on (the new default).
#   bash benchmarks/calls/round30_pair_rows.sh OUT
# The rows form was no faster and was removed: this driver runs as measured at commit
# 52f3034 (DDGJAX_MGPU_PAIR_FORM no longer exists after it).
# 1. every kernel alone (benchmarks/mgpu_kernels.py, both pair forms);
# 2. sampling 1024 Planar-60 graphs, 32 steps, bf16 + pallas, Mosaic: pair form
#    transposed / rows (a fresh process each, alternating, twice);
# 3. the kernel tests on the GPU backend, one process (JAX_PLATFORMS=cuda, no xdist);
# 4. the profile of one 1024-graph forward with the rows form.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 300 python3 benchmarks/mgpu_kernels.py --out "$OUT/kernels.json" > "$OUT/kernels.log" 2>&1
echo "kernels rc=$?"; grep -A30 "^variant" "$OUT/kernels.log"
S="import json, sys; sys.path.insert(0, 'benchmarks'); from bench_core import bench_sampling as s
print('ROW', json.dumps(s('bfloat16', options=['model.ppgn.pallas=true'], params_as_arg=True, repeat=5)))"
for v in transposed rows transposed rows; do
  DDGJAX_MGPU_PAIR_FORM=$v DDGJAX_PALLAS_BACKEND=mosaic timeout 150 python3 -c "$S" 2>&1 \
    | grep ROW | sed "s/^/$v /" >> "$OUT/sample.txt"
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
timeout 200 python3 benchmarks/profile_ppgn.py --out "$OUT/profile_rows" --dtypes bfloat16 \
  --option model.ppgn.pallas=true --skip_train --skip_ceilings > "$OUT/profile_rows.log" 2>&1
echo "profile rc=$?"; grep -A14 "== sample_forward" "$OUT/profile_rows.log"
rm -f "$OUT"/profile_rows/*.hlo.txt
