"""A Pallas kernel for the two per-entry MLPs of a PPGN block, fused.

``pair_mlps(x, w0, b0, w1, b1, scale, settings)`` computes, for every entry (row) of ``x``,

    m_j = leaky_relu(x @ w0[j] + b0[j]) @ w1[j] + b1[j]          j = 0, 1 (m1, m2)
    m_0 = m_0 * scale                                            (padding mask, 1/sqrt(n))

and writes both channels first, two ``[H, M]`` arrays, which is the layout the per-channel
product reads. XLA runs the same work as four GEMMs and three elementwise passes, each
a round trip of a ``[M, H]`` tensor through device memory; the kernel reads a tile of
``x`` once and writes ``m_1, m_2`` once, the hidden layer staying on chip.

Gradients (``jax.custom_vjp``): under differentiation the forward runs a second kernel
that also writes the hidden layers ``[M, 2H]`` (one more write, no more reads), and the
backward is the XLA gradient of the fused block's pair MLPs written out from those
residuals (``pair_mlps_backward``: the same GEMMs as autodiff of the XLA path, without
recomputing the forward). Under ``vmap`` the examples' rows are merged into one call.

The Triton kernel runs on any GPU; under the ``mosaic`` backend the forward without hidden
layers (sampling) runs ``pair_mlp_mgpu``'s persistent wgmma kernel instead.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.kernels import pair_mlp_mgpu
from ddgjax.kernels.settings import (KernelSettings, available, call_options, interpreted,
                                     kernel_backend, subtile_count, triton_available)

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


def hidden_reference(x, w0, b0):
    """The hidden layers the gradient's kernel writes: ``[M, 2H]`` in the dtype of ``x``."""
    h = jnp.einsum("mc,jch->mjh", x, w0, preferred_element_type=jnp.float32) + b0[None]
    h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
    return h.reshape(x.shape[0], -1)


def tile_rows(m: int, cap: int = max(TILE_ROWS)) -> int | None:
    """The largest row tile in ``TILE_ROWS`` (at most ``cap``) dividing ``m``; None: none."""
    return next((t for t in TILE_ROWS if t <= cap and m % t == 0), None)


