"""A Pallas kernel for a PPGN block's mixing layer and its instance-norm statistics.

``mix_with_stats(x, prod, wx, wp, b, row_mask, nodes_sq, settings)`` computes, for every
entry (row) of ``x`` and the matching column of the channels-first product ``prod``,

    y = x @ wx + prod^T @ wp + b                                  (the Dense on [x, prod])

and, per graph (``nodes_sq`` consecutive rows) and channel, the sums of ``y - b`` and
``(y - b)^2`` over the rows where ``row_mask`` is set: the instance norm's statistics,
shifted by the bias (which keeps the one-pass variance free of cancellation from a
large bias). XLA runs this as two GEMMs, an add, and a reduction that reads both GEMM
outputs again; the kernel reads ``x`` and ``prod`` once and writes ``y`` once.

Each tile of rows spans at most two graphs (tiles are no longer than ``nodes_sq``), so
it writes partial sums for "the graph of its first row" and "the next one";
``graph_sums_from_tile_parts`` adds them up per graph.

Gradients (``jax.custom_vjp``): ``mix_with_stats_backward``, autodiff's formulas of
``mix_with_stats_reference`` written out from the inputs and the output ``y``, without
the forward's GEMMs again. Under ``vmap`` the examples' rows are merged into one call.
Under the ``mosaic`` backend the forward runs ``mix_norm_mgpu`` instead (its gradient's
forward stays Triton's: the Mosaic kernel made the bf16 train step slower).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.kernels import mix_norm_mgpu
from ddgjax.kernels.settings import (KernelSettings, available, call_options, interpreted,
                                     kernel_backend, subtile_count, triton_available)
from ddgjax.kernels.common import graph_sums_from_tile_parts

TILE_ROWS = (128, 64, 32, 16)


def mix_with_stats_reference(x, prod, wx, wp, b, row_mask, nodes_sq: int):
    """The function the kernel computes, in XLA.

    Args:
      x: ``[M, C]``; prod: ``[H, M]`` (channels first); wx: ``[C, H]``; wp: ``[H, H]``;
        b: ``[H]`` (compute dtype); row_mask: ``[M]`` (1 on entries the norm counts);
        nodes_sq: rows per graph (``N * N``); ``M`` a multiple of it.
    Returns:
      ``y`` ``[M, H]`` in the dtype of ``x``, and ``sums`` float32 ``[G, 2, H]``
      (``G = M / nodes_sq``): ``sum(d)`` and ``sum(d * d)`` over masked rows,
      ``d = y - b`` in float32.
    """
    d = (jnp.einsum("mc,ch->mh", x, wx, preferred_element_type=jnp.float32)
         + jnp.einsum("hm,hk->mk", prod, wp, preferred_element_type=jnp.float32))
    y = (d + b.astype(jnp.float32)).astype(x.dtype)
    dm = (d * row_mask.astype(jnp.float32)[:, None]).reshape(-1, nodes_sq, d.shape[-1])
    sums = jnp.stack([dm.sum(1), (dm * d.reshape(dm.shape)).sum(1)], axis=1)
    return y, sums


def tile_rows(m: int, nodes_sq: int, cap: int = max(TILE_ROWS)) -> int | None:
    """The largest tile in ``TILE_ROWS`` (at most ``cap``) dividing ``m`` and no longer
    than one graph; None: none."""
    return next((t for t in TILE_ROWS if t <= min(cap, nodes_sq) and m % t == 0), None)


def supported(m: int, nodes_sq: int, c: int, h: int, settings: KernelSettings) -> bool:
    """Whether the kernel runs here and takes the shapes: whole graphs, rows that tile,
    channel widths powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    return (available(settings) and m % nodes_sq == 0
            and tile_rows(m, nodes_sq, settings.max_tile_rows) is not None
            and pow2(c) and pow2(h))


