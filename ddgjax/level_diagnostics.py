"""How well a bit-flip denoiser does at each noise level, against a structure-blind baseline.

At level ``bb``, noise clean graphs ``A_0`` to ``A_t ~ q(A_t | A_0)`` and score the
model's ``p_theta(A_0 | A_t)`` against the truth:

* **NLL** (bits per graph): ``-sum_pairs log2 p_theta(a_0 | A_t)``, beside the same for
  the **structure-blind** posterior, which knows only the edge density ``d`` of the data:
  ``p(a_0 = 1 | a_t) = q(a_t | 1) d / (q(a_t | 1) d + q(a_t | 0) (1 - d))``. A model
  that has learnt nothing about structure scores the baseline; below it, the model
  uses the graph.
* **Expected wrong pairs** when ``A_0`` is drawn from the model's per-pair marginals:
  ``sum_pairs |a_0 - p_theta(a_0 = 1 | A_t)|``, split into the pairs the noise changed
  (``missed``: the model fails to undo a flip) and those it kept (``false_alarm``: the
  model undoes a flip that never happened).

Everything is per graph (sums over its real strict-upper pairs); callers average.
Used by ``benchmarks/per_level_nll.py``; the maths of ``q``: ``docs/method.md``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.graphs import pair_mask
from ddgjax.processes.base import DenoiseFn
from ddgjax.processes.bitflip.transitions import binary_nll, q_marginal_prob1, q_sample

LN2 = 0.6931471805599453


def blind_logits(adj_t: jax.Array, beta_bar: jax.Array, rho: float, density: float) -> jax.Array:
    """Logits of the structure-blind posterior ``p(a_0 = 1 | a_t)`` under the prior
    ``a_0 ~ Bernoulli(density)``. adj_t ``[B, N, N]``, beta_bar ``[B]`` -> ``[B, N, N]``."""
    bb = beta_bar[:, None, None]
    q1_given1 = q_marginal_prob1(jnp.ones_like(adj_t), bb, rho)   # q(a_t = 1 | a_0 = 1)
    q1_given0 = q_marginal_prob1(jnp.zeros_like(adj_t), bb, rho)  # q(a_t = 1 | a_0 = 0)
    lik1 = jnp.where(adj_t > 0.5, q1_given1, 1.0 - q1_given1)
    lik0 = jnp.where(adj_t > 0.5, q1_given0, 1.0 - q1_given0)
    return (jnp.log(lik1) + jnp.log(density)) - (jnp.log(lik0) + jnp.log1p(-density))


def level_stats(denoise_fn: DenoiseFn, key: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                beta_bar: jax.Array, t_index: jax.Array, rho: float,
                density: float) -> dict[str, jax.Array]:
    """One noise draw at one level per graph; per-graph sums.

    Args:
      denoise_fn: logits of ``p_theta(A_0 | A_t)``, ``(adj, mask, t_index, noise_level)``.
      adj0: ``[B, N, N]`` clean graphs; node_mask ``bool[B, N]``.
      beta_bar: ``float32[B]`` levels; t_index ``int32[B]`` (what level-indexed models read).
      rho: the process's prior edge probability; density: the data's edge density.
    Returns:
      ``float32[B]`` each: ``pairs``, ``flipped`` (pairs where ``A_t != A_0``),
      ``nll_bits`` and ``blind_nll_bits``, ``wrong`` and ``blind_wrong`` (expected wrong
      pairs), ``missed`` and ``false_alarm`` (the model's ``wrong`` on flipped / kept pairs),
      and ``missed`` split into ``missed_added`` (noise added an edge) and ``missed_removed``;
      ``edges`` (of ``A_0``) and ``expected_edges`` (the sum of the model's ``p(a_0 = 1)``
      over the real pairs: a model calibrated on the edge count has them equal on average).
    """
    adj_t = q_sample(key, adj0, node_mask, beta_bar, rho)
    logits = denoise_fn(adj_t, node_mask, t_index, beta_bar).astype(jnp.float32)
    blind = blind_logits(adj_t, beta_bar, rho, density)
    pm = pair_mask(node_mask)
    flipped = (adj_t != adj0) & pm
    wrong = jnp.abs(adj0 - jax.nn.sigmoid(logits))
    per_graph = lambda x, where=pm: jnp.sum(jnp.where(where, x, 0.0), axis=(1, 2))
    return {
        "pairs": per_graph(jnp.ones_like(adj0)),
        "flipped": per_graph(jnp.ones_like(adj0), flipped),
        "nll_bits": per_graph(binary_nll(logits, adj0)) / LN2,
        "blind_nll_bits": per_graph(binary_nll(blind, adj0)) / LN2,
        "wrong": per_graph(wrong),
        "blind_wrong": per_graph(jnp.abs(adj0 - jax.nn.sigmoid(blind))),
        "missed": per_graph(wrong, flipped),
        "false_alarm": per_graph(wrong, pm & ~flipped),
        "missed_added": per_graph(wrong, flipped & (adj0 < 0.5)),
        "missed_removed": per_graph(wrong, flipped & (adj0 > 0.5)),
        "edges": per_graph(adj0),
        "expected_edges": per_graph(jax.nn.sigmoid(logits)),
    }
