"""Pieces the kernels share with their XLA surroundings: per-graph sums from per-tile
partial sums, and the instance norm applied from such sums."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def graph_sums_from_tile_parts(partial: jax.Array, tile_rows: int, nodes_sq: int
                               ) -> jax.Array:
    """Per-graph sums from a mixing kernel's per-tile partial sums (``jax.ops.segment_sum``).

    Args:
      partial: float32 ``[T, 4, H]``: for each tile of ``tile_rows`` consecutive rows,
        ``[:2]`` its sums over the rows of the graph of its first row and ``[2:]`` over
        the rows of the next graph (a tile spans at most two graphs of ``nodes_sq`` rows;
        the last tile's second part holds no rows).
    Returns: float32 ``[G, 2, H]``, ``G = T * tile_rows // nodes_sq``.
    """
    tiles = partial.shape[0]
    graphs = tiles * tile_rows // nodes_sq
    first_graph = (jnp.arange(tiles) * tile_rows) // nodes_sq                # [T]
    ids = jnp.concatenate([first_graph, jnp.minimum(first_graph + 1, graphs - 1)])
    parts = jnp.concatenate([partial[:, :2], partial[:, 2:]])                # [2T, 2, H]
    return jax.ops.segment_sum(parts, ids, num_segments=graphs)


def instance_norm_from_sums(y: jax.Array, sums: jax.Array, shift: jax.Array, mask: jax.Array,
                            eps: float = 1e-5, out_dtype=jnp.float32) -> jax.Array:
    """The masked instance norm of ``y`` from statistics summed by a mixing kernel.

    Args:
      y: ``[B, N, N, C]``; mask: ``bool[B, N, N]``;
      sums: float32 ``[B, 2, C]``, the sums of ``d`` and ``d * d`` over each graph's masked
        entries, ``d = y - shift``; shift: ``[C]``.
    Returns: ``(y - mean) / sqrt(var + eps)`` on masked entries, 0 elsewhere, in
    ``out_dtype`` (``ddgjax.models.common.masked_instance_norm``'s result, up to rounding).
    """
    count = jnp.maximum(mask.sum((1, 2)), 1).astype(jnp.float32)[:, None]       # [B, 1]
    mean_d = sums[:, 0] / count
    var = jnp.maximum(sums[:, 1] / count - mean_d * mean_d, 0.0)
    mean = (mean_d + shift.astype(jnp.float32))[:, None, None, :]
    rstd = jax.lax.rsqrt(var + eps)[:, None, None, :]
    out = (y.astype(jnp.float32) - mean) * rstd
    return jnp.where(mask[..., None], out, 0.0).astype(out_dtype)
