"""The PPGN's per-channel product, ``ppgn.channel_matmul``, as a batched GEMM against a
fused multiply-and-sum (``product="gemm"`` / ``"broadcast"``), forward and forward +
backward, at the shapes the paper configs train and sample.

Each timing is one jitted ``lax.fori_loop`` of ``--iters`` products chained through
their operand (``a <- a + 1e-3 * out``, the same extra pass in both variants), so a small
product's time is its kernels' and not the dispatch of a call; reported per product, the
median of ``--repeats`` calls. The backward is ``jax.vjp`` with a fixed cotangent. Also
reports the largest difference between the two outputs (float32 sums in both, in
another order).

    python benchmarks/channel_product.py --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ddgjax.models.ppgn import channel_matmul  # noqa: E402

# (name, channels C, graphs B, nodes N): [C, B, N, N] operands
SHAPES = (("ego_small_train_bs64", 32, 64, 18),
          ("ego_small_5seeds_bs64", 32, 320, 18),
          ("community_small_train_bs64", 32, 64, 20),
          ("sbm_27_train_bs64", 32, 64, 27),
          ("ego_small_sample_1024", 32, 1024, 18),
          ("planar60_train_bs64", 128, 64, 60))


def chained(product: str, backward: bool, iters: int):
    def one(a, b, g):
        if not backward:
            return channel_matmul(a, b, product)
        out, vjp = jax.vjp(lambda x, y: channel_matmul(x, y, product), a, b)
        da, db = vjp(g)
        return out + da + db

    @jax.jit
    def run(a, b, g):
        def body(_, a):
            return (a + 1e-3 * one(a, b, g)).astype(a.dtype)
        return jax.lax.fori_loop(0, iters, body, a)
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--shapes", default="", help="comma-separated names (default: all)")
    args = p.parse_args()
    want = set(args.shapes.split(",")) if args.shapes else None
    dev = jax.devices()[0]
    rows = []
    for name, c, bsz, n in SHAPES:
        if want and name not in want:
            continue
        for dtype in (jnp.bfloat16, jnp.float32):
            ks = jax.random.split(jax.random.PRNGKey(0), 3)
            a, b, g = (jax.random.normal(k, (c, bsz, n, n), jnp.float32).astype(dtype)
                       for k in ks)
            row = {"shape": name, "C": c, "B": bsz, "N": n, "dtype": jnp.dtype(dtype).name}
            diff = jnp.abs(channel_matmul(a, b, "gemm").astype(jnp.float32)
                           - channel_matmul(a, b, "broadcast").astype(jnp.float32)).max()
            row["max_abs_diff"] = float(diff)
            for product in ("gemm", "broadcast"):
                for backward in (False, True):
                    fn = chained(product, backward, args.iters)
                    jax.block_until_ready(fn(a, b, g))
                    times = []
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        jax.block_until_ready(fn(a, b, g))
                        times.append(time.perf_counter() - t0)
                    key = f"{product}_{'fwd_bwd' if backward else 'fwd'}_us"
                    row[key] = float(np.median(times)) / args.iters * 1e6
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = {"device": f"{dev.device_kind} ({dev.platform})", "jax": jax.__version__,
           "iters": args.iters, "repeats": args.repeats,
           "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
