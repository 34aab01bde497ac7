"""Does a Mosaic GPU ``wgmma`` take its left operand through a transposed shared-memory view?

    python benchmarks/probe_wgmma_transposed_a.py [--out OUT.json]

Every kernel of ddgjax transposes only the right operand (``pair_mlp_mgpu.transposed``). The
readout's output-layer fold (docs/benchmarks.md, rounds 69-72: ~2.5 % of the float8 sampler,
derived) needs ``acc[M, N] = a^T b`` with ``a`` staged ``[K, M]`` in shared memory, a
transposed left operand. This probe lowers that one MMA for bfloat16 at a few shapes on the
GPU and compares it with the float32 product: per shape whether it compiled, the relative
error, or the error message. GPU only (Hopper); the CPU interpreter has no transposed
operands.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import mosaic_gpu as plgpu  # noqa: E402

from ddgjax.models.pair_mlp_mgpu import smem_transforms, transposed  # noqa: E402


def transposed_a_matmul(a, b, transpose_a: bool = True):
    """``a^T b`` for ``a`` ``[K, M]``, ``b`` ``[K, N]`` (bf16), the MMA reading ``a``
    through a transposed view of its shared-memory copy; float32 ``[M, N]``. With
    ``transpose_a=False`` (the control: the kernel's plumbing without the transposed
    operand) ``a`` is ``[M, K]`` and the result ``a b``."""
    k, m = a.shape if transpose_a else a.shape[::-1]
    n = b.shape[1]

    def kernel(a_g, b_g, o_g, a_s, b_s, o_s, bars):
        plgpu.copy_gmem_to_smem(a_g, a_s, bars.at[0])
        plgpu.copy_gmem_to_smem(b_g, b_s, bars.at[1])
        plgpu.barrier_wait(bars.at[0])
        plgpu.barrier_wait(bars.at[1])

        def mma(acc):
            plgpu.wgmma(acc, transposed(a_s) if transpose_a else a_s, b_s)
            return acc[...]
        o_s[...] = pl.run_scoped(mma, plgpu.ACC((m, n), jnp.float32))
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_s, o_g)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM(a.shape, a.dtype, transforms=smem_transforms(a.shape[1], a.dtype)),
               plgpu.SMEM((k, n), b.dtype, transforms=smem_transforms(n, b.dtype)),
               plgpu.SMEM((m, n), jnp.float32),
               plgpu.Barrier(num_barriers=2)]
    return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((m, n), jnp.float32),
                        scratch_types=scratch, grid=(1,), grid_names=("cta",))(a, b)


def probe(a, b, ref, transpose_a: bool) -> dict:
    """One lowering: whether it compiled, its relative error or its error message."""
    row = {"transpose_a": transpose_a}
    try:
        f = jax.jit(lambda x, y: transposed_a_matmul(x, y, transpose_a))
        out = np.asarray(jax.block_until_ready(f(a if transpose_a else a.T, b)))
        row["compiled"] = True
        row["rel_err"] = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    except Exception as e:            # noqa: BLE001 (a probe: report, go on)
        row["compiled"] = False
        row["error"] = f"{type(e).__name__}: {e}"[:2000]
        row["traceback_tail"] = traceback.format_exc()[-1500:]
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="64x64x128,64x64x64,64x64x16,128x64x16",
                    help="KxMxN, comma-separated")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = []
    for i, text in enumerate(s for s in args.shapes.split(",") if s):
        k, m, n = (int(v) for v in text.split("x"))
        ka, kb = jax.random.split(jax.random.PRNGKey(i))
        a = jax.random.normal(ka, (k, m), jnp.float32).astype(jnp.bfloat16)
        b = jax.random.normal(kb, (k, n), jnp.float32).astype(jnp.bfloat16)
        ref = np.asarray(a, np.float64).T @ np.asarray(b, np.float64)
        for transpose_a in (False, True):
            row = {"shape_kmn": [k, m, n], **probe(a, b, ref, transpose_a)}
            print(json.dumps({k2: v for k2, v in row.items() if k2 != "traceback_tail"})[:600],
                  flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
