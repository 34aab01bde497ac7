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

import functools
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.models import norm_folding, pallas_launch

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


def pair_mlps_folded_reference(y, affine, w0, b0, w1, b1, scale, nodes_sq: int):
    """``pair_mlps_reference`` of the block input ``x = mask * (y * scale_g + shift_g)``
    (``norm_folding``): ``y`` ``[M, C]``, ``affine`` float32 ``[G, 2, C]``, the mask
    ``scale != 0``, ``nodes_sq`` rows per graph; the rest as there."""
    x = norm_folding.apply_affine_reference(y, affine, scale, nodes_sq)
    return pair_mlps_reference(x, w0, b0, w1, b1, scale)


def tile_rows(m: int, nodes_sq: int | None = None) -> int | None:
    """The largest row tile in ``TILE_ROWS`` dividing ``m``, and with ``nodes_sq`` no
    longer than one graph (None: the kernel can't tile it). ``DDGJAX_PAIR_MLP_TILE``
    caps the tile (for tuning)."""
    cap = int(os.environ.get("DDGJAX_PAIR_MLP_TILE", max(TILE_ROWS)))
    if nodes_sq is not None:
        cap = min(cap, nodes_sq)
    for t in TILE_ROWS:
        if t > cap:
            continue
        if m % t == 0:
            return t
    return None


def supported(m: int, c: int, h: int, nodes_sq: int | None = None) -> bool:
    """Shapes the kernel takes: rows tile evenly (with ``nodes_sq``, the folded variant:
    ``m`` whole graphs, tiles no longer than one), channel widths powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    whole = nodes_sq is None or m % nodes_sq == 0
    return (pallas_launch.available() and whole and tile_rows(m, nodes_sq) is not None
            and pow2(c) and pow2(h))


def _kernel(x_ref, w0_ref, b0_ref, w1_ref, b1_ref, s_ref, *refs, tm=None, nodes_sq=None):
    if nodes_sq is None:                                             # x is the block input
        o0_ref, o1_ref = refs
        x = x_ref[...]                                               # [TM, C]
    else:                                                            # x = affine(y), folded
        a_first, a_next, o0_ref, o1_ref = refs
        x = norm_folding.affine_tile(x_ref[...], a_first, a_next, s_ref[...],
                                     pl.program_id(0), tm, nodes_sq).astype(x_ref.dtype)
    for j, o_ref in enumerate((o0_ref, o1_ref)):
        h = jnp.dot(x, w0_ref[j], preferred_element_type=jnp.float32) + b0_ref[j][None, :]
        h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
        m = jnp.dot(h, w1_ref[j], preferred_element_type=jnp.float32) + b1_ref[j][None, :]
        if j == 0:
            m = m * s_ref[...].astype(jnp.float32)[:, None]
        o_ref[...] = m.T.astype(o_ref.dtype)                         # [H, TM]


def _pallas_forward(x, w0, b0, w1, b1, scale, affine=None, nodes_sq=None):
    m_rows, c = x.shape
    hidden = w0.shape[-1]
    tm = tile_rows(m_rows, nodes_sq)
    folded = [] if affine is None else [norm_folding.pad_for_tiles(affine)] * 2
    folded_specs = [] if affine is None else norm_folding.affine_block_specs(tm, nodes_sq, c)
    # Two outputs, not one [2, H, M]: XLA copies a slice of a custom call's output.
    m0, m1 = pl.pallas_call(
        functools.partial(_kernel, tm=tm, nodes_sq=None if affine is None else nodes_sq),
        grid=(m_rows // tm,),
        in_specs=[pl.BlockSpec((tm, c), lambda i: (i, 0)),
                  pl.BlockSpec((2, c, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((2, hidden, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((tm,), lambda i: (i,))] + folded_specs,
        out_specs=[pl.BlockSpec((hidden, tm), lambda i: (0, i))] * 2,
        out_shape=[jax.ShapeDtypeStruct((hidden, m_rows), x.dtype)] * 2,
        **pallas_launch.call_options("DDGJAX_PAIR_MLP"),
    )(x, w0, b0, w1, b1, scale, *folded)
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


@functools.lru_cache(maxsize=None)
def _make_folded(nodes_sq: int):
    """``pair_mlps_folded`` for graphs of ``nodes_sq`` rows: kernel, vmap rule, gradient."""

    @jax.custom_batching.custom_vmap
    def forward(y, affine, w0, b0, w1, b1, scale):
        # (vmap traces the unbatched call first: a shape that tiles only merged falls back)
        if not supported(y.shape[0], y.shape[1], w0.shape[-1], nodes_sq):
            return pair_mlps_folded_reference(y, affine, w0, b0, w1, b1, scale, nodes_sq)
        return _pallas_forward(y, w0, b0, w1, b1, scale, affine, nodes_sq)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, y, affine, w0, b0, w1, b1, scale):
        y_b, a_b, *weights_b, s_b = in_batched
        hidden = w0.shape[-1]
        rows = axis_size * y.shape[-2]
        if any(weights_b) or not supported(rows, y.shape[-1], hidden, nodes_sq):
            axes = tuple(0 if b else None for b in in_batched)
            ref = lambda *a: pair_mlps_folded_reference(*a, nodes_sq)
            return jax.vmap(ref, in_axes=axes)(y, affine, w0, b0, w1, b1, scale), (True, True)
        full = lambda v, batched: v if batched else jnp.broadcast_to(v, (axis_size,) + v.shape)
        y, affine, scale = full(y, y_b), full(affine, a_b), full(scale, s_b)
        m0, m1 = forward(y.reshape(rows, y.shape[-1]), affine.reshape((-1,) + affine.shape[2:]),
                         w0, b0, w1, b1, scale.reshape(rows))
        unmerge = lambda m: jnp.swapaxes(m.reshape(hidden, axis_size, -1), 0, 1)  # [V, H, M]
        return (unmerge(m0), unmerge(m1)), (True, True)

    @jax.custom_vjp
    def folded(y, affine, w0, b0, w1, b1, scale):
        return forward(y, affine, w0, b0, w1, b1, scale)

    def fwd(*args):
        return forward(*args), args

    def bwd(res, g):
        _, vjp = jax.vjp(lambda *a: pair_mlps_folded_reference(*a, nodes_sq), *res)
        return vjp(g)

    folded.defvjp(fwd, bwd)
    return folded


def pair_mlps_folded(y, affine, w0, b0, w1, b1, scale, nodes_sq: int):
    """``pair_mlps_folded_reference`` through the kernel, which applies the affine and
    the mask to each tile as it loads it (``norm_folding``); shapes as there."""
    return _make_folded(nodes_sq)(y, affine, w0, b0, w1, b1, scale)
