"""What XLA's deterministic GPU ops cost: the issue-12 rows (sample 1024 Planar-60-sized
graphs with PPGN 8x128 in 32 steps, bfloat16 + Pallas kernels; the batch-64 train step in
bfloat16 + fused blocks and in float32), timed in this process under its ``XLA_FLAGS``.
Run it twice, once with ``XLA_FLAGS=--xla_gpu_deterministic_ops=true``:

    python benchmarks/deterministic_cost.py --out OUT.json

Writes the rows of ``bench_core.bench_sampling`` / ``bench_train_step`` with the device
and ``XLA_FLAGS``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import jax

    from bench_core import bench_sampling, bench_train_step

    rows = [bench_sampling("bfloat16", options=["model.ppgn.pallas=true"], params_as_arg=True),
            bench_train_step("bfloat16", options=["model.ppgn.fused=true"]),
            bench_train_step("float32")]
    out = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
