"""Pieces shared by the denoisers: input checks, masks, noise-level inputs, the masked
instance norm, the output convention.

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
    product).

    ``a``, ``b``: ``[C, B, N, N]`` -> ``[C, B, N, N]``, ``out[c, b] = a[c, b] @ b[c, b]``;
    one ``dot_general`` with batch dimensions ``(c, b)`` (a cuBLAS batched GEMM on GPU).
    """
    return jnp.einsum("cbik,cbkj->cbij", a, b)


def node_counts(node_mask: jax.Array) -> jax.Array:
    """``bool[B, N]`` -> ``float32[B]`` number of real nodes per graph."""
    return node_mask.sum(-1).astype(jnp.float32)


def square_mask(node_mask: jax.Array) -> jax.Array:
    """``bool[B, N]`` -> ``bool[B, N, N]``: both ends real (diagonal included)."""
    return node_mask[:, :, None] & node_mask[:, None, :]


def masked_instance_norm(x: jax.Array, mask: jax.Array, eps: float = 1e-5,
                         out_dtype=jnp.float32) -> jax.Array:
    """Instance norm per graph and channel over the masked entries, no affine, in one pass.

    Mean and biased variance over the masked entries only, so real entries do not depend
    on the padding; a graph with no real entries gives zeros (its count is clamped to 1).
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


def symmetrize_and_mask(logits: jax.Array, node_mask: jax.Array) -> jax.Array:
    """``[B, N, N]`` -> float32 ``(L + L^T) / 2``, zero off the real off-diagonal pairs."""
    logits = logits.astype(jnp.float32)
    logits = 0.5 * (logits + jnp.swapaxes(logits, 1, 2))
    return jnp.where(edge_mask(node_mask), logits, 0.0)


def check_condition(cond, batch_size: int, cond_dim: int):
    """The conditioning input of a denoiser: ``float32[B, cond_dim]``, or None for an
    unconditional model (``cond_dim = 0``). ``cond=None`` on a conditional model is the
    null condition (zeros: what label dropout trains; ``ddgjax.conditioning``). Raises
    ValueError for a condition given to an unconditional model or of the wrong shape."""
    if cond_dim == 0:
        if cond is not None:
            raise ValueError("this denoiser is unconditional (cond_dim = 0) and takes no cond")
        return None
    if cond is None:
        return jnp.zeros((batch_size, cond_dim), jnp.float32)
    cond = jnp.asarray(cond, jnp.float32)
    if cond.shape != (batch_size, cond_dim):
        raise ValueError(f"cond must be [B, cond_dim] = {(batch_size, cond_dim)}, got shape "
                         f"{cond.shape}")
    return cond


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
        raise ValueError(f"noise_level must be [B] = ({b},) or a scalar, got shape "
                         f"{noise_level.shape}")
    t_index = jnp.broadcast_to(t_index.astype(jnp.int32), (b,))
    noise_level = jnp.broadcast_to(noise_level.astype(jnp.float32), (b,))
    return adj.astype(jnp.float32), node_mask.astype(bool), t_index, noise_level
