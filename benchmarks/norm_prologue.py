"""Does XLA fuse an instance norm into the GEMM that reads its output? (issue 12)

The sampling lever derived in docs/benchmarks.md ("The next sampling lever") needs each
block's normalised output ``x = mask * (y - mean_g) * rstd_g`` never to be written: the
next block's kernels would normalise ``y`` as they load it, and the readout's partial GEMM
``z + x @ W`` would have to do the same. This times, at the sampling shape (1024 graphs of
60 nodes, 128 channels, bf16), on the default device:

* ``gemm``: ``z + x @ W`` from a stored ``x`` (the readout term as it runs today);
* ``norm``: the norm pass alone (``y -> x``);
* ``norm_then_gemm``: both, in one jitted function (what XLA makes of the composition);
* ``copy``: ``y -> y + 1`` (one read and one write, the pass unit).

If ``norm_then_gemm`` costs about ``gemm``, XLA fuses the norm into the GEMM's prologue
and the readout needs no kernel of its own; if it costs ``norm + gemm``, it does not.
Also writes the number of kernels (fusions and custom calls) in each compiled program.

Usage: python benchmarks/norm_prologue.py --out OUT.json [--graphs 1024 --nodes 60]
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp


def normalise(y, mean, rstd, row_mask, nodes_sq):
    """``[M, C]`` bf16 -> ``mask * (y - mean_g) * rstd_g`` in bf16 (``g = row // nodes_sq``)."""
    g = y.shape[0] // nodes_sq
    y3 = y.reshape(g, nodes_sq, -1).astype(jnp.float32)
    x = (y3 - mean[:, None, :]) * rstd[:, None, :] * row_mask.reshape(g, nodes_sq, 1)
    return x.reshape(y.shape).astype(jnp.bfloat16)


def timed_and_counted(fn, *args, repeat=20):
    """Compile ``fn`` once; its median and min wall time and its kernel count (fusions
    and custom calls in the compiled entry computation)."""
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    times.sort()
    hlo = compiled.as_text()
    entry = hlo[hlo.index("ENTRY"):]
    return {"median_ms": 1e3 * times[len(times) // 2], "min_ms": 1e3 * times[0],
            "kernels": sum(entry.count(op) for op in (" fusion(", " custom-call("))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--graphs", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    g, nsq, c = args.graphs, args.nodes * args.nodes, args.channels
    keys = jax.random.split(jax.random.key(0), 6)
    y = jax.random.normal(keys[0], (g * nsq, c), jnp.bfloat16)
    x = jax.random.normal(keys[1], (g * nsq, c), jnp.bfloat16)
    z = jax.random.normal(keys[2], (g * nsq, c), jnp.bfloat16)
    w = (jax.random.normal(keys[3], (c, c)) / c ** 0.5).astype(jnp.bfloat16)
    mean = jax.random.normal(keys[4], (g, c))
    rstd = 1.0 + jax.random.uniform(keys[5], (g, c))
    row_mask = jnp.ones((g * nsq,), jnp.float32)

    programs = {
        "copy": (lambda y: y + 1, (y,)),
        "gemm": (lambda z, x, w: z + x @ w, (z, x, w)),
        "norm": (lambda y, m, r, k: normalise(y, m, r, k, nsq), (y, mean, rstd, row_mask)),
        "norm_then_gemm": (lambda z, y, m, r, k, w: z + normalise(y, m, r, k, nsq) @ w,
                           (z, y, mean, rstd, row_mask, w)),
    }
    rows = {}
    for name, (fn, fargs) in programs.items():
        rows[name] = timed_and_counted(fn, *fargs, repeat=args.repeat)
        print(name, rows[name], flush=True)
    pass_gb = g * nsq * c * 2 / 1e9
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "graphs": g, "nodes": args.nodes, "channels": c, "pass_gb": pass_gb,
              "rows": rows,
              "fused": rows["norm_then_gemm"]["median_ms"]
              < rows["gemm"]["median_ms"] + 0.5 * rows["norm"]["median_ms"]}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
