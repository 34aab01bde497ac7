#!/usr/bin/env bash
# Round 37 (issue 12): float8 storage of the pair MLPs' outputs, probed at the Planar-60
# sampling shape (benchmarks/fp8_product.py --pair): the Mosaic pair kernel writing float8,
# the product from float8 operands through XLA (convert fused into its bf16 GEMM?) and
# through the Pallas product kernel (ddgjax/models/product_kernel.py), and the two
# together against the bf16 block. Then, if .baseline/ws_pair.py is carried (the
# warp-specialized pair kernel of commit 1355e5d: `git show 1355e5d:ddgjax/models/
# pair_mlp_mgpu.py > .baseline/ws_pair.py`), that kernel against today's on an H200
# (round 28 timed it on an H100 only).
# Usage: bash benchmarks/calls/round37_fp8.sh OUT
OUT=${1:?OUT}
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 330 python3 benchmarks/fp8_product.py --pair --out "$OUT/fp8_path.json" \
  > "$OUT/fp8_path.log" 2>&1
echo "fp8_product rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
if [ -f .baseline/ws_pair.py ]; then
  timeout 150 python3 - > "$OUT/ws_pair.log" 2>&1 <<'PY'
import importlib.util, json, sys
sys.path.insert(0, "benchmarks")
import jax
from mgpu_kernels import rel_err, timed
from ddgjax.models import pair_mlp_kernel, pair_mlp_mgpu
spec = importlib.util.spec_from_file_location("ws_pair", ".baseline/ws_pair.py")
ws = importlib.util.module_from_spec(spec); spec.loader.exec_module(ws)
args = pair_mlp_mgpu.random_inputs(1024 * 3600, seed=3)
ref = jax.jit(pair_mlp_kernel.pair_mlps_reference)(*args)
rows = []
for name, fn in (("today", jax.jit(pair_mlp_mgpu.pair_mlps)),
                 ("ws", jax.jit(lambda *v: ws.pair_mlps(*v, warp_specialized=True))),
                 ("old_plain", jax.jit(ws.pair_mlps)), ("today_again", jax.jit(pair_mlp_mgpu.pair_mlps))):
    try:
        out = fn(*args)
        err = [rel_err(o, r)[0] for o, r in zip(out, ref)]
        del out
        rows.append({"name": name, "ms": timed(fn, args, 30), "rel_err": err})
    except Exception as e:  # noqa: BLE001
        rows.append({"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    print(json.dumps(rows[-1]), flush=True)
json.dump(rows, open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w"))
PY
  echo "ws_pair rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
fi
