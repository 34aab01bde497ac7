"""Pieces shared by the denoisers: input checks, masks, masked instance norm, output.

Every denoiser maps a padded batch (``adj: [B, N, N]``, ``node_mask: [B, N]``,
real nodes a prefix, see ``ddgjax.graphs``) to ``float32[B, N, N]`` logits of
``p(A_0[i, j] = 1 | A_t)``. The logits are symmetric and exactly zero on the
diagonal and on every pair that touches a padding node, so losses and samplers
may read either triangle and never see padding.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.graphs import edge_mask


def channel_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Per-channel matrix product over the node axis, channels first (the PPGN block's
    product; here so that the kernels' modules and ``ppgn`` share it).

    ``a``, ``b``: ``[C, B, N, N]`` -> ``[C, B, N, N]``, ``out[c, b] = a[c, b] @ b[c, b]``;
    one ``dot_general`` with batch dimensions ``(c, b)`` (a cuBLAS batched GEMM on GPU).
    """
    return jnp.einsum("cbik,cbkj->cbij", a, b)


def graph_sums_from_tile_parts(partial: jax.Array, tile_rows: int, nodes_sq: int
                               ) -> jax.Array:
    """Per-graph sums from a kernel's per-tile partial sums (the mixing kernels' norm
    statistics), by ``jax.ops.segment_sum``.

    Args:
      partial: float32 ``[T, 4, H]``: for each tile of ``tile_rows`` consecutive rows,
        ``[:2]`` its sums over the rows of the graph of its first row and ``[2:]`` over
        the rows of the next graph (a tile spans at most two graphs of ``nodes_sq`` rows;
        the last tile's second part holds no rows).
    Returns: float32 ``[G, 2, H]``, ``G = T * tile_rows // nodes_sq``.

    (A static gather that XLA fuses into one reduction ran at half the scatter's speed on
    an H200, 0.159 against 0.078 ms at the Planar-60 sampling shape: round 70,
    ``benchmarks/tile_sums.py``.)
    """
    tiles = partial.shape[0]
    graphs = tiles * tile_rows // nodes_sq
    first_graph = (jnp.arange(tiles) * tile_rows) // nodes_sq                # [T]
    ids = jnp.concatenate([first_graph, jnp.minimum(first_graph + 1, graphs - 1)])
    parts = jnp.concatenate([partial[:, :2], partial[:, 2:]])                # [2T, 2, H]
    return jax.ops.segment_sum(parts, ids, num_segments=graphs)


def node_counts(node_mask: jax.Array) -> jax.Array:
    """``bool[B, N]`` -> ``float32[B]`` number of real nodes per graph."""
    return node_mask.sum(-1).astype(jnp.float32)


def square_mask(node_mask: jax.Array) -> jax.Array:
    """``bool[B, N]`` -> ``bool[B, N, N]``: both ends real (diagonal included)."""
    return node_mask[:, :, None] & node_mask[:, None, :]


def masked_instance_norm(x: jax.Array, mask: jax.Array, eps: float = 1e-5) -> jax.Array:
    """Instance norm per graph and channel over the masked entries, no affine.

    Args:
      x: ``[B, N, N, C]`` features (any float dtype).
      mask: ``bool[B, N, N]``, True on the entries that count (the real n x n block).
      eps: added to the variance.

    Returns:
      float32 ``[B, N, N, C]``: ``(x - mean) / sqrt(var + eps)`` on masked
      entries, 0 elsewhere. Mean and biased variance are taken in float32 over
      the masked entries only, so real entries do not depend on the padding. A
      graph with no real entries gives zeros (its count is clamped to 1).
    """
    x = x.astype(jnp.float32)
    m = mask[..., None].astype(jnp.float32)
    count = jnp.maximum(m.sum(axis=(1, 2), keepdims=True), 1.0)
    mean = (x * m).sum(axis=(1, 2), keepdims=True) / count
    centred = (x - mean) * m
    var = (centred * centred).sum(axis=(1, 2), keepdims=True) / count
    return centred * jax.lax.rsqrt(var + eps)


def masked_layer_norm(x: jax.Array, mask: jax.Array, eps: float = 1e-5,
                      out_dtype=jnp.float32) -> jax.Array:
    """Layer norm per entry over the channels, no affine, 0 off the masked entries.

    Unlike the instance norm it keeps every per-graph mean and scale of a channel (each
    entry is normalised on its own), so counts such as a community's size stay readable
    against the other channels of the same entry.

    Args: ``x`` ``[B, N, N, C]``, ``mask`` ``bool[B, N, N]``. Statistics in float32.
    Returns: ``[B, N, N, C]`` in ``out_dtype``: ``(x - mean_c) / sqrt(var_c + eps)`` on
      masked entries, 0 elsewhere.
    """
    xf = x.astype(jnp.float32)
    mean = xf.mean(axis=-1, keepdims=True)
    centred = xf - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    out = centred * jax.lax.rsqrt(var + eps)
    return jnp.where(mask[..., None], out, 0.0).astype(out_dtype)


NORMS = ("instance", "layer")


