"""The discrete diffusion maths: forward noising, posterior, reverse model, losses, samplers.

Pure functions of arrays; no Flax, no training loop. Shapes: ``B`` graphs,
``N`` padded nodes. Every adjacency is ``float[B, N, N]`` 0/1, symmetric with
zero diagonal and zero padding (``ddgjax.graphs`` states the convention).
Per-entry probabilities are for ``a = 1``; per-graph noise levels are ``[B]``
and broadcast as ``[B, 1, 1]``.

Notation (REFERENCE.md §1): ``bb_t`` = beta_bar_t, the probability that
``a_t != a_0``; the step from level ``r`` to ``s > r`` flips with
``beta_{s|r} = (bb_s - bb_r) / (1 - 2 bb_r)``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from ddgjax.graphs import pair_mask
from ddgjax.schedules import NoiseSchedule, sampling_levels

LOSSES = ("simple", "vb")
ALGORITHMS = (1, 2)

# A denoiser: (adj_t [B,N,N], node_mask [B,N], t_index int32[B], beta_bar float32[B]) -> logits [B,N,N]
DenoiseFn = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


def broadcast_per_graph(x):
    """``[B]`` -> ``[B, 1, 1]`` for broadcasting against pair arrays."""
    return jnp.asarray(x)[:, None, None]


def per_graph_noise(key: jax.Array, shape, draw=jax.random.uniform) -> jax.Array:
    """Noise of ``shape`` = ``[B, ...]`` from ``draw(key, shape, float32)``.

    ``key`` is one key (drawn jointly) or ``[B]`` keys (graph ``b`` uses only
    ``key[b]``, so its noise does not depend on the rest of the batch).
    """
    if key.ndim == 0:
        return draw(key, shape, jnp.float32)
    return jax.vmap(lambda k: draw(k, shape[1:], jnp.float32))(key)


def uniform_noise(key: jax.Array, shape) -> jax.Array:
    """Uniform [0, 1) noise of ``shape`` = ``[B, ...]`` (see ``per_graph_noise``)."""
    return per_graph_noise(key, shape, jax.random.uniform)


def symmetric_upper_bernoulli(key: jax.Array, prob1: jax.Array, node_mask: jax.Array) -> jax.Array:
    """Sample a 0/1 adjacency entry-wise: ``a_ij ~ Bernoulli(prob1_ij)`` on real i<j, mirrored.

    Args:
      prob1: ``[B, N, N]`` probabilities of 1 (only the strict upper triangle is read).
      node_mask: ``[B, N]`` bool.
    Returns:
      ``[B, N, N]`` float32, symmetric, zero diagonal and padding.
    """
    u = uniform_noise(key, prob1.shape)
    upper = (u < prob1) & pair_mask(node_mask)
    upper = upper.astype(jnp.float32)
    return upper + jnp.swapaxes(upper, -1, -2)


def flip_upper(key: jax.Array, adj: jax.Array, flip_prob: jax.Array, node_mask: jax.Array) -> jax.Array:
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


def q_sample(key: jax.Array, adj0: jax.Array, node_mask: jax.Array, beta_bar_t: jax.Array) -> jax.Array:
    """Draw ``A_t ~ q(A_t | A_0)``: flip every real pair with probability ``beta_bar_t``.

    Args: key: one key or ``[B]`` keys; adj0 ``[B,N,N]``; node_mask ``[B,N]``;
      beta_bar_t ``[B]``. Returns ``[B,N,N]``.
    """
    return flip_upper(key, adj0, beta_bar_t, node_mask)


def q_marginal_prob1(a0_prob1: jax.Array, beta_bar_t: jax.Array) -> jax.Array:
    """``q(a_t = 1 | a_0)`` for soft ``a_0`` (probability of 1): ``p(1-bb) + (1-p) bb``.

    Shapes broadcast: a0_prob1 ``[..., N, N]``, beta_bar_t ``[..., 1, 1]``.
    """
    return a0_prob1 * (1.0 - beta_bar_t) + (1.0 - a0_prob1) * beta_bar_t


def q_posterior_probs(adj_t, a0, beta_bar_t, beta_bar_prev):
    """``q(a_{t-1} | a_t, a_0)`` for hard 0/1 ``a_t`` and ``a_0``, by Bayes' rule.

    q(a_{t-1}=1 | a_t, a_0) = q(a_t | a_{t-1}=1) q(a_{t-1}=1 | a_0) / q(a_t | a_0),
    which reproduces the four cases of the paper's appendix (REFERENCE.md §1).

    Args:
      adj_t, a0: ``[..., N, N]`` 0/1 entries.
      beta_bar_t, beta_bar_prev: broadcastable noise levels (``[..., 1, 1]``),
        ``beta_bar_prev < beta_bar_t``.
    Returns:
      ``(prob0, prob1)``, each ``[..., N, N]``, computed separately so neither
      loses precision to ``1 - x``; they sum to 1.
    """
    beta = (beta_bar_t - beta_bar_prev) / (1.0 - 2.0 * beta_bar_prev)
    # q(a_t | a_{t-1} = k) for k = 1, 0
    lik1 = jnp.where(adj_t > 0.5, 1.0 - beta, beta)
    lik0 = jnp.where(adj_t > 0.5, beta, 1.0 - beta)
    # q(a_{t-1} = k | a_0)
    prior1 = jnp.where(a0 > 0.5, 1.0 - beta_bar_prev, beta_bar_prev)
    prior0 = jnp.where(a0 > 0.5, beta_bar_prev, 1.0 - beta_bar_prev)
    num1, num0 = lik1 * prior1, lik0 * prior0
    denom = num1 + num0  # = q(a_t | a_0) > 0 for beta_bar_t > 0
    return num0 / denom, num1 / denom


def p_prev_probs(logits, adj_t, beta_bar_t, beta_bar_prev):
    """``p_theta(a_{t-1} | A_t) = sum_a q(a_{t-1} | a_t, a_0=a) p_theta(a_0=a | A_t)``.

    Args:
      logits: ``[..., N, N]`` logits of ``p_theta(a_0 = 1 | A_t)``.
      adj_t: ``[..., N, N]``; noise levels broadcastable ``[..., 1, 1]``.
    Returns: ``(prob0, prob1)``, each ``[..., N, N]``.
    """
    p1 = jax.nn.sigmoid(logits)
    p0 = jax.nn.sigmoid(-logits)
    q0_given1, q1_given1 = q_posterior_probs(adj_t, jnp.ones_like(adj_t), beta_bar_t, beta_bar_prev)
    q0_given0, q1_given0 = q_posterior_probs(adj_t, jnp.zeros_like(adj_t), beta_bar_t, beta_bar_prev)
    return q0_given1 * p1 + q0_given0 * p0, q1_given1 * p1 + q1_given0 * p0


def binary_kl(q0, q1, p0, p1, eps: float = 1e-20):
    """KL(q || p) of Bernoulli distributions given both probabilities of each; 0·log 0 = 0."""
    return (jax.scipy.special.xlogy(q0, q0) - jax.scipy.special.xlogy(q0, p0 + eps)
            + jax.scipy.special.xlogy(q1, q1) - jax.scipy.special.xlogy(q1, p1 + eps))


def binary_nll(logits, target):
    """``-log p(target)`` for Bernoulli(sigmoid(logits)), stable. Shapes broadcast."""
    return jnp.logaddexp(0.0, logits) - target * logits


def vb_terms(logits, adj0, adj_t, t_index, beta_bar_t, beta_bar_prev):
    """Per-entry L_vb terms: KL(q(a_{t-1}|a_t,a_0) || p_theta(a_{t-1}|A_t)) for t >= 2,
    and the reconstruction ``-log p_theta(a_0 | A_1)`` for t = 1.

    Args:
      logits, adj0, adj_t: ``[B, N, N]``; t_index ``int[B]`` in 1..T;
      beta_bar_t, beta_bar_prev: ``[B]``.
    Returns: ``[B, N, N]`` per-entry terms (unmasked).
    """
    bt, bp = broadcast_per_graph(beta_bar_t), broadcast_per_graph(beta_bar_prev)
    q0, q1 = q_posterior_probs(adj_t, adj0, bt, bp)
    p0, p1 = p_prev_probs(logits, adj_t, bt, bp)
    kl = binary_kl(q0, q1, p0, p1)
    nll = binary_nll(logits, adj0)
    return jnp.where(broadcast_per_graph(t_index) == 1, nll, kl)


def simple_weight(beta_bar_t, num_timesteps: int):
    """L_simple weight ``1 - 2 beta_bar_t + 1/T`` (Bond-Taylor et al. 2021, eq. 7)."""
    return 1.0 - 2.0 * beta_bar_t + 1.0 / num_timesteps


class LossOutput(NamedTuple):
    """loss: scalar, mean over real upper pairs of the batch; per_graph: ``[B]`` summed terms;
    num_pairs: ``[B]`` real upper pairs per graph; t_index: ``[B]``."""

    loss: jax.Array
    per_graph: jax.Array
    num_pairs: jax.Array
    t_index: jax.Array


def per_graph_time_and_noise_keys(keys: jax.Array):
    """``[B]`` keys -> (``u_t`` uniform ``[B]`` for the level, ``[B]`` keys for the noise).

    Graph ``b`` draws its level from ``fold_in(keys[b], 0)`` and its noise from
    ``fold_in(keys[b], 1)``.
    """
    key_t = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    key_noise = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    return jax.vmap(lambda k: jax.random.uniform(k, ()))(key_t), key_noise


def uniform_timestep(u_t: jax.Array, num_timesteps: int) -> jax.Array:
    """Uniform ``[0, 1)`` draws ``[B]`` -> ``int32[B]`` levels uniform on ``1..T``."""
    return jnp.clip(jnp.floor(u_t * num_timesteps).astype(jnp.int32) + 1, 1, num_timesteps)


def pair_mean_loss(terms: jax.Array, node_mask: jax.Array, t_index: jax.Array) -> LossOutput:
    """Per-pair loss terms ``[B, N, N]`` -> LossOutput over the real strict-upper pairs.

    ``per_graph`` sums each graph's pairs; ``loss`` divides the batch total by the
    number of real pairs in the batch.
    """
    pm = pair_mask(node_mask)
    per_graph = jnp.sum(jnp.where(pm, terms, 0.0), axis=(-1, -2))
    num_pairs = jnp.sum(pm, axis=(-1, -2)).astype(jnp.float32)
    loss = per_graph.sum() / jnp.maximum(num_pairs.sum(), 1.0)
    return LossOutput(loss, per_graph, num_pairs, t_index)


def training_loss(denoise_fn: DenoiseFn, key: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, loss_type: str = "simple",
                  continuous_time: bool = False) -> LossOutput:
    """One Monte-Carlo estimate of L_simple or L_vb on a batch.

    ``key`` is one key or ``[B]`` per-graph keys (with per-graph keys a graph's
    t and noise depend only on its own key). Each graph draws its own ``t ~ U{1..T}`` (or, with ``continuous_time`` and
    L_simple only, ``beta_bar ~ U(0, 1/2)`` with the nearest level as t_index),
    is noised by ``q_sample`` and denoised by ``denoise_fn``. Only real strict
    upper pairs count. The loss is the sum of per-pair terms divided by the
    number of real pairs in the batch (a per-pair mean, so batch composition
    does not reweight graphs by size beyond their pair count).

    Args:
      denoise_fn: logits of ``p(A_0 | A_t)`` (see ``DenoiseFn``).
      adj0: ``[B, N, N]`` clean graphs; node_mask: ``[B, N]`` bool.
    """
    if loss_type not in LOSSES:
        raise ValueError(f"unknown loss {loss_type!r}; expected one of {LOSSES}")
    if continuous_time and loss_type != "simple":
        raise ValueError("continuous_time is only defined for the 'simple' loss")
    T = schedule.num_timesteps
    bb_table = jnp.asarray(schedule.beta_bar)
    B = adj0.shape[0]
    keys = key if key.ndim == 1 else jax.random.split(key, B)
    u_t, key_noise = per_graph_time_and_noise_keys(keys)
    if continuous_time:
        bb_t = 0.5 * u_t
        t_index = jnp.clip(jnp.round(bb_t / 0.5 * T), 1, T).astype(jnp.int32)
        bb_prev = bb_t  # unused by L_simple
    else:
        t_index = uniform_timestep(u_t, T)
        bb_t, bb_prev = bb_table[t_index], bb_table[t_index - 1]
    adj_t = q_sample(key_noise, adj0, node_mask, bb_t)
    logits = denoise_fn(adj_t, node_mask, t_index, bb_t).astype(jnp.float32)
    if loss_type == "simple":
        terms = binary_nll(logits, adj0) * broadcast_per_graph(simple_weight(bb_t, T))
    else:
        terms = vb_terms(logits, adj0, adj_t, t_index, bb_t, bb_prev)
    return pair_mean_loss(terms, node_mask, t_index)


# ----------------------------------------------------------------------------
# Samplers


def reverse_step(denoise_fn: DenoiseFn, key: jax.Array, adj_t: jax.Array, node_mask: jax.Array,
                 t_index: jax.Array, beta_bar_t: jax.Array, beta_bar_prev: jax.Array,
                 algorithm: int) -> jax.Array:
    """One reverse step from level t to level t_prev (all graphs of the batch share them).

    Algorithm 1: ``A_{t-1} ~ p_theta(A_{t-1} | A_t)``.
    Algorithm 2: ``Ã_0 ~ p_theta(A_0 | A_t)``, then ``A_{t-1} ~ q(A_{t-1} | Ã_0)``.

    Args: adj_t ``[B,N,N]``; node_mask ``[B,N]``; t_index, beta_bar_t, beta_bar_prev scalars.
    Returns: ``[B,N,N]`` 0/1 adjacency at level t_prev.
    """
    B = adj_t.shape[0]
    t_vec = jnp.full((B,), t_index, jnp.int32)
    bt = jnp.full((B,), beta_bar_t, jnp.float32)
    bp = jnp.full((B,), beta_bar_prev, jnp.float32)
    logits = denoise_fn(adj_t, node_mask, t_vec, bt).astype(jnp.float32)
    k1, k2 = jax.random.split(key)
    if algorithm == 1:
        _, p1 = p_prev_probs(logits, adj_t, broadcast_per_graph(bt), broadcast_per_graph(bp))
        return symmetric_upper_bernoulli(k1, p1, node_mask)
    if algorithm == 2:
        x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(logits), node_mask)
        return flip_upper(k2, x0, bp, node_mask)
    raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected 1 or 2")


def sample_prior(key: jax.Array, node_mask: jax.Array) -> jax.Array:
    """``A_T``: Erdős–Rényi(1/2) on each graph's real pairs. ``[B,N]`` -> ``[B,N,N]``."""
    return symmetric_upper_bernoulli(key, jnp.full(node_mask.shape + node_mask.shape[-1:], 0.5),
                                     node_mask)


