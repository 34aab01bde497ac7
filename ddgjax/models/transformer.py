"""Graph transformer denoiser: node, edge and graph-level features, attention over the
nodes with edge-modulated scores (after DiGress, Vignac et al. 2023, "DiGress: Discrete
Denoising diffusion for graph generation"; our own code, a smaller variant).

Shapes: ``x`` node features ``[B, N, F]``, ``e`` edge features ``[B, N, N, D]``, ``y``
graph features ``[B, G]``; ``H`` heads of width ``F / H``; ``n`` a graph's real node count.

    x^0 = mask_nodes(Dense_F([deg(A_t) / (n - 1), 1, R_ii]))
    e^0 = mask_pairs(Dense_D([A_t, 1, R_ij]))             # real off-diagonal pairs only
    y^0 = Dense_G(graph_conditions)                        # noise channels, log2(n) / 8
    layer l = 1..L:
        s_ijh  = (q_ih . k_jh) / sqrt(F / H) * (1 + Dense_H(e)_ijh) + Dense_H(e)'_ijh
        e      = mask_pairs(LN(e + FiLM_y(Dense_D(s))));   e = mask_pairs(LN(e + MLP(e)))
        a_ijh  = softmax over the real j of s_ijh
        x      = mask_nodes(LN(x + FiLM_y(Dense_F(sum_j a_ijh v_jh))));  x = ... + MLP(x)
        y      = LN(y + MLP([y, mean_i x_i, mean_ij e_ij]))       # not in the last layer
    logits = mask_pairs(sym(Dense_1([e_ij, x_i * x_j, x_i + x_j])))   # PairReadout

``R`` ``[B, N, N, K]`` are the optional random-walk channels (``walk_features = K``; the
``input_channels.random_walk_channels``, ``log(1 + n (D^-1 A_t)^k)``, ``k = 1..K``; none when
``K = 0``): the return probabilities ``R_ii`` as node inputs and ``R_ij`` as edge inputs,
the relative random-walk probabilities that DeFoG (Qin et al. 2025) feeds its graph
transformer, which attention over 1-WL node features cannot compute itself.

``FiLM_y(h) = h * (1 + gamma(y)) + beta(y)`` per graph and channel (``gamma``, ``beta``
from a zero-initialised Dense of ``y``), so the noise level and the node count condition
every layer. Every real entry reads only real entries (masked softmax and means;
padding pairs and nodes are zeroed after each update), so the output does not depend on
the padding; all operations are per node, per pair, or sums over nodes, so the network
is permutation equivariant. Attention and MLPs cost ``O(N^2 (D + H))`` per layer (no
``N^3`` product, unlike the PPGN).

Precision: Dense layers and the attention products in ``compute_dtype``; parameters,
layer norms, softmax and the logits in float32.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ddgjax.graphs import edge_mask
from ddgjax.models.common import check_inputs, node_counts, symmetrize_and_mask
from ddgjax.models.input_channels import graph_conditions, random_walk_channels


def _dense(features: int, cdt, name: str, zero: bool = False):
    """A Dense over the last axis: float32 parameters, ``cdt`` arithmetic."""
    init = nn.initializers.zeros if zero else nn.initializers.lecun_normal()
    return nn.Dense(features, dtype=cdt, param_dtype=jnp.float32, kernel_init=init, name=name)


def _layer_norm(name: str):
    return nn.LayerNorm(dtype=jnp.float32, param_dtype=jnp.float32, name=name)


def masked_mean(h: jax.Array, mask: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    """Mean of ``h`` over ``axes`` on the entries where ``mask`` (``h``'s shape without the
    channel axis) is True; 0 where there are none. Float32."""
    m = mask[..., None].astype(jnp.float32)
    total = (h.astype(jnp.float32) * m).sum(axes)
    return total / jnp.maximum(m.sum(axes), 1.0)


class FiLM(nn.Module):
    """``h * (1 + gamma(y)) + beta(y)``: ``h`` ``[B, ..., C]``, ``y`` ``[B, G]``; a
    zero-initialised Dense gives ``(gamma, beta)``, so it starts as the identity."""

    @nn.compact
    def __call__(self, h, y):
        c = h.shape[-1]
        gb = _dense(2 * c, jnp.float32, "film", zero=True)(y)
        shape = (h.shape[0],) + (1,) * (h.ndim - 2) + (c,)
        gamma, beta = gb[:, :c].reshape(shape), gb[:, c:].reshape(shape)
        return h.astype(jnp.float32) * (1.0 + gamma) + beta


class TransformerLayer(nn.Module):
    """One layer: ``(x, e, y) -> (x, e, y)`` with the shapes of the module docstring."""

    node_dim: int
    edge_dim: int
    heads: int
    global_dim: int
    compute_dtype: Any = jnp.float32
    update_global: bool = True   # the last layer's would reach nothing: off there

    @nn.compact
    def __call__(self, x, e, y, node_mask, pair_mask):
        cdt, H, F, D = self.compute_dtype, self.heads, self.node_dim, self.edge_dim
        B, N = x.shape[:2]
        dh = F // H
        nm = node_mask[..., None]
        pm = pair_mask[..., None]
        q = _dense(F, cdt, "query")(x.astype(cdt)).reshape(B, N, H, dh)
        k = _dense(F, cdt, "key")(x.astype(cdt)).reshape(B, N, H, dh)
        v = _dense(F, cdt, "value")(x.astype(cdt)).reshape(B, N, H, dh)
        scores = jnp.einsum("bihd,bjhd->bijh", q, k).astype(jnp.float32) / jnp.sqrt(float(dh))
        ec = e.astype(cdt)
        scores = (scores * (1.0 + _dense(H, cdt, "edge_mul")(ec).astype(jnp.float32))
                  + _dense(H, cdt, "edge_add")(ec).astype(jnp.float32))      # [B, N, N, H]

        e_new = FiLM(name="film_edge")(_dense(D, cdt, "edge_out")(scores.astype(cdt)), y)
        e = jnp.where(pm, _layer_norm("norm_edge_1")(e.astype(jnp.float32) + e_new), 0.0)
        e_mlp = _dense(D, cdt, "edge_mlp_1")(nn.gelu(_dense(2 * D, cdt, "edge_mlp_0")(e.astype(cdt))))
        e = jnp.where(pm, _layer_norm("norm_edge_2")(e + e_mlp.astype(jnp.float32)), 0.0)

        keys_real = node_mask[:, None, :, None]                                # over j
        att = jax.nn.softmax(jnp.where(keys_real, scores, -1e30), axis=2)
        att = jnp.where(keys_real, att, 0.0)
        agg = jnp.einsum("bijh,bjhd->bihd", att.astype(cdt), v).reshape(B, N, F)
        x_new = FiLM(name="film_node")(_dense(F, cdt, "node_out")(agg), y)
        x = jnp.where(nm, _layer_norm("norm_node_1")(x.astype(jnp.float32) + x_new), 0.0)
        x_mlp = _dense(F, cdt, "node_mlp_1")(nn.gelu(_dense(2 * F, cdt, "node_mlp_0")(x.astype(cdt))))
        x = jnp.where(nm, _layer_norm("norm_node_2")(x + x_mlp.astype(jnp.float32)), 0.0)

        if not self.update_global:
            return x, e, y
        pooled = jnp.concatenate([y, masked_mean(x, node_mask, (1,)),
                                  masked_mean(e, pair_mask, (1, 2))], axis=-1)
        y_mlp = _dense(self.global_dim, jnp.float32, "global_mlp_1")(
            nn.gelu(_dense(self.global_dim, jnp.float32, "global_mlp_0")(pooled)))
        y = _layer_norm("norm_global")(y + y_mlp)
        return x, e, y


class GraphTransformer(nn.Module):
    """Graph transformer denoiser: ``(adj, node_mask, t_index, noise_level) -> logits``.

    Attributes:
      num_layers: ``L`` transformer layers.
      node_dim, edge_dim, global_dim: widths ``F``, ``D``, ``G`` of the node, edge and
        graph features (``F`` a multiple of ``heads``).
      heads: attention heads ``H``.
      noise_features: how ``noise_level`` enters the graph features (the PPGN's
        ``noise_channels``: ``"linear"`` or ``"log"``).
      walk_features: ``K >= 0`` random-walk channels of ``A_t`` as node (return
        probabilities) and edge inputs (0: none).
      compute_dtype: dtype of the Dense layers and attention products; parameters,
        norms, softmax and logits stay float32.

    Call args (the denoisers' shared signature, ``ddgjax.models``): ``adj`` ``[B, N, N]``
    0/1 ``A_t``; ``node_mask`` ``bool[B, N]``, real nodes a prefix; ``t_index`` (unused:
    conditioned on ``noise_level``); ``noise_level`` ``float32[B]``.
    Returns ``float32[B, N, N]`` logits of ``p(A_0[i, j] = 1 | A_t)``, symmetric, zero on
    the diagonal and on pairs touching padding.
    """

    num_layers: int = 4
    node_dim: int = 64
    edge_dim: int = 32
    heads: int = 4
    global_dim: int = 32
    noise_features: str = "log"
    walk_features: int = 0
    compute_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, adj, node_mask, t_index, noise_level):
        adj, node_mask, t_index, noise_level = check_inputs(adj, node_mask, t_index, noise_level)
        del t_index
        for name, low in (("num_layers", 1), ("node_dim", 1), ("edge_dim", 1), ("heads", 1),
                          ("global_dim", 1), ("walk_features", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"config.model.gt.{name}: expected >= {low}, got "
                                 f"{getattr(self, name)}")
        if self.node_dim % self.heads:
            raise ValueError(f"config.model.gt.node_dim: expected a multiple of heads "
                             f"({self.heads}), got {self.node_dim}")
        cdt = self.compute_dtype
        pairs = edge_mask(node_mask)                                     # [B, N, N]
        a = jnp.where(pairs, adj, 0.0)
        n = node_counts(node_mask)
        deg = a.sum(-1) / jnp.maximum(n - 1.0, 1.0)[:, None]            # [B, N]
        node_in = jnp.stack([deg, jnp.ones_like(deg)], -1)                # [B, N, 2]
        edge_in = jnp.stack([a, jnp.ones_like(a)], -1)                  # [B, N, N, 2]
        if self.walk_features:                                          # + K walk channels
            walks = random_walk_channels(adj, node_mask, self.walk_features)  # [B, N, N, K]
            node_in = jnp.concatenate([node_in, jnp.diagonal(walks, axis1=1, axis2=2)
                                       .transpose(0, 2, 1)], -1)
            edge_in = jnp.concatenate([edge_in, walks], -1)
        x = _dense(self.node_dim, cdt, "embed_node")(node_in.astype(cdt))
        x = jnp.where(node_mask[..., None], x.astype(jnp.float32), 0.0)
        e = _dense(self.edge_dim, cdt, "embed_edge")(edge_in.astype(cdt))
        e = jnp.where(pairs[..., None], e.astype(jnp.float32), 0.0)
        y = _dense(self.global_dim, jnp.float32, "embed_global")(
            graph_conditions(noise_level, node_mask, self.noise_features,
                             "config.model.gt.noise_features"))
        for k in range(self.num_layers):
            x, e, y = TransformerLayer(self.node_dim, self.edge_dim, self.heads, self.global_dim,
                                       cdt, update_global=k + 1 < self.num_layers,
                                       name=f"layer_{k}")(x, e, y, node_mask, pairs)
        logits = PairReadout(name="out")(e, x)
        return symmetrize_and_mask(logits, node_mask)


class PairReadout(nn.Module):
    """``Dense_1([e_ij, x_i * x_j, x_i + x_j])`` (one kernel ``[D + 2F, 1]`` and a bias, as
    ``nn.Dense`` over the concatenation would hold) without building the ``[B, N, N, D + 2F]``
    concatenation: ``e @ w_e + (x * w_p) x^T + (x @ w_s)_i + (x @ w_s)_j + b``. Float32.

    ``e`` ``[B, N, N, D]``, ``x`` ``[B, N, F]`` -> ``[B, N, N]``.
    """

    @nn.compact
    def __call__(self, e, x):
        d, f = e.shape[-1], x.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (d + 2 * f, 1), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (1,), jnp.float32)
        w_e, w_p, w_s = kernel[:d, 0], kernel[d:d + f, 0], kernel[d + f:, 0]
        x = x.astype(jnp.float32)
        node = x @ w_s                                                       # [B, N]
        return (e.astype(jnp.float32) @ w_e + jnp.einsum("bif,bjf->bij", x * w_p, x)
                + node[:, :, None] + node[:, None, :] + bias[0])
