"""A Pallas kernel for the two per-entry MLPs of a PPGN block, fused.

``pair_mlps(x, w0, b0, w1, b1, scale)`` computes, for every entry (row) of ``x``,

    m_j = leaky_relu(x @ w0[j] + b0[j]) @ w1[j] + b1[j]          j = 0, 1 (m1, m2)
    m_0 = m_0 * scale                                            (padding mask, 1/sqrt(n))

and writes both channels first, two ``[H, M]`` arrays, which is the layout the per-channel
product reads. XLA runs the same work as four GEMMs and three elementwise passes, each
a round trip of a ``[M, H]`` tensor through device memory; the kernel reads a tile of
``x`` once and writes ``m_1, m_2`` once, the hidden layer staying on chip.

Forward only: the backward pass (``jax.custom_vjp``) recomputes the reference
``pair_mlps_reference`` and differentiates that, so the kernel is for sampling; training
keeps the XLA path. On CPU the kernel runs in Pallas' interpret mode when
``DDGJAX_PALLAS_INTERPRET=1`` (the tests); see ``pallas_launch``.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.models import pallas_launch

NEGATIVE_SLOPE = 0.01
TILE_ROWS = (128, 64, 32, 16)


def pair_mlps_reference(x, w0, b0, w1, b1, scale):
    """The function the kernel computes, in XLA.

    Args:
      x: ``[M, C]`` entries by input channels (compute dtype).
      w0: ``[2, C, H]``; b0: ``[2, H]``; w1: ``[2, H, H]``; b1: ``[2, H]`` (compute dtype).
      scale: ``[M]`` multiplier of ``m_0`` (compute dtype).
    Returns: ``(m_0, m_1)``, each ``[H, M]`` in the dtype of ``x``.
    """
    h = jnp.einsum("mc,jch->jmh", x, w0, preferred_element_type=jnp.float32) + b0[:, None]
    h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
    m = jnp.einsum("jmh,jhk->jkm", h, w1, preferred_element_type=jnp.float32) + b1[:, :, None]
    m = m.at[0].multiply(scale[None, :].astype(jnp.float32))
    return m[0].astype(x.dtype), m[1].astype(x.dtype)


def tile_rows(m: int) -> int | None:
    """The largest row tile in ``TILE_ROWS`` dividing ``m`` (None: the kernel can't tile it).
    ``DDGJAX_PAIR_MLP_TILE`` caps the tile (for tuning)."""
    cap = int(os.environ.get("DDGJAX_PAIR_MLP_TILE", max(TILE_ROWS)))
    for t in TILE_ROWS:
        if t > cap:
            continue
        if m % t == 0:
            return t
    return None


def supported(m: int, c: int, h: int) -> bool:
    """Shapes the kernel takes: rows tile evenly, channel widths powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    return pallas_launch.available() and tile_rows(m) is not None and pow2(c) and pow2(h)


def _kernel(x_ref, w0_ref, b0_ref, w1_ref, b1_ref, s_ref, o0_ref, o1_ref):
    x = x_ref[...]                                                   # [TM, C]
    for j, o_ref in enumerate((o0_ref, o1_ref)):
        h = jnp.dot(x, w0_ref[j], preferred_element_type=jnp.float32) + b0_ref[j][None, :]
        h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
        m = jnp.dot(h, w1_ref[j], preferred_element_type=jnp.float32) + b1_ref[j][None, :]
        if j == 0:
            m = m * s_ref[...].astype(jnp.float32)[:, None]
        o_ref[...] = m.T.astype(o_ref.dtype)                         # [H, TM]


def _pallas_forward(x, w0, b0, w1, b1, scale):
    m_rows, c = x.shape
    hidden = w0.shape[-1]
    tm = tile_rows(m_rows)
    # Two outputs, not one [2, H, M]: XLA copies a slice of a custom call's output.
    m0, m1 = pl.pallas_call(
        _kernel,
        grid=(m_rows // tm,),
        in_specs=[pl.BlockSpec((tm, c), lambda i: (i, 0)),
                  pl.BlockSpec((2, c, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((2, hidden, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((tm,), lambda i: (i,))],
        out_specs=[pl.BlockSpec((hidden, tm), lambda i: (0, i))] * 2,
        out_shape=[jax.ShapeDtypeStruct((hidden, m_rows), x.dtype)] * 2,
        **pallas_launch.call_options("DDGJAX_PAIR_MLP"),
    )(x, w0, b0, w1, b1, scale)
    return m0, m1


@jax.custom_batching.custom_vmap
def _forward(x, w0, b0, w1, b1, scale):
    return _pallas_forward(x, w0, b0, w1, b1, scale)


@_forward.def_vmap
def _forward_vmap(axis_size, in_batched, x, w0, b0, w1, b1, scale):
    """Under ``vmap`` (e.g. the per-graph completion sampler, which vmaps the model) the
    rows of all examples are one kernel call, so the tile stays large:
    ``x [V, M, C]`` -> ``[V * M, C]``."""
    x_b, *weights_b, s_b = in_batched
    hidden = w0.shape[-1]
    rows = axis_size * x.shape[-2]
    if any(weights_b) or not supported(rows, x.shape[-1], hidden):
        axes = tuple(0 if b else None for b in in_batched)
        return jax.vmap(pair_mlps_reference, in_axes=axes)(x, w0, b0, w1, b1, scale), (True, True)
    x = x if x_b else jnp.broadcast_to(x, (axis_size,) + x.shape)
    scale = scale if s_b else jnp.broadcast_to(scale, (axis_size,) + scale.shape)
    m0, m1 = _forward(x.reshape(rows, x.shape[-1]), w0, b0, w1, b1, scale.reshape(rows))
    unmerge = lambda m: jnp.swapaxes(m.reshape(hidden, axis_size, -1), 0, 1)  # [V, H, M]
    return (unmerge(m0), unmerge(m1)), (True, True)


@jax.custom_vjp
def pair_mlps(x, w0, b0, w1, b1, scale):
    """``pair_mlps_reference`` through the fused kernel (shapes as there)."""
    return _forward(x, w0, b0, w1, b1, scale)


def _fwd(x, w0, b0, w1, b1, scale):
    return _forward(x, w0, b0, w1, b1, scale), (x, w0, b0, w1, b1, scale)


def _bwd(res, g):
    _, vjp = jax.vjp(pair_mlps_reference, *res)
    return vjp(g)


pair_mlps.defvjp(_fwd, _bwd)
