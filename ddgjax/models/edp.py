"""EDP-GNN denoiser (Niu et al. 2020, "Permutation Invariant Graph Generation via
Score-Based Generative Modeling"), adapted to predict logits of ``A_0``.

Shapes: ``E`` are ``[B, N, N, C]`` edge channels, ``x`` are ``[B, N, F]`` node
features; ``n`` is a graph's real node count. The network (docs/method.md, "Denoisers"):

    E^0 = mask([A_t, 1 - A_t])                    # C = 2, real off-diagonal pairs only
    x^0 = deg(A_t) / (n - 1)                      # F = 1, degree as a fraction of n - 1
          (+ Dense_hidden(c) on every node, concatenated, for a condition c [cond_dim])
    EDP layer l = 1..num_layers:
        GIN stack, s = 1..gin_steps:              # multi-channel GIN
            agg_i = concat_c  sum_j E^{l-1}[i, j, c] * x_j / (n - 1)        # C * F
            x     = mask_nodes(MLP_s(concat[x, agg]))                       # F = hidden
        E^l = mask(tanh(sym(MLP_e(concat[E^{l-1}_ij, x_i + x_j, x_i * x_j]))))  # C = channels
    logits = mask(sym(MLP_out(concat[E^0, E^1, ..., E^L])))                 # one per pair

* Every MLP layer is ``Dense -> h * alpha_t + gamma_t -> elu`` where ``alpha``
  and ``gamma`` are learned per noise level (``num_levels = T + 1`` rows, one per
  ``t = 0..T``, picked by ``t_index``; init ``alpha = 1``, ``gamma = 0``). The
  last layer of the edge MLP and of the output MLP is conditioned but has no
  elu; the logits are unbounded, the new channels go through ``tanh``.
* ``tanh`` on the channels: the edge MLP reads ``x_i * x_j``, so unbounded
  channels square their scale at every EDP layer (and the next aggregation
  multiplies again); on Planar-60 that overflowed float32 within ~10 training
  steps. Bounded channels keep the aggregation no larger than the node features.
* GIN: the node's own features enter by concatenation instead of GIN's
  ``(1 + eps) x`` sum, and the neighbour sum is divided by ``n - 1`` (a per-graph
  constant, so still injective on multisets for a given ``n``). This keeps
  activations O(1) at high noise, where ``A_t`` is Erdos-Renyi(1/2) and raw sums
  grow with ``n``. The node features are carried from one EDP layer to the next.
* The edge MLP reads ``x_i + x_j`` and ``x_i * x_j``, both symmetric in ``(i, j)``,
  so its output is symmetric whenever ``E`` is; ``sym`` (``(E + E^T) / 2``) makes
  this exact even for a slightly asymmetric input. ``mask`` zeroes the diagonal
  and every pair touching a padding node.

Precision: Dense layers and the aggregation run in ``compute_dtype``; params are
float32; the final Dense and the logits are float32.
"""
from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp

from ddgjax.graphs import edge_mask
from ddgjax.models.common import check_condition, check_inputs, node_counts, symmetrize_and_mask


class LevelCondition(nn.Module):
    """``h -> h * alpha[t] + gamma[t]``, learned per noise level.

    Parameters ``alpha`` (init 1) and ``gamma`` (init 0) are ``float32[num_levels, F]``.
    ``h`` is ``[B, ..., F]``; ``t_index`` is ``int32[B]`` in ``0..num_levels-1``
    (out-of-range indices are clamped by the gather; callers must not pass them).
    """

    num_levels: int
    compute_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, h, t_index):
        f = h.shape[-1]
        alpha = self.param("alpha", nn.initializers.ones, (self.num_levels, f), jnp.float32)
        gamma = self.param("gamma", nn.initializers.zeros, (self.num_levels, f), jnp.float32)
        shape = (h.shape[0],) + (1,) * (h.ndim - 2) + (f,)
        a = jnp.take(alpha, t_index, axis=0).reshape(shape).astype(h.dtype)
        g = jnp.take(gamma, t_index, axis=0).reshape(shape).astype(h.dtype)
        return h * a + g


class CondMLP(nn.Module):
    """MLP whose every layer is ``Dense -> LevelCondition -> elu``.

    ``activate_last=False`` leaves the last layer without activation. With
    ``float32_last=True`` the last Dense and its conditioning run in float32.
    """

    widths: Sequence[int]
    num_levels: int
    activate_last: bool = True
    float32_last: bool = False
    compute_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, h, t_index):
        for k, w in enumerate(self.widths):
            last = k == len(self.widths) - 1
            dtype = jnp.float32 if (last and self.float32_last) else self.compute_dtype
            h = nn.Dense(w, dtype=dtype, param_dtype=jnp.float32, name=f"dense_{k}")(h)
            h = LevelCondition(self.num_levels, dtype, name=f"cond_{k}")(h, t_index)
            if not last or self.activate_last:
                h = nn.elu(h)
        return h