def block_norm(y: jax.Array, mask: jax.Array, norm: str, eps: float, out_dtype,
               one_pass: bool = False) -> jax.Array:
    """A PPGN block's normalisation of ``y [B, N, N, C]`` (``mask bool[B, N, N]``):
    ``"instance"`` (per graph and channel over the real entries, the paper's; one pass
    with ``one_pass``) or ``"layer"`` (per entry over the channels); 0 off the mask."""
    if norm == "layer":
        return masked_layer_norm(y, mask, eps, out_dtype)
    if norm != "instance":
        raise ValueError(f"config.model.ppgn.norm: expected one of {NORMS}, got {norm!r}")
    if one_pass:
        return masked_instance_norm_one_pass(y, mask, eps, out_dtype)
    return masked_instance_norm(y, mask, eps).astype(out_dtype)


def masked_instance_norm_one_pass(x: jax.Array, mask: jax.Array, eps: float = 1e-5,
                                  out_dtype=jnp.float32) -> jax.Array:
    """``masked_instance_norm`` with both statistics from one pass over ``x``.

    Sums of ``d`` and ``d * d`` over the masked entries give mean and variance, where
    ``d = x - x[:, 0, 0]`` (shifted by each graph's first entry, a real one whenever the
    graph has a node, which keeps ``E[d^2] - E[d]^2`` free of cancellation when the mean
    is large against the spread). Statistics in float32; the output, in ``out_dtype``,
    is ``(x - mean) / sqrt(var + eps)`` on masked entries and 0 elsewhere.

    Args: ``x`` ``[B, N, N, C]``, ``mask`` ``bool[B, N, N]``. Returns ``[B, N, N, C]``.
    """
    m = mask[..., None]
    xf = x.astype(jnp.float32)
    d = jnp.where(m, xf - xf[:, :1, :1, :], 0.0)
    count = jnp.maximum(m.sum(axis=(1, 2), keepdims=True), 1).astype(jnp.float32)
    mean_d = d.sum(axis=(1, 2), keepdims=True) / count
    var = jnp.maximum((d * d).sum(axis=(1, 2), keepdims=True) / count - mean_d * mean_d, 0.0)
    return jnp.where(m, (d - mean_d) * jax.lax.rsqrt(var + eps), 0.0).astype(out_dtype)


def instance_norm_from_sums(y: jax.Array, sums: jax.Array, shift: jax.Array, mask: jax.Array,
                            eps: float = 1e-5, out_dtype=jnp.float32) -> jax.Array:
    """The masked instance norm of ``y`` from statistics already summed elsewhere.

    Args:
      y: ``[B, N, N, C]``; mask: ``bool[B, N, N]``;
      sums: float32 ``[B, 2, C]``, the sums of ``d`` and ``d * d`` over each graph's masked
        entries, ``d = y - shift`` (``ddgjax.models.mix_norm_kernel`` gives them);
      shift: ``[C]``.
    Returns: ``(y - mean) / sqrt(var + eps)`` on masked entries, 0 elsewhere, in
    ``out_dtype`` (``masked_instance_norm``'s result, up to rounding).
    """
    count = jnp.maximum(mask.sum((1, 2)), 1).astype(jnp.float32)[:, None]       # [B, 1]
    mean_d = sums[:, 0] / count
    var = jnp.maximum(sums[:, 1] / count - mean_d * mean_d, 0.0)
    mean = (mean_d + shift.astype(jnp.float32))[:, None, None, :]
    rstd = jax.lax.rsqrt(var + eps)[:, None, None, :]
    out = (y.astype(jnp.float32) - mean) * rstd
    return jnp.where(mask[..., None], out, 0.0).astype(out_dtype)


def symmetrize_and_mask(logits: jax.Array, node_mask: jax.Array) -> jax.Array:
    """``[B, N, N]`` -> float32 ``(L + L^T) / 2``, zero off the real off-diagonal pairs."""
    logits = logits.astype(jnp.float32)
    logits = 0.5 * (logits + jnp.swapaxes(logits, 1, 2))
    return jnp.where(edge_mask(node_mask), logits, 0.0)


def check_inputs(adj, node_mask, t_index, noise_level):
    """Shape-check and normalise the common denoiser inputs.

    Returns ``(adj float32[B,N,N], node_mask bool[B,N], t_index int32[B],
    noise_level float32[B])``; a scalar ``t_index`` or ``noise_level`` is broadcast to ``[B]``.
    Raises ValueError on inconsistent shapes (at trace time).
    """
    adj = jnp.asarray(adj)
    node_mask = jnp.asarray(node_mask)
    if adj.ndim != 3 or adj.shape[1] != adj.shape[2]:
        raise ValueError(f"adj must be [B, N, N], got shape {adj.shape}")
    b, n = adj.shape[:2]
    if node_mask.shape != (b, n):
        raise ValueError(f"node_mask must be [B, N] = {(b, n)}, got shape {node_mask.shape}")
    t_index = jnp.asarray(t_index)
    noise_level = jnp.asarray(noise_level)
    if t_index.ndim > 1 or (t_index.ndim == 1 and t_index.shape[0] != b):
        raise ValueError(f"t_index must be [B] = ({b},) or a scalar, got shape {t_index.shape}")
    if noise_level.ndim > 1 or (noise_level.ndim == 1 and noise_level.shape[0] != b):
        raise ValueError(f"noise_level must be [B] = ({b},) or a scalar, got shape {noise_level.shape}")
    t_index = jnp.broadcast_to(t_index.astype(jnp.int32), (b,))
    noise_level = jnp.broadcast_to(noise_level.astype(jnp.float32), (b,))
    return adj.astype(jnp.float32), node_mask.astype(bool), t_index, noise_level
