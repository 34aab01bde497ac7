"""The PPGN's per-channel product at the Planar-60 sampling shape in bfloat16 and in float8.

Probe for storing the pair MLPs' outputs in float8 (e4m3): times XLA's batched GEMM
``'cbik,cbkj->cbij'`` over ``[128, 1024, 60, 60]`` with bfloat16 operands (what the
sampler runs) and with float8 operands already in memory (what a pair kernel writing
float8 would hand it), float32 accumulation and bfloat16 output both; the float8 one
also through ``ppgn.channel_matmul_fp8`` from bfloat16 operands (the cast included, as
``DDGJAX_FP8_PRODUCT=1`` runs it). Reports each one's milliseconds, the bytes it moves at
the device's copy rate, and the relative error against a float32 product of the same
bfloat16 operands.

    python benchmarks/fp8_product.py --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mgpu_kernels import rel_err, timed  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args()
    import jax
    import jax.numpy as jnp
    from ddgjax.models.ppgn import FP8_A_SCALE, channel_matmul_fp8

    shape = (a.channels, a.graphs, a.nodes, a.nodes)
    k1, k2 = jax.random.split(jax.random.key(0))
    # m1 carries the mask and 1/sqrt(n) as in the sampler; m2 the MLP output's scale
    m1 = (jax.random.normal(k1, shape, jnp.float32) / a.nodes ** 0.5).astype(jnp.bfloat16)
    m2 = jax.random.normal(k2, shape, jnp.float32).astype(jnp.bfloat16)
    want = jnp.einsum("cbik,cbkj->cbij", m1.astype(jnp.float32), m2.astype(jnp.float32))
    f8 = jnp.float8_e4m3fn
    m1_8 = (m1.astype(jnp.float32) * FP8_A_SCALE).astype(f8)
    m2_8 = m2.astype(f8)
    n_el = a.channels * a.graphs * a.nodes * a.nodes
    dev = jax.devices()[0]
    res = {"device": str(dev.device_kind), "jax": jax.__version__, "shape": list(shape),
           "variants": []}
    copy = jax.jit(lambda v: v * 1)
    res["copy_ms"] = timed(copy, (m1,), a.repeats)
    res["copy_tb_s"] = 2 * n_el * 2 / res["copy_ms"] / 1e9

    def add(name, fn, args, bytes_moved):
        out = fn(*args)
        err, finite = rel_err(out, want)
        ms = timed(fn, args, a.repeats)
        row = {"name": name, "ms": ms, "rel_err": err, "finite": finite,
               "gb_moved": bytes_moved / 1e9,
               "ms_at_copy_rate": bytes_moved / (res["copy_tb_s"] * 1e12) * 1e3}
        res["variants"].append(row)
        print(json.dumps(row), flush=True)

    bf16_mm = jax.jit(lambda x, y: jnp.einsum("cbik,cbkj->cbij", x, y))
    add("bf16", bf16_mm, (m1, m2), 3 * n_el * 2)
    f8_mm = jax.jit(lambda x, y: (jnp.einsum(
        "cbik,cbkj->cbij", x, y, preferred_element_type=jnp.float32)
        * (1.0 / FP8_A_SCALE)).astype(jnp.bfloat16))
    add("fp8_operands_in_memory", f8_mm, (m1_8, m2_8), 2 * n_el + n_el * 2)
    add("fp8_cast_in_program", jax.jit(channel_matmul_fp8), (m1, m2), 3 * n_el * 2)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
