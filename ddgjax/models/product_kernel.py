"""The PPGN's per-channel product as a Pallas (Triton) kernel that reads float8 operands.

``channel_product(a, b)`` computes ``out[p] = a[p] @ b[p] * out_scale`` for a stack of
``N x N`` matrices ``[P, N, N]`` (``P`` = channels x graphs), the product of a PPGN block
(``ppgn.channel_matmul``). XLA runs it as a batched GEMM at the device's copy rate in
bfloat16 (docs/benchmarks.md, round 32), but its float8 GEMM is slower than its bf16 one
although it moves a third fewer bytes. This kernel loads each ``N x N`` operand (float8
or bfloat16; rows of ``N`` entries, so ``N`` need not make 16-byte rows, which TMA would
want) into a zero-padded power-of-two tile, converts it to ``compute_dtype`` and
multiplies on the tensor cores with a float32 accumulator; the result is written in
``out_dtype``. One program takes ``per_program`` matrices.

On CPU it runs in Pallas' interpret mode (tests); ``product_reference`` is the function.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from ddgjax.models import pallas_launch


def product_reference(a, b, out_scale: float = 1.0, out_dtype=jnp.bfloat16,
                      compute_dtype=jnp.bfloat16):
    """``[P, N, N]`` x2 -> ``[P, N, N]``: ``a[p] @ b[p] * out_scale`` from operands rounded
    to ``compute_dtype``, accumulated in float32, in ``out_dtype``."""
    out = jnp.einsum("pik,pkj->pij", a.astype(compute_dtype), b.astype(compute_dtype),
                     preferred_element_type=jnp.float32)
    return (out * out_scale).astype(out_dtype)


def _next_pow2(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())       # tl.dot wants 16 or more


def _kernel(a_ref, b_ref, o_ref, *, n: int, per_program: int, out_scale: float,
            compute_dtype, masked: bool):
    """Each ``N x N`` matrix as an ``npad x npad`` tile. Padding lanes read and write the
    nearest real entry (clamped offsets), with the operands zero past ``N`` along the
    summed axis, so a padding lane's result equals the entry it aliases: every load and
    store is in bounds and unmasked, and duplicate stores write equal values."""
    npad = _next_pow2(n)
    i = jnp.arange(npad, dtype=jnp.int32)
    clamp = jnp.minimum(i, n - 1)
    offs = clamp[:, None] * n + clamp[None, :]                          # [npad, npad]
    valid = (i[:, None] < n) & (i[None, :] < n)
    if masked:
        offs = jnp.where(valid, i[:, None] * n + i[None, :], 0)
    k_ok_a = jnp.broadcast_to(i[None, :] < n, (npad, npad))            # a's columns
    k_ok_b = jnp.broadcast_to(i[:, None] < n, (npad, npad))            # b's rows
    for g in range(per_program):
        p = pl.program_id(0) * per_program + g
        if masked:
            a, b = (plt.load(ref.at[p, offs], mask=valid, other=0).astype(compute_dtype)
                    for ref in (a_ref, b_ref))
        else:
            a = jnp.where(k_ok_a, plt.load(a_ref.at[p, offs]), 0).astype(compute_dtype)
            b = jnp.where(k_ok_b, plt.load(b_ref.at[p, offs]), 0).astype(compute_dtype)
        acc = jnp.dot(a, b, preferred_element_type=jnp.float32)
        out = (acc * out_scale).astype(o_ref.dtype)
        plt.store(o_ref.at[p, offs], out, mask=valid if masked else None)


def channel_product(a, b, out_scale: float = 1.0, out_dtype=jnp.bfloat16,
                    compute_dtype=jnp.bfloat16, per_program: int = 1, masked: bool = False):
    """``product_reference`` through the kernel.

    Args:
      a, b: ``[P, N, N]`` (float8 e4m3 or bfloat16; the same shape).
      out_scale: a constant multiplied into the float32 result (undoes a scale the
        float8 operands were stored with).
      out_dtype: the result's dtype; compute_dtype: the operands' dtype on the tensor
        cores (bfloat16, or the float8 type itself).
      per_program: matrices per program (the largest divisor of ``P`` up to it).
      masked: padding lanes masked off rather than clamped (``_kernel``; GPU only).
    Returns: ``[P, N, N]`` in ``out_dtype``.
    """
    p_count, n, n2 = a.shape
    if b.shape != a.shape or n != n2:
        raise ValueError(f"channel_product: expected two [P, N, N] stacks, got {a.shape} "
                         f"and {b.shape}")
    per = max(k for k in range(1, min(per_program, p_count) + 1) if p_count % k == 0)
    flat = lambda v: v.reshape(p_count, n * n)
    kernel = functools.partial(_kernel, n=n, per_program=per, out_scale=float(out_scale),
                               compute_dtype=compute_dtype, masked=masked)
    out = pl.pallas_call(
        kernel, grid=(p_count // per,),
        out_shape=jax.ShapeDtypeStruct((p_count, n * n), out_dtype),
        **pallas_launch.call_options("DDGJAX_PRODUCT"),
    )(flat(a), flat(b))
    return out.reshape(p_count, n, n)
