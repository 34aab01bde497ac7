"""The fused PPGN block's XLA path with a hand-written gradient (``jax.custom_vjp``).

``fused_block`` computes exactly what ``PPGNBlockFused``'s XLA path computes (the same
operations in the same order, so the same values bit for bit): the two pair MLPs (first
layers as one ``[c, 2h]`` GEMM, second layers as one block-diagonal ``[2h, 2h]`` GEMM
writing channels first), the per-channel product of the masked and scaled ``m1`` with
``m2``, the mixing layer over ``[x, prod]`` and the one-pass masked instance norm. Its
gradient is written out from residuals instead of being left to autodiff, to spend fewer
passes over the ``[B, N, N, h]`` tensors:

* the instance norm's backward is the textbook one, ``dy = rstd (g - mean(g) - xhat
  mean(g xhat))`` from one pass of sums over ``g`` and ``g xhat`` (autodiff of the one-pass
  form also differentiates the shift by each graph's first entry, one more reduction);
* the mixing layer's bias gets an exact zero: the norm subtracts each graph's mean, so the
  bias does not change the block's output (autodiff sums ``dy`` over every entry to get
  rounding noise, which Adam would then scale up to full-size steps of a parameter that
  does nothing);
* the input's two cotangents (through the mixing layer and through the pair MLPs) are
  summed as GEMM outputs of the same layout.

Only the bfloat16/float32 XLA path without FiLM and with the instance norm takes it
(``PPGNBlockFused`` decides; ``pallas_launch.block_vjp`` switches it). CPU tests pin the
outputs to the autodiff path bit for bit and the gradients to autodiff's.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ddgjax.models.common import one_pass_moments

NEGATIVE_SLOPE = 0.01


def _leaky_relu(x):
    return jnp.where(x >= 0, x, NEGATIVE_SLOPE * x)


def _block_diagonal(k11, k21):
    zeros = jnp.zeros(k11.shape, jnp.float32)
    return jnp.block([[k11, zeros], [zeros, k21]])


def _forward(x, k0, b0, k11, k21, b1, kx, kp, bmix, scale, mask_sq, eps, cdt):
    """The block's output and what the gradient needs. Shapes: ``x [B, N, N, c]``,
    ``k0 [c, 2h]``, ``b0 [2h]``, ``k11, k21 [h, h]``, ``b1 [2h]``, ``kx [c, h]``,
    ``kp [h, h]``, ``bmix [h]`` (float32 parameters), ``scale [B, N, N]`` (the mask times
    ``1/sqrt(n)``, in ``cdt``), ``mask_sq bool[B, N, N]``. Returns ``out [B, N, N, h]`` in
    ``cdt`` and the residuals."""
    h = k11.shape[0]
    xc = x.astype(cdt)
    hid = _leaky_relu(jnp.einsum("bijc,cd->bijd", xc, k0.astype(cdt)) + b0.astype(cdt))
    m = (jnp.einsum("bijc,cd->dbij", hid, _block_diagonal(k11, k21).astype(cdt))
         + b1.astype(cdt)[:, None, None, None])                      # [2h, B, N, N]
    prod = jnp.einsum("cbik,cbkj->cbij", m[:h] * scale[None], m[h:])
    y = (jnp.einsum("bijc,cd->bijd", xc, kx.astype(cdt))
         + jnp.einsum("cbij,cd->bijd", prod, kp.astype(cdt)) + bmix.astype(cdt))
    mf = mask_sq[..., None]
    d, mean_d, rstd, count = one_pass_moments(y, mask_sq, eps)
    out = jnp.where(mf, (d - mean_d) * rstd, 0.0).astype(cdt)
    return out, (xc, hid, m, prod, out, rstd, count)


@functools.partial(jax.custom_vjp, nondiff_argnums=(11, 12))
def fused_block(x, k0, b0, k11, k21, b1, kx, kp, bmix, scale, mask_sq, eps, cdt):
    """``PPGNBlockFused``'s XLA path (shapes in ``_forward``) with the hand-written
    gradient of this module's docstring. Returns ``[B, N, N, h]`` in ``cdt``."""
    return _forward(x, k0, b0, k11, k21, b1, kx, kp, bmix, scale, mask_sq, eps, cdt)[0]


def _fwd(x, k0, b0, k11, k21, b1, kx, kp, bmix, scale, mask_sq, eps, cdt):
    out, res = _forward(x, k0, b0, k11, k21, b1, kx, kp, bmix, scale, mask_sq, eps, cdt)
    return out, res + (k0, k11, k21, kx, kp, scale, mask_sq)


def _bwd(eps, cdt, res, g):
    del eps
    xc, hid, m, prod, out, rstd, count, k0, k11, k21, kx, kp, scale, mask_sq = res
    f32 = jnp.float32
    h = k11.shape[0]
    mf = mask_sq[..., None]
    # instance norm: dy = rstd * (g - mean(g) - xhat * mean(g * xhat)) on the real entries
    gf = jnp.where(mf, g.astype(f32), 0.0)
    xhat = out.astype(f32)
    mean_g = gf.sum((1, 2), keepdims=True) / count
    mean_gx = (gf * xhat).sum((1, 2), keepdims=True) / count
    dy = jnp.where(mf, rstd * (gf - mean_g - xhat * mean_gx), 0.0).astype(cdt)
    # mixing layer y = x kx + prod^T kp + bmix
    dkx = jnp.einsum("bijc,bijd->cd", xc, dy, preferred_element_type=f32)
    dkp = jnp.einsum("cbij,bijd->cd", prod, dy, preferred_element_type=f32)
    dprod = jnp.einsum("bijd,cd->cbij", dy, kp.astype(cdt))          # [h, B, N, N]
    # per-channel product prod = (m1 * scale) @ m2
    m1s = m[:h] * scale[None]
    dm1 = jnp.einsum("cbij,cbkj->cbik", dprod, m[h:]) * scale[None]
    dm2 = jnp.einsum("cbik,cbij->cbkj", m1s, dprod)
    dm = jnp.concatenate([dm1, dm2])                                  # [2h, B, N, N]
    # second layers (block-diagonal) and first layers of the pair MLPs. Tensor outputs and
    # bias sums stay in the compute dtype, as autodiff's do: float32 ones cost XLA
    # slower kernels and twice the bytes (round 42, docs/benchmarks.md)
    dk1 = jnp.einsum("bijc,dbij->cd", hid, dm, preferred_element_type=f32)  # [2h, 2h]
    db1 = dm.sum((1, 2, 3)).astype(f32)
    dhid = jnp.einsum("dbij,cd->bijc", dm, _block_diagonal(k11, k21).astype(cdt))
    dpre = jnp.where(hid >= 0, dhid, NEGATIVE_SLOPE * dhid)           # [B, N, N, 2h]
    db0 = dpre.sum((0, 1, 2)).astype(f32)
    dk0 = jnp.einsum("bijc,bijd->cd", xc, dpre, preferred_element_type=f32)
    dx = (jnp.einsum("bijd,cd->bijc", dy, kx.astype(cdt))
          + jnp.einsum("bijd,cd->bijc", dpre, k0.astype(cdt)))
    return (dx.astype(cdt), dk0, db0, dk1[:h, :h], dk1[h:, h:], db1, dkx, dkp,
            jnp.zeros((h,), f32), jnp.zeros_like(scale), None)


fused_block.defvjp(_fwd, _bwd)