def _kernel(x_ref, p_ref, wx_ref, wp_ref, b_ref, m_ref, y_ref, s_ref, *, tm, nodes_sq,
            subtiles):
    """``subtiles`` consecutive tiles of ``tm`` rows, the weights loaded once; tile ``t``
    writes its partial sums to ``s_ref[t]``."""
    i = pl.program_id(0)
    wx, wp, bias = wx_ref[...], wp_ref[...], b_ref[...].astype(jnp.float32)[None, :]
    for t in range(subtiles):
        rows = pl.ds(t * tm, tm)
        d = (jnp.dot(x_ref[rows, :], wx, preferred_element_type=jnp.float32)
             + jnp.dot(p_ref[:, rows].T, wp, preferred_element_type=jnp.float32))  # [TM, H]
        y_ref[rows, :] = (d + bias).astype(y_ref.dtype)
        start = (i * subtiles + t) * tm
        index = start + jax.lax.broadcasted_iota(jnp.int32, (tm,), 0)
        first = (index // nodes_sq) == start // nodes_sq
        mask = m_ref[rows].astype(jnp.float32)
        for slot, w in enumerate((jnp.where(first, mask, 0.0), jnp.where(first, 0.0, mask))):
            dw = d * w[:, None]
            s_ref[t, 2 * slot] = jnp.sum(dw, axis=0)
            s_ref[t, 2 * slot + 1] = jnp.sum(dw * d, axis=0)


def _triton_forward(x, prod, wx, wp, b, row_mask, nodes_sq, settings: KernelSettings):
    if not triton_available():                    # a JAX without Pallas' Triton backend
        return mix_with_stats_reference(x, prod, wx, wp, b, row_mask, nodes_sq)
    m_rows, c = x.shape
    hidden = wx.shape[-1]
    tm = tile_rows(m_rows, nodes_sq, settings.max_tile_rows)
    tiles = m_rows // tm
    sub = subtile_count(settings, tiles)
    rows = tm * sub                                                  # rows per program
    y, partial = pl.pallas_call(
        functools.partial(_kernel, tm=tm, nodes_sq=nodes_sq, subtiles=sub),
        grid=(tiles // sub,),
        in_specs=[pl.BlockSpec((rows, c), lambda i: (i, 0)),
                  pl.BlockSpec((hidden, rows), lambda i: (0, i)),
                  pl.BlockSpec((c, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((hidden, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((hidden,), lambda i: (0,)),
                  pl.BlockSpec((rows,), lambda i: (i,))],
        out_specs=[pl.BlockSpec((rows, hidden), lambda i: (i, 0)),
                   pl.BlockSpec((sub, 4, hidden), lambda i: (i, 0, 0))],
        out_shape=[jax.ShapeDtypeStruct((m_rows, hidden), x.dtype),
                   jax.ShapeDtypeStruct((tiles, 4, hidden), jnp.float32)],
        **call_options(settings),
    )(x, prod, wx, wp, b, row_mask)
    return y, graph_sums_from_tile_parts(partial, tm, nodes_sq)


def mix_with_stats_backward(x, prod, wx, wp, b, row_mask, y, gy, gsums, nodes_sq: int):
    """The gradient of ``mix_with_stats_reference`` from its inputs and its output ``y``.

    Args: the reference's arguments; ``y`` ``[M, H]`` its output; ``gy`` ``[M, H]`` and
      ``gsums`` ``[G, 2, H]`` the cotangents of ``y`` and ``sums``.
    Returns: the cotangents of ``(x, prod, wx, wp, b, row_mask)`` in their dtypes.
    """
    f32 = jnp.float32
    per_graph = lambda a: a.reshape((-1, nodes_sq) + a.shape[1:])        # [G, nodes_sq, ...]
    d = per_graph(y.astype(f32) - b.astype(f32)[None, :])                 # [G, nodes_sq, H]
    mask = per_graph(row_mask.astype(f32))[..., None]
    gs0, gs1 = (gsums[:, k, None, :].astype(f32) for k in (0, 1))        # [G, 1, H] each
    gd = (per_graph(gy.astype(f32)) + mask * (gs0 + 2.0 * gs1 * d)).reshape(gy.shape)
    gd_c = gd.astype(x.dtype)
    dx = jnp.einsum("mh,ch->mc", gd_c, wx, preferred_element_type=f32)
    dprod = jnp.einsum("mk,hk->hm", gd_c, wp, preferred_element_type=f32)
    dwx = jnp.einsum("mc,mh->ch", x, gd_c, preferred_element_type=f32)
    dwp = jnp.einsum("hm,mk->hk", prod, gd_c, preferred_element_type=f32)
    db = gy.astype(f32).sum(0)
    dmask = jnp.sum(gs0 * d + gs1 * d * d, axis=-1).reshape(row_mask.shape)
    return (dx.astype(x.dtype), dprod.astype(prod.dtype), dwx.astype(wx.dtype),
            dwp.astype(wp.dtype), db.astype(b.dtype), dmask.astype(row_mask.dtype))


@functools.lru_cache(maxsize=None)
def _make_forward(nodes_sq: int, mosaic: bool, settings: KernelSettings):
    """The kernel call (``mosaic``: ``mix_norm_mgpu``'s where it takes the shapes), batched
    under ``vmap`` by merging the examples' rows."""
    @jax.custom_batching.custom_vmap
    def forward(x, prod, wx, wp, b, row_mask):
        m_rows, c = x.shape
        if (mosaic and x.dtype == jnp.bfloat16
                and mix_norm_mgpu.supported(m_rows, nodes_sq, c, wx.shape[-1])):
            return mix_norm_mgpu.mix_with_stats(x, prod, wx, wp, b, row_mask, nodes_sq,
                                                interpret=interpreted())
        return _triton_forward(x, prod, wx, wp, b, row_mask, nodes_sq, settings)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, x, prod, wx, wp, b, row_mask):
        x_b, p_b, *w_b, m_b = in_batched
        m_rows, hidden = x.shape[-2], wx.shape[-1]
        rows = axis_size * m_rows
        if any(w_b) or not supported(rows, nodes_sq, x.shape[-1], hidden, settings):
            axes = tuple(0 if v else None for v in in_batched)
            ref = functools.partial(mix_with_stats_reference, nodes_sq=nodes_sq)
            return jax.vmap(ref, in_axes=axes)(x, prod, wx, wp, b, row_mask), (True, True)
        full = lambda v, batched: v if batched else jnp.broadcast_to(v, (axis_size,) + v.shape)
        x, prod, row_mask = full(x, x_b), full(prod, p_b), full(row_mask, m_b)
        y, sums = forward(x.reshape(rows, -1), jnp.swapaxes(prod, 0, 1).reshape(hidden, rows),
                          wx, wp, b, row_mask.reshape(rows))
        return (y.reshape(axis_size, m_rows, hidden),
                sums.reshape((axis_size, -1) + sums.shape[1:])), (True, True)

    return forward


@functools.lru_cache(maxsize=None)
def _differentiable(nodes_sq: int, settings: KernelSettings):
    """The differentiable kernel call for one ``nodes_sq`` and setting: the backend's
    forward where nothing differentiates it, Triton's in the gradient's forward."""
    primal = _make_forward(nodes_sq, kernel_backend(settings) == "mosaic", settings)
    forward = _make_forward(nodes_sq, False, settings)

    @jax.custom_vjp
    def mix(x, prod, wx, wp, b, row_mask):
        return primal(x, prod, wx, wp, b, row_mask)

    def fwd(*args):
        y, sums = forward(*args)
        return (y, sums), args + (y,)

    def bwd(res, g):
        return mix_with_stats_backward(*res, *g, nodes_sq)

    mix.defvjp(fwd, bwd)
    return mix


def mix_with_stats(x, prod, wx, wp, b, row_mask, nodes_sq: int,
                   settings: KernelSettings = KernelSettings()):
    """``mix_with_stats_reference`` through the kernels (arguments and results as there)."""
    return _differentiable(nodes_sq, settings)(x, prod, wx, wp, b, row_mask)
