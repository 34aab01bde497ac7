"""A Pallas kernel for PPGN's readout with the block norms folded in: one pass, logits out.

``readout_logits(x0, blocks, w0, ws, bias, wres, bres, wout, bout, nodes_sq)`` computes,
for every entry (row),

    z     = x0 @ w0 + sum_k (y_k * scale_k + shift_k) @ w_k + bias     (the readout Dense)
    z     = z + leaky_relu(z @ wres + bres)                           (the residual layer)
    logit = z @ wout + bout                                           (Dense(h -> 1), float32)

where block ``k`` comes as its raw output ``y_k`` and the per-graph affine of its
instance norm (``norm_folding``). In XLA this is a GEMM per block output plus a pass per
partial sum, then two more passes for the residual and the last layer; the kernel reads
every block output once and writes one float32 per entry. Entries touching padding are
not masked (the caller masks the logits).

Rounding follows the XLA path in ``compute_dtype``: ``z`` and the residual branch are
rounded to it (the readout's partial products are summed in float32 here, in the compute
dtype there), the last layer is float32.

Forward only: the gradient recomputes ``readout_logits_reference`` (``jax.custom_vjp``);
under ``vmap`` the examples' rows are merged into one call. On CPU it runs in Pallas'
interpret mode when ``DDGJAX_PALLAS_INTERPRET=1`` (the tests); see ``pallas_launch``.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.models import norm_folding, pallas_launch

NEGATIVE_SLOPE = 0.01
TILE_ROWS = (128, 64, 32, 16)


def readout_logits_reference(x0, blocks, w0, ws, bias, wres, bres, wout, bout, nodes_sq: int):
    """The function the kernel computes, in XLA.

    Args:
      x0: ``[M, C0]`` (compute dtype); blocks: ``d`` pairs ``(y [M, h], affine float32
        [G, 2, h])``; w0: ``[C0, H]``; ws: ``d`` kernels ``[h, H]``; bias, bres: ``[H]``;
        wres: ``[H, H]`` (compute dtype); wout: float32 ``[H]``; bout: float32 ``[]``;
        nodes_sq: rows per graph (``M = G * nodes_sq``).
    Returns: float32 ``[M]``.
    """
    cdt = x0.dtype
    ones = jnp.ones((x0.shape[0],), jnp.float32)
    z = jnp.dot(x0, w0, preferred_element_type=jnp.float32)
    for (y, affine), w in zip(blocks, ws):
        x = norm_folding.apply_affine_reference(y, affine, ones, nodes_sq)
        z = z + jnp.dot(x, w, preferred_element_type=jnp.float32)
    z = (z + bias.astype(jnp.float32)).astype(cdt)
    r = jnp.dot(z, wres, preferred_element_type=jnp.float32) + bres.astype(jnp.float32)
    z = z + jnp.where(r >= 0, r, NEGATIVE_SLOPE * r).astype(cdt)
    return z.astype(jnp.float32) @ wout + bout


def tile_rows(m: int, nodes_sq: int) -> int | None:
    """The largest tile in ``TILE_ROWS`` dividing ``m`` and no longer than one graph."""
    for t in TILE_ROWS:
        if t <= nodes_sq and m % t == 0:
            return t
    return None


def supported(m: int, nodes_sq: int, c0: int, h: int, hidden: int) -> bool:
    """Rows in whole graphs that tile; channel widths powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    return (pallas_launch.available() and m % nodes_sq == 0
            and tile_rows(m, nodes_sq) is not None and pow2(c0) and pow2(h) and pow2(hidden))


def _kernel(x0_ref, w0_ref, b_ref, wres_ref, bres_ref, wout_ref, bout_ref, *refs, tm,
            nodes_sq, num_blocks):
    i = pl.program_id(0)
    ys, firsts, nexts, ws = (refs[k * num_blocks:(k + 1) * num_blocks] for k in range(4))
    out_ref = refs[4 * num_blocks]
    cdt = x0_ref.dtype
    z = jnp.dot(x0_ref[...], w0_ref[...], preferred_element_type=jnp.float32)
    ones = jnp.ones((tm,), jnp.float32)
    for y_ref, a_first, a_next, w_ref in zip(ys, firsts, nexts, ws):
        x = norm_folding.affine_tile(y_ref[...], a_first, a_next, ones, i, tm, nodes_sq)
        z = z + jnp.dot(x.astype(cdt), w_ref[...], preferred_element_type=jnp.float32)
    z = (z + b_ref[...].astype(jnp.float32)[None, :]).astype(cdt)
    r = (jnp.dot(z, wres_ref[...], preferred_element_type=jnp.float32)
         + bres_ref[...].astype(jnp.float32)[None, :])
    z = z + jnp.where(r >= 0, r, NEGATIVE_SLOPE * r).astype(cdt)
    out_ref[...] = jnp.sum(z.astype(jnp.float32) * wout_ref[...][None, :], axis=1) + bout_ref[0]


