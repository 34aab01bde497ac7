"""The instance norm of a PPGN block folded into the kernels that read its output.

With the Pallas kernels (``model.ppgn.pallas``) a block's mixing kernel writes its raw
output ``y`` and the per-graph, per-channel sums of its statistics
(``mix_norm_kernel``). The normalised features ``x = mask * (y - mean) / std`` are only
read by the next block's two kernels and by the readout, so instead of a pass that
writes ``x`` (one read and one write of ``[B, N, N, h]`` per block), a block hands on
``y`` and an **affine** per graph and channel, ``x = mask * (y * scale + shift)``, which
the readers apply to each tile as they load it.

Layout: rows are the ``M = G * nodes_sq`` entries of ``G`` graphs (``nodes_sq = N * N``
consecutive rows each); an affine is float32 ``[G, 2, C]`` (``[:, 0]`` scale,
``[:, 1]`` shift). A kernel tile of ``tm <= nodes_sq`` rows spans at most two graphs,
so it loads the affines of "the graph of its first row" and "the next one"
(``affine_block_specs``, on the affine padded by one graph: ``pad_for_tiles``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def affine_from_sums(sums: jax.Array, shift: jax.Array, counts: jax.Array,
                     eps: float = 1e-5) -> jax.Array:
    """The instance norm as an affine, from the statistics ``mix_norm_kernel`` sums.

    Args:
      sums: float32 ``[G, 2, C]``, sums of ``d`` and ``d * d`` over each graph's real
        entries, ``d = y - shift``;
      shift: ``[C]`` (the mixing layer's bias);
      counts: ``[G]`` real entries per graph (``n * n``; clamped to >= 1).
    Returns: float32 ``[G, 2, C]`` with ``(y - mean) / sqrt(var + eps) = y * scale + shift``
    (``common.instance_norm_from_sums``'s statistics, biased variance).
    """
    count = jnp.maximum(counts.astype(jnp.float32), 1.0)[:, None]            # [G, 1]
    mean_d = sums[:, 0] / count
    var = jnp.maximum(sums[:, 1] / count - mean_d * mean_d, 0.0)
    rstd = jax.lax.rsqrt(var + eps)
    mean = mean_d + shift.astype(jnp.float32)[None, :]
    return jnp.stack([rstd, -mean * rstd], axis=1)


def identity_affine(graphs: int, channels: int) -> jax.Array:
    """float32 ``[G, 2, C]``: scale 1, shift 0 (only the mask applies)."""
    return jnp.stack([jnp.ones((graphs, channels), jnp.float32),
                      jnp.zeros((graphs, channels), jnp.float32)], axis=1)


def apply_affine_reference(y: jax.Array, affine: jax.Array, row_mask: jax.Array,
                           nodes_sq: int) -> jax.Array:
    """``where(row_mask, y * scale[g] + shift[g], 0)`` per row, ``g = row // nodes_sq``.

    Args: ``y`` ``[M, C]``; ``affine`` float32 ``[G, 2, C]``; ``row_mask`` ``[M]`` (nonzero
    on real entries); ``M = G * nodes_sq``. Returns ``[M, C]`` in the dtype of ``y`` (the
    affine in float32, then rounded, as the kernels do it).
    """
    m, c = y.shape
    yg = y.astype(jnp.float32).reshape(-1, nodes_sq, c)
    x = yg * affine[:, None, 0] + affine[:, None, 1]
    return jnp.where(row_mask.reshape(m, 1) != 0, x.reshape(m, c), 0.0).astype(y.dtype)


def pad_for_tiles(affine: jax.Array) -> jax.Array:
    """``[G, 2, C]`` -> ``[G + 1, 2, C]`` (the last graph repeated), so that "the next
    graph" of a tile in the last graph is a valid block."""
    return jnp.concatenate([affine, affine[-1:]], axis=0)


def affine_block_specs(tm: int, nodes_sq: int, channels: int) -> list:
    """The two ``BlockSpec`` of a padded affine for a grid over row tiles of ``tm``:
    the affine of the graph of the tile's first row, and of the graph after it."""
    first = lambda i: (i * tm) // nodes_sq
    return [pl.BlockSpec((None, 2, channels), lambda i: (first(i), 0, 0)),
            pl.BlockSpec((None, 2, channels), lambda i: (first(i) + 1, 0, 0))]


def affine_tile(y, a_first_ref, a_next_ref, row_mask, tile: jax.Array, tm: int,
                nodes_sq: int):
    """Inside a kernel: the affine applied to one tile of rows, in float32.

    ``y`` ``[TM, C]`` (loaded), ``a_first_ref``/``a_next_ref`` the refs of
    ``affine_block_specs``, ``row_mask`` ``[TM]`` (nonzero on real entries), ``tile``
    the grid index. Returns float32 ``[TM, C]``.
    """
    rows = tile * tm + jax.lax.broadcasted_iota(jnp.int32, (tm,), 0)
    first = ((rows // nodes_sq) == (tile * tm) // nodes_sq)[:, None]
    scale = jnp.where(first, a_first_ref[0][None, :], a_next_ref[0][None, :])
    shift = jnp.where(first, a_first_ref[1][None, :], a_next_ref[1][None, :])
    x = y.astype(jnp.float32) * scale + shift
    return jnp.where((row_mask != 0)[:, None], x, 0.0)