class EDPGNN(nn.Module):
    """EDP-GNN denoiser: ``(adj, node_mask, t_index, noise_level) -> logits``.

    Attributes:
      num_levels: number of noise levels, ``T + 1`` (levels ``t = 0..T``).
      num_layers: EDP layers (paper: 5).
      gin_steps: message-passing steps per GIN stack (paper: 4).
      channels: edge channels produced by each EDP layer (paper: at most 4).
      hidden: node feature size and MLP width (paper: at most 16).
      compute_dtype: dtype of Dense layers and aggregation; params and logits float32.
      cond_dim: width of the conditioning vector (0: unconditional); its projection is
        concatenated to every real node's initial features.

    Call args: as ``PPGN`` (``cond`` too); ``t_index`` (``int32[B]`` in ``0..num_levels-1``) selects
    the conditioning, ``noise_level`` is unused.

    Returns:
      ``float32[B, N, N]`` logits, symmetric, zero on the diagonal and on padding.
    """

    num_levels: int
    num_layers: int = 5
    gin_steps: int = 4
    channels: int = 4
    hidden: int = 16
    compute_dtype: Any = jnp.float32
    cond_dim: int = 0

    @nn.compact
    def __call__(self, adj, node_mask, t_index, noise_level, cond=None):
        adj, node_mask, t_index, noise_level = check_inputs(adj, node_mask, t_index, noise_level)
        cond = check_condition(cond, adj.shape[0], self.cond_dim)
        del noise_level
        cdt = self.compute_dtype
        bsz, n_max = adj.shape[:2]
        pair = edge_mask(node_mask)[..., None].astype(jnp.float32)      # [B,N,N,1]
        nodes = node_mask[..., None].astype(jnp.float32)                # [B,N,1]
        inv_nm1 = 1.0 / jnp.maximum(node_counts(node_mask) - 1.0, 1.0)  # [B]

        e = jnp.stack([adj, 1.0 - adj], axis=-1) * pair                 # [B,N,N,2]
        x = (adj * pair[..., 0]).sum(-1, keepdims=True) * inv_nm1[:, None, None]
        if cond is not None:
            c = nn.Dense(self.hidden, param_dtype=jnp.float32, name="cond")(cond)   # [B, F]
            x = jnp.concatenate([x, jnp.broadcast_to(c[:, None, :], (bsz, n_max, self.hidden))
                                 * nodes], axis=-1)
        all_e = [e]
        for l in range(self.num_layers):
            e_c = e.astype(cdt)
            scale = inv_nm1.astype(cdt)[:, None, None, None]
            for s in range(self.gin_steps):
                xc = x.astype(cdt)
                agg = jnp.einsum("bijc,bjf->bicf", e_c, xc) * scale       # [B,N,C,F]
                h = jnp.concatenate([xc, agg.reshape(bsz, n_max, -1)], axis=-1)
                x = CondMLP((self.hidden, self.hidden), self.num_levels, compute_dtype=cdt,
                            name=f"layer_{l}_gin_{s}")(h, t_index)
                x = x * nodes.astype(x.dtype)
            xi, xj = x[:, :, None, :], x[:, None, :, :]
            h = jnp.concatenate(
                [e_c, jnp.broadcast_to(xi + xj, (bsz, n_max, n_max, x.shape[-1])), xi * xj],
                axis=-1)
            e = CondMLP((self.hidden, self.channels), self.num_levels, activate_last=False,
                        compute_dtype=cdt, name=f"layer_{l}_edge")(h, t_index)
            # tanh bounds the channels: with x_i * x_j in the edge MLP, unbounded
            # channels square their scale at every layer and overflowed float32
            # on Planar-60 (NaN loss after ~10 steps).
            e = jnp.tanh(0.5 * (e + jnp.swapaxes(e, 1, 2)).astype(jnp.float32)) * pair
            all_e.append(e)
        h = jnp.concatenate([a.astype(cdt) for a in all_e], axis=-1)    # [B,N,N,2+L*C]
        logits = CondMLP((self.hidden, self.hidden, 1), self.num_levels, activate_last=False,
                         float32_last=True, compute_dtype=cdt, name="out")(h, t_index)[..., 0]
        assert logits.shape == (bsz, n_max, n_max)
        return symmetrize_and_mask(logits, node_mask)