def _pallas_forward(x0, blocks, w0, ws, bias, wres, bres, wout, bout, nodes_sq):
    m_rows, c0 = x0.shape
    hidden = w0.shape[-1]
    tm = tile_rows(m_rows, nodes_sq)
    d = len(blocks)
    ys = [y for y, _ in blocks]
    affines = [norm_folding.pad_for_tiles(a) for _, a in blocks]
    specs = [norm_folding.affine_block_specs(tm, nodes_sq, y.shape[-1]) for y in ys]
    whole = lambda shape: pl.BlockSpec(shape, lambda i: (0,) * len(shape))
    return pl.pallas_call(
        functools.partial(_kernel, tm=tm, nodes_sq=nodes_sq, num_blocks=d),
        grid=(m_rows // tm,),
        in_specs=([pl.BlockSpec((tm, c0), lambda i: (i, 0)), whole((c0, hidden)),
                   whole((hidden,)), whole((hidden, hidden)), whole((hidden,)),
                   whole((hidden,)), whole((1,))]
                  + [pl.BlockSpec((tm, y.shape[-1]), lambda i: (i, 0)) for y in ys]
                  + [s[0] for s in specs] + [s[1] for s in specs]
                  + [whole(w.shape) for w in ws]),
        out_specs=pl.BlockSpec((tm,), lambda i: (i,)),
        out_shape=jax.ShapeDtypeStruct((m_rows,), jnp.float32),
        **pallas_launch.call_options("DDGJAX_READOUT"),
    )(x0, w0, bias, wres, bres, wout, bout.reshape(1), *ys, *affines, *affines, *ws)


@functools.lru_cache(maxsize=None)
def _make(nodes_sq: int):
    def reference(*args):
        return readout_logits_reference(*args, nodes_sq)

    @jax.custom_batching.custom_vmap
    def forward(x0, blocks, w0, ws, bias, wres, bres, wout, bout):
        args = (x0, blocks, w0, ws, bias, wres, bres, wout, bout)
        # (vmap traces the unbatched call first: a shape that tiles only merged falls back)
        if not supported(x0.shape[0], nodes_sq, x0.shape[1], blocks[0][0].shape[1],
                         w0.shape[1]):
            return reference(*args)
        return _pallas_forward(*args, nodes_sq)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, x0, blocks, w0, ws, bias, wres, bres, wout, bout):
        args = (x0, blocks, w0, ws, bias, wres, bres, wout, bout)
        x0_b, blocks_b, *weights_b = in_batched
        rows = axis_size * x0.shape[-2]
        if (any(jax.tree_util.tree_leaves(weights_b))
                or not supported(rows, nodes_sq, x0.shape[-1], blocks[0][0].shape[-1],
                                 w0.shape[-1])):
            axes = jax.tree_util.tree_map(lambda b: 0 if b else None, in_batched)
            return jax.vmap(reference, in_axes=axes)(*args), True
        full = lambda v, b: v if b else jnp.broadcast_to(v, (axis_size,) + v.shape)
        merge = lambda v: v.reshape((-1,) + v.shape[2:])
        x0 = merge(full(x0, x0_b))
        blocks = [(merge(full(y, yb)), merge(full(a, ab)))
                  for (y, a), (yb, ab) in zip(blocks, blocks_b)]
        out = forward(x0, blocks, w0, ws, bias, wres, bres, wout, bout)
        return out.reshape(axis_size, -1), True

    @jax.custom_vjp
    def readout(*args):
        return forward(*args)

    def fwd(*args):
        return forward(*args), args

    def bwd(res, g):
        _, vjp = jax.vjp(reference, *res)
        return vjp(g)

    readout.defvjp(fwd, bwd)
    return readout


def readout_logits(x0, blocks, w0, ws, bias, wres, bres, wout, bout, nodes_sq: int):
    """``readout_logits_reference`` through the kernel (arguments and result as there)."""
    blocks = [tuple(b) for b in blocks]
    return _make(nodes_sq)(x0, blocks, w0, list(ws), bias, wres, bres, wout, bout)
