"""PPGN denoiser (Maron et al. 2019, "Provably Powerful Graph Networks").

The network works on ``[B, N, N, C]`` pair features (channels last) and, as in
the paper (REFERENCE.md section 2), is:

    X_0   = mask([A_t, beta_bar_t * I])                               # C = 2
    Y     = mask(Dense_h(X_0))
    block k = 1..d:
        P = mask(m1(Y)) @ mask(m2(Y)) / sqrt(n)    # per channel, over the node axis
        Y = mask(InstanceNorm(Dense_h(concat[Y, P])))                  # Y = X_k
    Z     = Dense_h(concat[X_0, X_1, ..., X_d])                        # 2 + d*h -> h
    Z     = Z + leaky_relu(Dense_h(Z))
    L     = Dense_1(Z);  logits = mask_offdiag((L + L^T) / 2)

``m1``, ``m2`` are per-entry MLPs Dense -> leaky_relu(0.01) -> Dense; ``n`` is
the graph's real node count; ``mask`` zeroes every entry whose row or column is
a padding node; the instance norm (no affine) takes mean and variance per graph
and channel over the real ``n x n`` entries only (diagonal included), so the
real entries of the output do not depend on how much padding a graph has.

Layout: channels last; the channel-wise matrix product is the einsum
``'bikc,bkjc->bijc'``, which XLA lowers to one ``dot_general`` with batch
dimensions ``(b, c)`` (on GPU a cuBLAS batched GEMM, with layout copies that XLA
places around it). See ``channel_matmul``.

Precision: with ``compute_dtype=bfloat16`` the Dense layers (``dtype=``) and the
channel product run in bfloat16; parameters are float32; the instance-norm
statistics, the last Dense(h -> 1) and the logits are float32.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ddgjax.models.common import (check_inputs, masked_instance_norm, node_counts,
                                  square_mask, symmetrize_and_mask)


def leaky_relu(x):
    return nn.leaky_relu(x, negative_slope=0.01)


def channel_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Per-channel matrix product over the node axis: ``out[..., c] = a[..., c] @ b[..., c]``.

    ``a``, ``b``: ``[B, N, N, C]`` -> ``[B, N, N, C]`` in their (common) dtype.
    """
    return jnp.einsum("bikc,bkjc->bijc", a, b)


class PairMLP(nn.Module):
    """Per-entry MLP: Dense -> leaky_relu(0.01) -> Dense (both ``features`` wide)."""

    features: int
    compute_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features, dtype=self.compute_dtype, param_dtype=jnp.float32)(x)
        x = leaky_relu(x)
        return nn.Dense(self.features, dtype=self.compute_dtype, param_dtype=jnp.float32)(x)


class PPGNBlock(nn.Module):
    """One PPGN block on masked ``[B, N, N, h]`` features; returns float32, masked."""

    hidden: int
    compute_dtype: Any = jnp.float32
    eps: float = 1e-5

    @nn.compact
    def __call__(self, x, mask_sq, inv_sqrt_n):
        # mask_sq: [B, N, N, 1] in compute dtype; inv_sqrt_n: [B, 1, 1, 1].
        m1 = PairMLP(self.hidden, self.compute_dtype, name="m1")(x) * mask_sq
        m2 = PairMLP(self.hidden, self.compute_dtype, name="m2")(x) * mask_sq
        prod = channel_matmul(m1, m2) * inv_sqrt_n.astype(m1.dtype)
        y = jnp.concatenate([x.astype(self.compute_dtype), prod], axis=-1)
        y = nn.Dense(self.hidden, dtype=self.compute_dtype, param_dtype=jnp.float32,
                     name="mix")(y)
        return masked_instance_norm(y, mask_sq[..., 0] > 0, self.eps)


class PPGN(nn.Module):
    """PPGN denoiser: ``(adj, node_mask, t_index, beta_bar) -> logits``.

    Attributes:
      hidden: channel width ``h`` (paper configs: 32 for the small sets, 128 for Planar-60).
      num_blocks: number of blocks ``d`` (6; 8 for Planar-60).
      compute_dtype: dtype of the Dense layers and the channel product; parameters,
        norm statistics and logits stay float32.

    Call args:
      adj: ``[B, N, N]`` noisy 0/1 adjacency ``A_t`` (symmetric, zero diagonal and padding).
      node_mask: ``bool[B, N]``, real nodes a prefix.
      t_index: ``int32[B]``, unused by PPGN (it is conditioned on ``beta_bar``); kept
        so that all denoisers share one signature.
      beta_bar: ``float32[B]``, the noise level, placed on the diagonal of channel 2.

    Returns:
      ``float32[B, N, N]`` logits of ``p(A_0[i,j] = 1 | A_t)``: symmetric, zero on the
      diagonal and on pairs touching padding.
    """

    hidden: int = 32
    num_blocks: int = 6
    compute_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, adj, node_mask, t_index, beta_bar):
        adj, node_mask, t_index, beta_bar = check_inputs(adj, node_mask, t_index, beta_bar)
        del t_index
        bsz, n_max = adj.shape[:2]
        sq = square_mask(node_mask)                                   # [B, N, N]
        mask_f = sq[..., None].astype(jnp.float32)                     # [B, N, N, 1]
        mask_c = mask_f.astype(self.compute_dtype)
        n = node_counts(node_mask)
        inv_sqrt_n = jax.lax.rsqrt(jnp.maximum(n, 1.0))[:, None, None, None]

        eye = jnp.eye(n_max, dtype=jnp.float32)[None]
        x0 = jnp.stack([adj, beta_bar[:, None, None] * eye], axis=-1) * mask_f  # [B,N,N,2]
        x = nn.Dense(self.hidden, dtype=self.compute_dtype, param_dtype=jnp.float32,
                     name="embed")(x0) * mask_c
        outs = [x0.astype(self.compute_dtype)]
        for k in range(self.num_blocks):
            x = PPGNBlock(self.hidden, self.compute_dtype, name=f"block_{k}")(
                x, mask_c, inv_sqrt_n)
            outs.append(x.astype(self.compute_dtype))
        z = jnp.concatenate(outs, axis=-1)                             # [B,N,N,2+d*h]
        z = nn.Dense(self.hidden, dtype=self.compute_dtype, param_dtype=jnp.float32,
                     name="readout")(z)
        z = z + leaky_relu(nn.Dense(self.hidden, dtype=self.compute_dtype,
                                    param_dtype=jnp.float32, name="residual")(z))
        logits = nn.Dense(1, dtype=jnp.float32, param_dtype=jnp.float32, name="out")(
            z.astype(jnp.float32))[..., 0]
        assert logits.shape == (bsz, n_max, n_max)
        return symmetrize_and_mask(logits, node_mask)
