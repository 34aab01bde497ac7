"""Denoiser inputs computed from the noisy graph and the noise level, shared by the PPGN
and the graph transformer: the noise-level channels, the per-graph conditions (noise
channels and node count), and the structural channels of ``A_t`` (random-walk
probabilities, Laplacian-eigenvector projectors). All are inputs: float32, no gradient
where they depend on ``A_t``, exactly permutation equivariant and independent of the
padding (0 off the real block).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.models.common import node_counts, square_mask


def graph_conditions(noise_level: jax.Array, node_mask: jax.Array, kind: str = "linear",
                     field: str = "noise_features") -> jax.Array:
    """Per-graph conditions (FiLM's, the graph transformer's graph features):
    ``float32[B, C + 1]``, the noise channels (``noise_channels``) and ``log2(n) / 8``
    (0 for one node, 1 for 256). ``field`` names the config key in errors."""
    log_n = jnp.log2(jnp.maximum(node_counts(node_mask), 1.0)) / 8.0
    return jnp.concatenate([noise_channels(noise_level, kind, field), log_n[:, None]], axis=-1)


NOISE_FEATURES = ("linear", "log")
LOG_FLOOR = 1e-8  # noise levels below this read as this on the log channel


def noise_channels(noise_level: jax.Array, kind: str = "linear",
                   field: str = "noise_features") -> jax.Array:
    """The per-graph noise-level inputs: ``float32[B] -> float32[B, C]``.

    ``"linear"``: ``[bb]`` (C = 1). ``"log"``: ``[bb, 1 + log10(max(bb, 1e-8)) / 8]``
    (C = 2), the second channel 0 at ``bb <= 1e-8`` and about 0.96 at ``bb = 1/2``.
    ValueError naming ``field`` (the config key) for another ``kind``.
    """
    if kind == "linear":
        return noise_level[:, None]
    if kind == "log":
        log_channel = 1.0 + jnp.log10(jnp.maximum(noise_level, LOG_FLOOR)) / 8.0
        return jnp.stack([noise_level, log_channel], axis=-1)
    raise ValueError(f"{field}: expected one of {NOISE_FEATURES}, got {kind!r}")


def _real_adjacency(adj: jax.Array, node_mask: jax.Array):
    """``(square mask bool[B, N, N], float32 A on the real block [B, N, N], degrees
    [B, N])``: what the structural input channels start from."""
    sq = square_mask(node_mask)
    a = jnp.where(sq, adj.astype(jnp.float32), 0.0)
    return sq, a, a.sum(-1)


def random_walk_channels(adj: jax.Array, node_mask: jax.Array, num_walks: int) -> jax.Array:
    """Random-walk input channels (after the relative random-walk probabilities, RRWP,
    of GRIT and DeFoG, here log-scaled).

    With ``W = D^-1 A`` (rows of isolated nodes zero) the channels are
    ``log(1 + n * W^k[i, j])`` for ``k = 1 .. num_walks``: the probability that a
    ``k``-step walk from ``i`` ends at ``j``, times the node count ``n`` so that a walk
    spread evenly over the graph reads log 2, and log-scaled so that the ``n / deg`` of a
    leaf's one edge (up to ``n``) stays O(log n). Matrix powers of ``A_t``: exactly
    permutation equivariant and, since padding nodes have no edges, independent of the
    padding. Computed in float32 with no gradient (they are inputs). ``adj`` must be 0/1
    (the bit-flip process's ``A_t``).

    Args: ``adj`` ``[B, N, N]`` (0 on padding), ``node_mask`` ``bool[B, N]``,
    ``num_walks`` ``K >= 1``. Returns float32 ``[B, N, N, K]``, 0 off the real block.
    """
    sq, a, deg = _real_adjacency(adj, node_mask)
    deg = deg[..., None]
    walk = jnp.where(deg > 0, a / jnp.maximum(deg, 1.0), 0.0)            # [B, N, N]
    n = node_counts(node_mask)[:, None, None]
    powers, p = [walk * n], walk
    for _ in range(num_walks - 1):
        p = jnp.matmul(p, walk, precision=jax.lax.Precision.HIGHEST)
        powers.append(p * n)
    return jax.lax.stop_gradient(jnp.log1p(jnp.stack(powers, axis=-1)) * sq[..., None])


def laplacian_projector_channels(adj: jax.Array, node_mask: jax.Array,
                                 num_vectors: int) -> jax.Array:
    """Spectral input channels: projectors on the low eigenvectors of the normalised
    Laplacian of ``A_t`` (the global partition that spectral clustering reads; DiGress
    feeds Laplacian eigenvectors for the same reason).

    With ``L = I - D^-1/2 A D^-1/2`` over the real nodes (an isolated node keeps a 1 on the
    diagonal) and eigenvectors ``v_0, v_1, ...`` by ascending eigenvalue, the channels are
    ``n * v_k v_k^T`` for ``k = 1 .. K`` (``v_0``, the degree vector of a connected graph,
    is skipped). A projector does not depend on the sign of its eigenvector, so the
    channels are permutation equivariant wherever those eigenvalues are simple (within a
    repeated eigenvalue the split into vectors is arbitrary). Padding nodes get 3 on the
    diagonal, above every real eigenvalue (which lie in [0, 2]), so they sort last and the
    real entries do not depend on the padding. A graph with ``n <= k`` real nodes has a
    zero channel ``k``. Float32, no gradient (inputs).

    Args: ``adj`` ``[B, N, N]`` 0/1 (0 on padding), ``node_mask`` ``bool[B, N]``,
    ``num_vectors`` ``K >= 1``. Returns float32 ``[B, N, N, K]``, 0 off the real block.
    """
    sq, a, deg = _real_adjacency(adj, node_mask)
    d_inv_sqrt = jnp.where(deg > 0, jax.lax.rsqrt(jnp.maximum(deg, 1.0)), 0.0)
    n_max = adj.shape[-1]
    lap = (jnp.eye(n_max, dtype=jnp.float32)[None]
           - d_inv_sqrt[:, :, None] * a * d_inv_sqrt[:, None, :])
    lap = lap + jax.vmap(jnp.diag)(jnp.where(node_mask, 0.0, 2.0))      # padding: 3
    _, vecs = jnp.linalg.eigh(lap)                                       # [B, N, N] columns
    vecs = jnp.pad(vecs, ((0, 0), (0, 0), (0, max(0, num_vectors + 1 - n_max))))
    v = vecs[:, :, 1:num_vectors + 1]                                    # [B, N, K]
    n = node_counts(node_mask)
    present = (jnp.arange(1, num_vectors + 1)[None, :] < n[:, None]).astype(jnp.float32)
    proj = jnp.einsum("bik,bjk->bijk", v, v) * (n[:, None] * present)[:, None, None, :]
    return jax.lax.stop_gradient(proj * sq[..., None])