def supported(m: int, c: int, h: int, settings: KernelSettings) -> bool:
    """Whether the kernel runs here and takes the shapes: rows tile evenly, channel widths
    powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    return (available(settings) and tile_rows(m, settings.max_tile_rows) is not None
            and pow2(c) and pow2(h))


def _kernel(x_ref, w0_ref, b0_ref, w1_ref, b1_ref, s_ref, o0_ref, o1_ref, h_ref=None, *,
            tm: int, subtiles: int):
    """``subtiles`` consecutive tiles of ``tm`` rows, the weights loaded once; with ``h_ref``
    (the gradient's forward) it also writes the hidden layers, ``[rows, 2H]`` (``m1``'s
    then ``m2``'s)."""
    hidden = w0_ref.shape[-1]
    w0, b0, w1, b1 = ([ref[j] for j in range(2)] for ref in (w0_ref, b0_ref, w1_ref, b1_ref))
    for t in range(subtiles):
        rows = pl.ds(t * tm, tm)
        x = x_ref[rows, :]                                           # [TM, C]
        for j, o_ref in enumerate((o0_ref, o1_ref)):
            h = jnp.dot(x, w0[j], preferred_element_type=jnp.float32) + b0[j][None, :]
            h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
            if h_ref is not None:
                h_ref[rows, pl.ds(j * hidden, hidden)] = h
            m = jnp.dot(h, w1[j], preferred_element_type=jnp.float32) + b1[j][None, :]
            if j == 0:
                m = m * s_ref[rows].astype(jnp.float32)[:, None]
            o_ref[:, rows] = m.T.astype(o_ref.dtype)                 # [H, TM]


def _triton_forward(x, w0, b0, w1, b1, scale, with_hidden: bool, settings: KernelSettings):
    m_rows, c = x.shape
    hidden = w0.shape[-1]
    if not triton_available():                    # a JAX without Pallas' Triton backend
        out = pair_mlps_reference(x, w0, b0, w1, b1, scale)
        return out + (hidden_reference(x, w0, b0),) if with_hidden else out
    tm = tile_rows(m_rows, settings.max_tile_rows)
    sub = subtile_count(settings, m_rows // tm)
    rows = tm * sub                                                  # rows per program
    # Two outputs, not one [2, H, M]: XLA copies a slice of a custom call's output.
    out_specs = [pl.BlockSpec((hidden, rows), lambda i: (0, i))] * 2
    out_shape = [jax.ShapeDtypeStruct((hidden, m_rows), x.dtype)] * 2
    if with_hidden:
        out_specs.append(pl.BlockSpec((rows, 2 * hidden), lambda i: (i, 0)))
        out_shape.append(jax.ShapeDtypeStruct((m_rows, 2 * hidden), x.dtype))
    return tuple(pl.pallas_call(
        functools.partial(_kernel, tm=tm, subtiles=sub),
        grid=(m_rows // rows,),
        in_specs=[pl.BlockSpec((rows, c), lambda i: (i, 0)),
                  pl.BlockSpec((2, c, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((2, hidden, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((rows,), lambda i: (i,))],
        out_specs=out_specs,
        out_shape=out_shape,
        **call_options(settings),
    )(x, w0, b0, w1, b1, scale))


@functools.lru_cache(maxsize=None)
def make_forward(with_hidden: bool, settings: KernelSettings):
    """The kernel call (``with_hidden``: the gradient's, Triton's, which also returns the
    hidden layers), batched under ``vmap`` by merging the examples' rows. One function per
    setting: JAX reuses what it traced of a ``custom_vmap``/``custom_vjp`` function."""
    mosaic = not with_hidden and kernel_backend(settings) == "mosaic"

    def reference(x, w0, b0, w1, b1, scale):
        out = pair_mlps_reference(x, w0, b0, w1, b1, scale)
        return out + (hidden_reference(x, w0, b0),) if with_hidden else out

    @jax.custom_batching.custom_vmap
    def forward(x, w0, b0, w1, b1, scale):
        if (mosaic and x.dtype == jnp.bfloat16
                and pair_mlp_mgpu.supported(x.shape[0], x.shape[1], w0.shape[-1])):
            return pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, interpret=interpreted(),
                                           warp_specialized=settings.pair_warp_specialized)
        return _triton_forward(x, w0, b0, w1, b1, scale, with_hidden, settings)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, x, w0, b0, w1, b1, scale):
        """``x [V, M, C]`` -> one call on ``[V * M, C]`` (the tile stays large); batched
        weights, or rows the kernel can't tile, take the reference per example."""
        x_b, *weights_b, s_b = in_batched
        hidden = w0.shape[-1]
        rows = axis_size * x.shape[-2]
        n_out = 3 if with_hidden else 2
        if any(weights_b) or not supported(rows, x.shape[-1], hidden, settings):
            axes = tuple(0 if b else None for b in in_batched)
            return jax.vmap(reference, in_axes=axes)(x, w0, b0, w1, b1, scale), (True,) * n_out
        x = x if x_b else jnp.broadcast_to(x, (axis_size,) + x.shape)
        scale = scale if s_b else jnp.broadcast_to(scale, (axis_size,) + scale.shape)
        out = forward(x.reshape(rows, x.shape[-1]), w0, b0, w1, b1, scale.reshape(rows))
        unmerge = lambda m: jnp.swapaxes(m.reshape(hidden, axis_size, -1), 0, 1)  # [V, H, M]
        out = (unmerge(out[0]), unmerge(out[1])) + tuple(
            h.reshape(axis_size, -1, 2 * hidden) for h in out[2:])
        return out, (True,) * n_out

    return forward


def pair_mlps_backward(x, w0, w1, b1, scale, hidden, g0, g1):
    """The gradient of ``pair_mlps_reference`` from its residuals, without its forward.

    Args: ``x, w0, w1, b1, scale`` as in ``pair_mlps_reference``; ``hidden`` ``[M, 2H]``
      (``hidden_reference``); ``g0, g1`` ``[H, M]``, the cotangents of ``m_0, m_1``.
    Returns: the cotangents of ``(x, w0, b0, w1, b1, scale)``, each in its input's dtype.

    The GEMMs are those of autodiff of the fused block's XLA path (the two first layers
    as one ``[C, 2H]`` kernel, the second layers as one block-diagonal ``[2H, 2H]``). The
    scale's cotangent needs ``m_0`` before scaling, one more GEMM, which XLA drops where
    nothing uses it (the PPGN's scale is no function of parameters).
    """
    f32 = jnp.float32
    hidden_w = w0.shape[-1]
    gm0 = g0.astype(f32) * scale.astype(f32)[None, :]
    gm = jnp.concatenate([gm0, g1.astype(f32)]).astype(x.dtype)      # [2H, M]
    zeros = jnp.zeros((hidden_w, hidden_w), w1.dtype)
    k1 = jnp.block([[w1[0], zeros], [zeros, w1[1]]])                  # [2H, 2H]
    k0 = jnp.concatenate([w0[0], w0[1]], axis=1)                      # [C, 2H]
    dk1 = jnp.einsum("md,em->de", hidden, gm, preferred_element_type=f32)
    dhid = jnp.einsum("em,de->md", gm, k1, preferred_element_type=f32)  # [M, 2H]
    dpre = jnp.where(hidden >= 0, dhid, NEGATIVE_SLOPE * dhid)
    dpre_c = dpre.astype(x.dtype)
    dk0 = jnp.einsum("mc,md->cd", x, dpre_c, preferred_element_type=f32)
    dx = jnp.einsum("md,cd->mc", dpre_c, k0, preferred_element_type=f32)
    split = lambda a: jnp.stack([a[..., :hidden_w], a[..., hidden_w:]])
    dw0 = split(dk0)                                                  # [2, C, H]
    dw1 = jnp.stack([dk1[:hidden_w, :hidden_w], dk1[hidden_w:, hidden_w:]])
    db0 = split(dpre.sum(0))
    db1 = split(gm.astype(f32).sum(1))
    m0 = (jnp.einsum("mh,hk->km", hidden[:, :hidden_w], w1[0], preferred_element_type=f32)
          + b1[0].astype(f32)[:, None])
    dscale = jnp.sum(g0.astype(f32) * m0, axis=0)
    return (dx.astype(x.dtype), dw0.astype(w0.dtype), db0.astype(b1.dtype),
            dw1.astype(w1.dtype), db1.astype(b1.dtype), dscale.astype(scale.dtype))


@functools.lru_cache(maxsize=None)
def _differentiable(settings: KernelSettings):
    """``pair_mlps`` for one setting (JAX caches what it traces of a ``custom_vjp`` by
    function, so the kernels must not change under one function)."""
    forward = make_forward(False, settings)
    forward_with_hidden = make_forward(True, settings)

    @jax.custom_vjp
    def pair_mlps_with(x, w0, b0, w1, b1, scale):
        return forward(x, w0, b0, w1, b1, scale)

    def fwd(x, w0, b0, w1, b1, scale):
        m0, m1, hidden = forward_with_hidden(x, w0, b0, w1, b1, scale)
        return (m0, m1), (x, w0, b0, w1, b1, scale, hidden)

    def bwd(res, g):
        x, w0, b0, w1, b1, scale, hidden = res
        out = pair_mlps_backward(x, w0, w1, b1, scale, hidden, *g)
        return (out[0], out[1], out[2].astype(b0.dtype)) + out[3:]

    pair_mlps_with.defvjp(fwd, bwd)
    return pair_mlps_with


def pair_mlps(x, w0, b0, w1, b1, scale, settings: KernelSettings = KernelSettings()):
    """``pair_mlps_reference`` through the kernels (shapes as there): the forward's kernel
    is ``settings``' backend's; the gradient's forward is Triton's, which also writes the
    hidden layers that the backward reads."""
    return _differentiable(settings)(x, w0, b0, w1, b1, scale)
