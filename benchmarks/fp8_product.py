"""The PPGN's per-channel product at the Planar-60 sampling shape in bfloat16 and in float8.

Probe for storing the pair MLPs' outputs in float8 (e4m3): times XLA's batched GEMM
``'cbik,cbkj->cbij'`` over ``[128, 1024, 60, 60]`` with bfloat16 operands (what the
sampler runs) and with float8 operands already in memory (what a pair kernel writing
float8 would hand it), float32 accumulation and bfloat16 output both; the float8 one
also through ``ppgn.channel_matmul_fp8`` from bfloat16 operands (the cast included, as
``DDGJAX_FP8_PRODUCT=1`` runs it). Reports each one's milliseconds, the bytes it moves at
the device's copy rate, and the relative error against a float32 product of the same
bfloat16 operands.

Round 37 added: float8 operands converted to bfloat16 in the program before XLA's bf16
GEMM (XLA fuses the convert into its GEMM: the fastest), and ``--pair``: the Mosaic
pair-MLP kernel writing bfloat16 against float8, alone and followed by the product (the
float8 path of a block against the bf16 one). A variant that fails to compile is recorded
with its error. (Round 37's first call also timed a Pallas product kernel, in git at
commit 8375cae and removed: its float8 loads did not lower in Triton, its bf16 ones ran
level with XLA.)

    python benchmarks/fp8_product.py --out OUT.json [--pair]
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
    p.add_argument("--pair", action="store_true",
                   help="also time the pair-MLP kernel with bf16 and float8 outputs")
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

    def add(name, fn, args, bytes_moved, reference=None):
        try:
            out = fn(*args)
            err, finite = rel_err(out, want if reference is None else reference)
            del out
            ms = timed(fn, args, a.repeats)
        except Exception as e:  # noqa: BLE001 - a probe: record what failed and go on
            row = {"name": name, "error": f"{type(e).__name__}: {str(e)[:400]}"}
            res["variants"].append(row)
            print(json.dumps(row), flush=True)
            return
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
    fp8_bytes = 2 * n_el + n_el * 2
    f8_to_bf16 = jax.jit(lambda x, y: (jnp.einsum(
        "cbik,cbkj->cbij", x.astype(jnp.bfloat16), y.astype(jnp.bfloat16),
        preferred_element_type=jnp.float32) * (1.0 / FP8_A_SCALE)).astype(jnp.bfloat16))
    add("fp8_in_memory_bf16_gemm", f8_to_bf16, (m1_8, m2_8), fp8_bytes)

    del m1_8, m2_8
    if a.pair:
        pair_rows(a, res, add, want)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


def pair_rows(a, res, add, want_product):
    """The Mosaic pair-MLP kernel at the sampling shape writing bf16 and float8 (the first
    output scaled by ``FP8_A_SCALE`` as the float8 path stores it), then each followed by
    its product: the block's float8 path against its bf16 one."""
    import jax
    import jax.numpy as jnp
    from ddgjax.models import pair_mlp_kernel, pair_mlp_mgpu
    from ddgjax.models.ppgn import FP8_A_SCALE

    del want_product
    cpu = jax.default_backend() == "cpu"      # a smoke test: the kernel interpreted
    rows = a.graphs * a.nodes * a.nodes
    args = pair_mlp_mgpu.random_inputs(rows, c=a.channels, h=a.channels, seed=5)
    ref = jax.jit(lambda *v: pair_mlp_kernel.pair_mlps_reference(
        *(t.astype(jnp.float32) for t in v)))(*args)
    n_el = rows * a.channels
    f8 = jnp.float8_e4m3fn
    bf16_pair = jax.jit(lambda *v: pair_mlp_mgpu.pair_mlps(*v, interpret=cpu)[1])
    add("pair_mgpu_bf16_out", bf16_pair, args, n_el * 2 * 3, reference=ref[1])
    fp8_pair = jax.jit(lambda *v: pair_mlp_mgpu.pair_mlps(*v, out_dtype=f8, interpret=cpu)[1])
    add("pair_mgpu_fp8_out", fp8_pair, args, n_el * 2 + 2 * n_el, reference=ref[1])
    fp8_pair0 = jax.jit(lambda x, w0, b0, w1, b1, s: (pair_mlp_mgpu.pair_mlps(
        x, w0, b0, w1, b1, s * FP8_A_SCALE, out_dtype=f8, interpret=cpu)[0].astype(jnp.float32)
        / FP8_A_SCALE))
    add("pair_mgpu_fp8_out_m0_scaled", fp8_pair0, args, n_el * 2 + 2 * n_el, reference=ref[0])
    shape4 = (a.channels, a.graphs, a.nodes, a.nodes)
    want = jnp.einsum("cbik,cbkj->cbij", ref[0].reshape(shape4), ref[1].reshape(shape4))
    del ref

    def block_bf16(x, w0, b0, w1, b1, s):
        m0, m1 = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, s, interpret=cpu)
        return jnp.einsum("cbik,cbkj->cbij", m0.reshape(shape4), m1.reshape(shape4))

    def block_fp8(product):
        def run(x, w0, b0, w1, b1, s):
            m0, m1 = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, s * FP8_A_SCALE, out_dtype=f8,
                                            interpret=cpu)
            return product(m0.reshape(-1, a.nodes, a.nodes),
                           m1.reshape(-1, a.nodes, a.nodes)).reshape(shape4)
        return run

    add("pair_then_product_bf16", jax.jit(block_bf16), args, n_el * 2 * 6, reference=want)
    add("pair_then_product_fp8_xla", jax.jit(block_fp8(lambda x, y: (jnp.einsum(
        "pik,pkj->pij", x.astype(jnp.bfloat16), y.astype(jnp.bfloat16),
        preferred_element_type=jnp.float32) / FP8_A_SCALE).astype(jnp.bfloat16))),
        args, n_el * 2 * 4, reference=want)


if __name__ == "__main__":
    main()
