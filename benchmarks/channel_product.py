"""The PPGN's per-channel product written two ways (``common.channel_matmul``'s ``mode``),
forward and forward + backward, at the shapes the paper configs train at.

    python benchmarks/channel_product.py [--shapes 32x64x18,32x320x18,128x64x60]
        [--dtype bfloat16] [--repeat 50] [--out OUT.json]

Each shape is ``CxBxN`` (channels, graphs, nodes): ``32x64x18`` is Ego-small's PPGN 6x32 at
batch 64, ``32x320x18`` five such seeds in one program (``vmap`` stacks them into the
graph axis), ``128x64x60`` the Planar-60 train step. Per shape and mode: the relative error
against a float64 product on the host (fresh random inputs), and the median and minimum
device milliseconds of the jitted forward and of the jitted forward + backward (value and
gradients of ``sum(out * g)``), each over ``--repeat`` calls after a warm-up, rotating among
four input sets so that repeated calls do not measure a warm cache alone. Also the bytes a
pass must move (inputs read once, output written once) and the time at a copy rate measured
here.
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

from ddgjax.models.common import CHANNEL_PRODUCTS, channel_matmul  # noqa: E402


def parse_shape(text: str) -> tuple:
    """``"32x64x18"`` -> ``(32, 64, 18)``; ValueError naming the text otherwise."""
    try:
        c, b, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shapes: expected CxBxN such as 32x64x18, got {text!r}") from None
    return c, b, n


def time_calls(fn, arg_sets, repeat: int) -> dict:
    """Median and minimum milliseconds of ``fn(*args)`` (waited for), rotating ``arg_sets``."""
    for args in arg_sets:
        jax.block_until_ready(fn(*args))
    times = []
    for i in range(repeat):
        args = arg_sets[i % len(arg_sets)]
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": float(np.median(times)), "min_ms": float(np.min(times))}


def copy_rate_gbs(nbytes: int = 1 << 30, repeat: int = 20) -> float:
    """Device copy rate (bytes read plus written per second, in GB/s) of a large array."""
    x = jnp.ones((nbytes // 4,), jnp.float32) * 1.5
    f = jax.jit(lambda v: v + 1.0)
    t = time_calls(f, [(x,)], repeat)["median_ms"]
    return 2 * nbytes / (t * 1e-3) / 1e9


def bench_shape(shape, dtype, repeat: int, rate_gbs: float) -> dict:
    c, b, n = shape
    keys = jax.random.split(jax.random.PRNGKey(sum(shape)), 12)
    sets = [tuple(jax.random.normal(keys[3 * i + j], (c, b, n, n), jnp.float32).astype(dtype)
                  for j in range(3)) for i in range(4)]
    a64, b64 = (np.asarray(v, np.float64) for v in sets[0][:2])
    ref = np.einsum("cbik,cbkj->cbij", a64, b64)
    itemsize = jnp.dtype(dtype).itemsize
    tensor_bytes = c * b * n * n * itemsize
    row = {"shape": list(shape), "dtype": jnp.dtype(dtype).name,
           "forward_bytes": 3 * tensor_bytes, "backward_bytes": 7 * tensor_bytes,
           "forward_floor_ms": 3 * tensor_bytes / (rate_gbs * 1e9) * 1e3}
    for mode in CHANNEL_PRODUCTS:
        fwd = jax.jit(lambda x, y, m=mode: channel_matmul(x, y, m))
        out = np.asarray(fwd(*sets[0][:2]), np.float64)
        err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
        loss = lambda x, y, g, m=mode: jnp.sum(channel_matmul(x, y, m).astype(jnp.float32)
                                               * g.astype(jnp.float32))
        both = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        row[mode] = {"rel_err_vs_float64": err,
                     "forward": time_calls(fwd, [s[:2] for s in sets], repeat),
                     "forward_backward": time_calls(both, sets, repeat)}
        print(f"{shape} {mode:7s} err {err:.2e}  fwd {row[mode]['forward']['median_ms']:.4f} ms"
              f"  fwd+bwd {row[mode]['forward_backward']['median_ms']:.4f} ms", flush=True)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="32x64x18,32x320x18,32x64x32,128x64x60")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    rate = copy_rate_gbs()
    print(f"device {jax.devices()[0].device_kind}: copy rate {rate:.0f} GB/s", flush=True)
    rows = [bench_shape(s, jnp.dtype(args.dtype), args.repeat, rate) for s in shapes]
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "copy_rate_gbs": rate, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print("shape            mode     fwd ms   fwd+bwd ms  (fwd floor ms)")
    for r in rows:
        for mode in CHANNEL_PRODUCTS:
            print(f"{'x'.join(map(str, r['shape'])):16s} {mode:7s} "
                  f"{r[mode]['forward']['median_ms']:8.4f} "
                  f"{r[mode]['forward_backward']['median_ms']:10.4f}  "
                  f"({r['forward_floor_ms']:.4f})")


if __name__ == "__main__":
    main()
