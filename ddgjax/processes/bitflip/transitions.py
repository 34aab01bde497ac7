"""The bit-flip process's distributions: the forward process ``q``, its posterior, and the
reverse model ``p_theta`` built from the denoiser. Pure functions of arrays (no Flax, no
loop), checked against float64 brute force in tests/test_bitflip.py.

Every real strict-upper pair of the adjacency flips with probability ``beta_bar_t`` after
``t`` forward steps, ending in Erdős–Rényi(1/2) at ``t = T`` (docs/method.md). With the
marginal prior of edge density ``rho`` a pair is instead kept with probability
``alpha_t = 1 - 2 beta_bar_t`` and otherwise redrawn from Bernoulli(rho); ``rho = 1/2`` is
the paper's uniform prior and the same process.

Shapes: ``B`` graphs, ``N`` padded nodes. Every adjacency is ``float[B, N, N]`` 0/1,
symmetric with zero diagonal and zero padding (``ddgjax.graphs``). Per-entry
probabilities are for ``a = 1``; per-graph noise levels are ``[B]`` and broadcast as
``[B, 1, 1]``. Notation (docs/method.md, "Notation"): ``bb_t`` = beta_bar_t; the step from
level ``r`` to ``s > r`` flips with ``beta_{s|r} = (bb_s - bb_r) / (1 - 2 bb_r)``. The
denoiser's output is the logits of ``p_theta(a_0 = 1 | A_t)``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.graphs import pair_mask
from ddgjax.processes.base import broadcast_per_graph, per_graph_noise

# The reverse models: 1, the posterior marginalised over p_theta(a_0 | A_t) (the model
# L_vb trains); 2, re-noise a draw of p_theta(a_0 | A_t) (``reverse_probs``).
ALGORITHMS = (1, 2)


def uniform_noise(key: jax.Array, shape) -> jax.Array:
    """Uniform [0, 1) noise of ``shape`` = ``[B, ...]`` (see ``per_graph_noise``)."""
    return per_graph_noise(key, shape, jax.random.uniform)


def symmetric_upper_bernoulli(key: jax.Array, prob1: jax.Array,
                              node_mask: jax.Array) -> jax.Array:
    """Sample a 0/1 adjacency entry-wise: ``a_ij ~ Bernoulli(prob1_ij)`` on real i<j, mirrored.

    Args:
      key: one key or ``[B]`` per-graph keys.
      prob1: ``[B, N, N]`` probabilities of 1 (only the strict upper triangle is read).
      node_mask: ``[B, N]`` bool.
    Returns:
      ``[B, N, N]`` float32, symmetric, zero diagonal and padding.
    """
    u = uniform_noise(key, prob1.shape)
    upper = ((u < prob1) & pair_mask(node_mask)).astype(jnp.float32)
    return upper + jnp.swapaxes(upper, -1, -2)


def flip_upper(key: jax.Array, adj: jax.Array, flip_prob: jax.Array,
               node_mask: jax.Array) -> jax.Array:
    """Flip each real upper entry of ``adj`` with probability ``flip_prob[b]`` and mirror.

    Args:
      adj: ``[B, N, N]`` 0/1; flip_prob: ``[B]``; node_mask: ``[B, N]``.
    Returns: ``[B, N, N]`` 0/1, symmetric, zero diagonal and padding.
    """
    u = uniform_noise(key, adj.shape)
    pm = pair_mask(node_mask)
    a = jnp.where(pm, adj, 0.0)
    flips = (u < broadcast_per_graph(flip_prob)) & pm
    upper = jnp.where(flips, 1.0 - a, a) * pm
    return upper + jnp.swapaxes(upper, -1, -2)


def q_marginal_prob1(a0_prob1: jax.Array, beta_bar_t: jax.Array, rho: float = 0.5) -> jax.Array:
    """``q(a_t = 1 | a_0)`` for soft ``a_0`` (probability of 1):
    ``alpha a_0 + (1 - alpha) rho`` with ``alpha = 1 - 2 bb``; ``p(1-bb) + (1-p) bb`` at
    ``rho = 1/2``.

    Shapes broadcast: a0_prob1 ``[..., N, N]``, beta_bar_t ``[..., 1, 1]``.
    """
    if rho == 0.5:
        return a0_prob1 * (1.0 - beta_bar_t) + (1.0 - a0_prob1) * beta_bar_t
    alpha = 1.0 - 2.0 * beta_bar_t
    return alpha * a0_prob1 + (2.0 * beta_bar_t) * rho  # 1 - alpha, without cancellation


def q_sample(key: jax.Array, adj0: jax.Array, node_mask: jax.Array, beta_bar_t: jax.Array,
             rho: float = 0.5) -> jax.Array:
    """Draw ``A_t ~ q(A_t | A_0)``.

    With the uniform prior (``rho = 1/2``, the paper's) every real pair flips with
    probability ``beta_bar_t``; otherwise each pair is Bernoulli of ``q_marginal_prob1``,
    so ``A_T`` is Erdős–Rényi(rho). docs/method.md, "Forward process".

    Args: key: one key or ``[B]`` keys; adj0 ``[B,N,N]``; node_mask ``[B,N]``;
      beta_bar_t ``[B]``. Returns ``[B,N,N]``.
    """
    if rho == 0.5:
        return flip_upper(key, adj0, beta_bar_t, node_mask)
    return symmetric_upper_bernoulli(
        key, q_marginal_prob1(adj0, broadcast_per_graph(beta_bar_t), rho), node_mask)


def sample_prior(key: jax.Array, node_mask: jax.Array, rho: float = 0.5) -> jax.Array:
    """``A_T``: Erdős–Rényi(rho) on each graph's real pairs. ``[B,N]`` -> ``[B,N,N]``."""
    return symmetric_upper_bernoulli(key, jnp.full(node_mask.shape + node_mask.shape[-1:], rho),
                                     node_mask)


def q_posterior_probs(adj_t, a0, beta_bar_t, beta_bar_prev, rho: float = 0.5):
    """``q(a_{t-1} | a_t, a_0)`` for hard 0/1 ``a_t`` and ``a_0``, by Bayes' rule.

    q(a_{t-1}=1 | a_t, a_0) = q(a_t | a_{t-1}=1) q(a_{t-1}=1 | a_0) / q(a_t | a_0),
    which reproduces the four cases of the paper's appendix (docs/method.md, "Posterior").
    With the marginal prior (``rho != 1/2``) the step kernel keeps the state with
    probability ``alpha_t / alpha_{t-1}`` and otherwise redraws it from Bernoulli(rho).

    Args:
      adj_t, a0: ``[..., N, N]`` 0/1 entries.
      beta_bar_t, beta_bar_prev: broadcastable noise levels (``[..., 1, 1]``),
        ``beta_bar_prev < beta_bar_t``.
      rho: the prior's edge probability (1/2: the paper's uniform prior).
    Returns:
      ``(prob0, prob1)``, each ``[..., N, N]``, computed separately so neither
      loses precision to ``1 - x``; they sum to 1.
    """
    if rho == 0.5:
        beta = (beta_bar_t - beta_bar_prev) / (1.0 - 2.0 * beta_bar_prev)
        # q(a_t | a_{t-1} = k) for k = 1, 0
        lik1 = jnp.where(adj_t > 0.5, 1.0 - beta, beta)
        lik0 = jnp.where(adj_t > 0.5, beta, 1.0 - beta)
        # q(a_{t-1} = k | a_0)
        prior1 = jnp.where(a0 > 0.5, 1.0 - beta_bar_prev, beta_bar_prev)
        prior0 = jnp.where(a0 > 0.5, beta_bar_prev, 1.0 - beta_bar_prev)
    else:
        # 1 - alpha and 1 - keep are formed from the beta_bar differences, not as 1 - x:
        # at beta_bar ~ 1e-8 float32 rounds alpha to 1 and 1 - alpha to 0, which made the
        # likelihood of a flipped pair 0 and the posterior 0/0.
        alpha_prev = 1.0 - 2.0 * beta_bar_prev
        redraw_prev = 2.0 * beta_bar_prev                      # 1 - alpha_{t-1}
        keep = (1.0 - 2.0 * beta_bar_t) / alpha_prev           # alpha_{t|t-1}
        redraw_step = 2.0 * (beta_bar_t - beta_bar_prev) / alpha_prev  # 1 - alpha_{t|t-1}
        # q(a_t | a_{t-1} = k): kept, or redrawn as a_t ~ Bernoulli(rho)
        redraw_t = jnp.where(adj_t > 0.5, rho, 1.0 - rho) * redraw_step
        lik1 = jnp.where(adj_t > 0.5, keep, 0.0) + redraw_t
        lik0 = jnp.where(adj_t > 0.5, 0.0, keep) + redraw_t
        # q(a_{t-1} = k | a_0)
        prior1 = jnp.where(a0 > 0.5, alpha_prev, 0.0) + redraw_prev * rho
        prior0 = jnp.where(a0 > 0.5, 0.0, alpha_prev) + redraw_prev * (1.0 - rho)
    num1, num0 = lik1 * prior1, lik0 * prior0
    denom = num1 + num0  # = q(a_t | a_0) > 0 for beta_bar_t > 0
    return num0 / denom, num1 / denom


def p_prev_probs(logits, adj_t, beta_bar_t, beta_bar_prev, rho: float = 0.5):
    """``p_theta(a_{t-1} | A_t) = sum_a q(a_{t-1} | a_t, a_0=a) p_theta(a_0=a | A_t)``.

    Args:
      logits: ``[..., N, N]`` logits of ``p_theta(a_0 = 1 | A_t)``.
      adj_t: ``[..., N, N]``; noise levels broadcastable ``[..., 1, 1]``.
    Returns: ``(prob0, prob1)``, each ``[..., N, N]``.
    """
    p1 = jax.nn.sigmoid(logits)
    p0 = jax.nn.sigmoid(-logits)
    q0_given1, q1_given1 = q_posterior_probs(adj_t, jnp.ones_like(adj_t), beta_bar_t,
                                             beta_bar_prev, rho)
    q0_given0, q1_given0 = q_posterior_probs(adj_t, jnp.zeros_like(adj_t), beta_bar_t,
                                             beta_bar_prev, rho)
    return q0_given1 * p1 + q0_given0 * p0, q1_given1 * p1 + q1_given0 * p0


def reverse_probs(logits, adj_t, beta_bar_t, beta_bar_prev, rho: float = 0.5,
                  algorithm: int = 1):
    """``(prob0, prob1)`` of the reverse kernel ``p_theta(a_prev | A_t)`` per entry.

    Algorithm 1: the posterior marginalised over ``p_theta(a_0 | A_t)`` (``p_prev_probs``).
    Algorithm 2: ``q(a_prev | a_0)`` with ``a_0 ~ p_theta(a_0 | A_t)``, which is a Bernoulli
    of ``q_marginal_prob1(p, bb_prev)`` per pair, independent of ``a_t``.
    Shapes broadcast: logits, adj_t ``[B, N, N]``; levels ``[B, 1, 1]``.
    """
    if algorithm == 1:
        return p_prev_probs(logits, adj_t, beta_bar_t, beta_bar_prev, rho)
    if algorithm == 2:
        p1 = q_marginal_prob1(jax.nn.sigmoid(logits), beta_bar_prev, rho)
        p0 = q_marginal_prob1(jax.nn.sigmoid(-logits), beta_bar_prev, 1.0 - rho)
        return p0, p1
    raise ValueError(f"unknown reverse model (algorithm) {algorithm!r}; expected 1 or 2")


def binary_kl(q0, q1, p0, p1, eps: float = 1e-20):
    """KL(q || p) of Bernoulli distributions given both probabilities of each; 0·log 0 = 0."""
    return (jax.scipy.special.xlogy(q0, q0) - jax.scipy.special.xlogy(q0, p0 + eps)
            + jax.scipy.special.xlogy(q1, q1) - jax.scipy.special.xlogy(q1, p1 + eps))


def binary_nll(logits, target):
    """``-log p(target)`` for Bernoulli(sigmoid(logits)), stable. Shapes broadcast."""
    return jnp.logaddexp(0.0, logits) - target * logits