def sample_graphs(denoise_fn: DenoiseFn, key: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, algorithm: int = 2, num_steps: int | None = None,
                  return_chain: bool = False):
    """Run the reverse chain with ``jax.lax.scan`` for one batch sharing ``key``.

    Args:
      denoise_fn: see ``DenoiseFn``.
      node_mask: ``[B, N]`` bool, the requested node counts as prefix masks.
      schedule: the trained schedule; ``num_steps`` < T strides over its levels.
      algorithm: 1 or 2 (see ``reverse_step``).
      return_chain: also return every intermediate adjacency.
    Returns:
      ``A_0`` ``[B, N, N]``; with ``return_chain`` a tuple ``(A_0, chain)`` where
      ``chain`` is ``[K+1, B, N, N]`` from ``A_T`` down to ``A_0``.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected 1 or 2")
    levels = sampling_levels(schedule.num_timesteps, num_steps)
    bb = schedule.beta_bar64
    t_now = jnp.asarray(levels[:-1], jnp.int32)
    bb_now = jnp.asarray(bb[levels[:-1]], jnp.float32)
    bb_prev = jnp.asarray(bb[levels[1:]], jnp.float32)
    steps = jnp.arange(len(levels) - 1, dtype=jnp.int32)
    adj_T = sample_prior(jax.random.fold_in(key, 10_000_019), node_mask)

    def body(adj, xs):
        i, t, b_now, b_prev = xs
        new = reverse_step(denoise_fn, jax.random.fold_in(key, i), adj, node_mask, t, b_now,
                           b_prev, algorithm)
        return new, (new if return_chain else None)

    adj0, chain = jax.lax.scan(body, adj_T, (steps, t_now, bb_now, bb_prev))
    if return_chain:
        return adj0, jnp.concatenate([adj_T[None], chain], axis=0)
    return adj0


def sample_graphs_vmapped(denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array,
                          schedule: NoiseSchedule, algorithm: int = 2,
                          num_steps: int | None = None, return_chain: bool = False):
    """Per-graph sampler under ``jax.vmap``: graph ``b`` uses only ``keys[b]``.

    A graph's sample therefore does not depend on which other graphs share its
    batch, so sampling in chunks reproduces sampling all at once.

    Args:
      keys: ``[B]`` typed PRNG keys; node_mask: ``[B, N]`` bool.
    Returns: ``[B, N, N]`` (and ``[B, K+1, N, N]`` chains with ``return_chain``).
    """

    return vmap_per_graph(
        lambda key, mask: sample_graphs(denoise_fn, key, mask, schedule, algorithm, num_steps,
                                        return_chain), keys, node_mask, return_chain)


def vmap_per_graph(sample_batch, keys: jax.Array, node_mask: jax.Array, return_chain: bool):
    """Run ``sample_batch(key, node_mask [1, N])`` for every graph under ``jax.vmap``.

    ``sample_batch`` returns ``A_0 [1, N, N]`` or, with ``return_chain``,
    ``(A_0, chain [K+1, 1, N, N])``. Returns ``[B, N, N]`` (and ``[B, K+1, N, N]``).
    """

    def one(key, mask):
        out = sample_batch(key, mask[None])
        if return_chain:
            return out[0][0], out[1][:, 0]
        return out[0]

    return jax.vmap(one)(keys, node_mask)

