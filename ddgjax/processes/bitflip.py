"""The bit-flip process: forward noising, posterior, reverse model, losses, samplers.

The paper's discrete diffusion (docs/method.md): every real strict-upper pair
of the adjacency flips with probability ``beta_bar_t`` after ``t`` forward steps,
ending in Erdős–Rényi(1/2) at ``t = T``. Pure functions of arrays (no Flax, no
training loop), and ``BitFlipProcess``, the ``NoiseProcess`` that packages them.

Shapes: ``B`` graphs, ``N`` padded nodes. Every adjacency is ``float[B, N, N]``
0/1, symmetric with zero diagonal and zero padding (``ddgjax.graphs``).
Per-entry probabilities are for ``a = 1``; per-graph noise levels are ``[B]``
and broadcast as ``[B, 1, 1]``.

Notation (docs/method.md, "Notation"): ``bb_t`` = beta_bar_t, the probability
that ``a_t != a_0``; the step from level ``r`` to ``s > r`` flips with
``beta_{s|r} = (bb_s - bb_r) / (1 - 2 bb_r)``. The denoiser's output is the
logits of ``p_theta(a_0 = 1 | A_t)``; its ``noise_level`` input is ``bb_t``.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.graphs import pair_mask
from ddgjax.processes.base import (DenoiseFn, LossOutput, NoiseProcess, Sampler,
                                   broadcast_per_graph, pair_mean_loss, per_graph_keys,
                                   per_graph_noise, per_graph_time_and_noise_keys,
                                   sampling_levels, uniform_timestep)
from ddgjax.processes.flip_schedules import SCHEDULES, NoiseSchedule, make_schedule

LOSSES = ("simple", "vb")
# The denoiser sees the 0/1 graph A_t (processes.binary_denoiser_input).
BINARY_DENOISER_INPUT = True
ALGORITHMS = (1, 2)
# The samplers' algorithms: the two reverse models, and 3, the de-randomised chain
# (``reverse_step``); the ELBO and the unrolled training step know only 1 and 2.
SAMPLER_ALGORITHMS = (1, 2, 3)


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


def q_sample(key: jax.Array, adj0: jax.Array, node_mask: jax.Array, beta_bar_t: jax.Array,
             rho: float = 0.5) -> jax.Array:
    """Draw ``A_t ~ q(A_t | A_0)``.

    With the uniform prior (``rho = 1/2``, the paper's) every real pair flips with
    probability ``beta_bar_t``. With an edge density ``rho`` (the marginal prior)
    ``q(a_t = 1 | a_0) = alpha_t a_0 + (1 - alpha_t) rho``, ``alpha_t = 1 - 2 beta_bar_t``:
    the state is kept with probability ``alpha_t`` and otherwise redrawn from
    Bernoulli(rho), so ``A_T`` is Erdős–Rényi(rho). docs/method.md, "Forward process".

    Args: key: one key or ``[B]`` keys; adj0 ``[B,N,N]``; node_mask ``[B,N]``;
      beta_bar_t ``[B]``. Returns ``[B,N,N]``.
    """
    if rho == 0.5:
        return flip_upper(key, adj0, beta_bar_t, node_mask)
    return symmetric_upper_bernoulli(
        key, q_marginal_prob1(adj0, broadcast_per_graph(beta_bar_t), rho), node_mask)


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


def binary_kl(q0, q1, p0, p1, eps: float = 1e-20):
    """KL(q || p) of Bernoulli distributions given both probabilities of each; 0·log 0 = 0."""
    return (jax.scipy.special.xlogy(q0, q0) - jax.scipy.special.xlogy(q0, p0 + eps)
            + jax.scipy.special.xlogy(q1, q1) - jax.scipy.special.xlogy(q1, p1 + eps))


def binary_nll(logits, target):
    """``-log p(target)`` for Bernoulli(sigmoid(logits)), stable. Shapes broadcast."""
    return jnp.logaddexp(0.0, logits) - target * logits


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


def vb_terms(logits, adj0, adj_t, beta_bar_t, beta_bar_prev, rho: float = 0.5,
             algorithm: int = 1):
    """Per-entry L_vb terms of the step from level ``beta_bar_t`` to ``beta_bar_prev``:
    KL(q(a_prev|a_t,a_0) || p_theta(a_prev|A_t)), and the reconstruction
    ``-log p_theta(a_0 | A_t)`` where ``beta_bar_prev = 0`` (t = 1 on the full grid, the
    last step of any strided grid). ``algorithm`` picks the reverse model
    (``reverse_probs``): 1, the one L_vb trains; 2, for the likelihood of Algorithm 2.

    Args:
      logits, adj0, adj_t: ``[B, N, N]``; beta_bar_t, beta_bar_prev: ``[B]``.
    Returns: ``[B, N, N]`` per-entry terms (unmasked).
    """
    bt, bp = broadcast_per_graph(beta_bar_t), broadcast_per_graph(beta_bar_prev)
    q0, q1 = q_posterior_probs(adj_t, adj0, bt, bp, rho)
    p0, p1 = reverse_probs(logits, adj_t, bt, bp, rho, algorithm)
    kl = binary_kl(q0, q1, p0, p1)
    nll = binary_nll(logits, adj0)
    return jnp.where(bp > 0, kl, nll)


SIMPLE_WEIGHTINGS = ("bond_taylor", "flat")


def simple_weight(beta_bar_t, num_timesteps: int, weighting: str = "bond_taylor"):
    """L_simple's per-level weight: ``1 - 2 beta_bar_t + 1/T`` (``"bond_taylor"``, Bond-Taylor
    et al. 2021, eq. 7: the paper's) or 1 at every level (``"flat"``: the plain
    cross-entropy of ``p(A_0 | A_t)``, which weighs the noisy levels as much as the clean)."""
    if weighting == "flat":
        return jnp.ones_like(jnp.asarray(beta_bar_t, jnp.float32))
    if weighting != "bond_taylor":
        raise ValueError(f"unknown L_simple weighting {weighting!r}; expected one of "
                         f"{SIMPLE_WEIGHTINGS}")
    return 1.0 - 2.0 * beta_bar_t + 1.0 / num_timesteps


def mid_beta_bar(u, gamma: float, xp=jnp):
    """The ``"mid:GAMMA"`` distortion of ``u`` in [0, 1] (0: clean, 1: the prior) to a level:
    the kept fraction ``alpha = 1 - 2 beta_bar`` is ``(1 + sign(w) |w|^GAMMA) / 2`` with
    ``w = 1 - 2u``, so ``beta_bar = (1 - sign(w) |w|^GAMMA) / 4``; GAMMA > 1 gathers the
    levels around ``alpha = 1/2`` (``beta_bar = 1/4``), GAMMA = 1 is the identity ``u / 2``.
    ``xp``: ``jnp`` (training) or ``np`` (the sampling grid, in float64)."""
    w = 1.0 - 2.0 * u
    return 0.25 * (1.0 - xp.sign(w) * xp.abs(w) ** gamma)


TRAIN_GRIDS = ("uniform", "power:GAMMA", "mid:GAMMA")


def training_levels(u: jax.Array, train_grid: str = "uniform") -> jax.Array:
    """Continuous-time training levels from uniform draws ``u [B]`` in [0, 1):
    ``beta_bar = u / 2`` (``"uniform"``), ``u^GAMMA / 2`` (``"power:GAMMA"``: GAMMA > 1 trains
    more at low noise) or ``mid_beta_bar(u, GAMMA)`` (``"mid:GAMMA"``: GAMMA > 1 trains more
    around ``beta_bar = 1/4``, where an SBM graph's partition becomes detectable); the same
    distortions as the sampling grids of those names."""
    kind, gamma = parse_grid(train_grid)
    if kind == "uniform":
        return 0.5 * u
    if kind == "power":
        return 0.5 * u ** gamma
    if kind == "mid":
        return mid_beta_bar(u, gamma)
    raise ValueError(f"unknown training grid {train_grid!r}; expected one of {TRAIN_GRIDS}")


# fold_in stream of a graph's key for its self-conditioning coin (0 and 1: level, noise)
SELF_CONDITION_STREAM = 2


def self_condition_coins(keys: jax.Array) -> jax.Array:
    """``bool[B]``: which graphs of a training batch get the model's first-pass estimate
    (probability 1/2 each, from ``fold_in(keys[b], SELF_CONDITION_STREAM)``)."""
    return jax.vmap(lambda k: jax.random.bernoulli(
        jax.random.fold_in(k, SELF_CONDITION_STREAM), 0.5))(keys)


# fold_in stream of a graph's key for its unrolled-step draws (``unrolled_inputs``)
UNROLL_STREAM = 3


@dataclasses.dataclass(frozen=True)
class UnrollSpec:
    """Step-unrolled training (``unrolled_inputs``): the sampler step a graph's input comes
    from, with probability ``prob`` per graph.

    Attributes:
      prob: the probability that a training graph's input is the model's own one-step
        denoising instead of a draw of ``q(A_t | A_0)`` (0: off).
      t_index, beta_bar: the sampler's levels, descending (``sampling_grid``), as tuples
        (hashable): ``K + 1`` levels, ``K >= 2`` steps.
      algorithm: the sampler's algorithm (1 or 2) for the unrolled step.
      levers: the sampler's ``SamplerLevers`` (e.g. its logit scale) for the unrolled step
        (None: all off).
    """

    prob: float
    t_index: tuple
    beta_bar: tuple
    algorithm: int = 2
    levers: "SamplerLevers | None" = None

    def __post_init__(self):
        if not 0.0 <= float(self.prob) <= 1.0:
            raise ValueError(f"config.diffusion.unroll_prob: expected a probability in [0, 1], "
                             f"got {self.prob}")
        if len(self.beta_bar) < 3 or len(self.t_index) != len(self.beta_bar):
            raise ValueError("config.sample.num_steps: step-unrolled training needs a sampler "
                             f"of at least 2 steps, got {len(self.beta_bar) - 1}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError("config.sample.algorithm: step-unrolled training imitates an "
                             f"Algorithm 1 or 2 step, got {self.algorithm!r}")


def unrolled_inputs(denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array,
                    node_mask: jax.Array, spec: UnrollSpec, rho: float = 0.5):
    """Inputs made by one step of the model's own sampler (step-unrolled denoising).

    A short sampler draws every pair independently from a factorised ``p_theta``, so its
    ``A_s`` after a step is not distributed as ``q(A_s | A_0)``; a denoiser trained only
    on ``q``'s draws never sees the states its sampler visits. Following SUNDAE (Savinov et
    al. 2022, "Step-unrolled denoising autoencoders for text generation"), graph ``b``
    picks a step ``k`` of the sampler's grid uniformly among its first ``K - 1`` (the last
    step ends at level 0, where the denoiser is not called), draws
    ``A_t ~ q(A_t | A_0)`` at the step's start ``beta_bar[k]`` and takes one reverse step
    of the sampler (``reverse_step``: its algorithm and levers) with the model's current
    parameters, without gradient, to ``A_s`` at ``beta_bar[k + 1]``. The loss then asks the
    model to predict ``A_0`` from ``A_s``.

    Graph ``b`` draws only from ``fold_in(keys[b], UNROLL_STREAM)``.

    Args:
      denoise_fn: the model (``DenoiseFn``); called once on the whole batch.
      keys: ``[B]`` per-graph keys; adj0: ``[B, N, N]``; node_mask: ``bool[B, N]``.
    Returns:
      ``(adj_s [B, N, N] 0/1, t_index int32[B], beta_bar float32[B])``: the inputs at the
      step's end.
    """
    t_lv = jnp.asarray(spec.t_index, jnp.int32)
    bb = jnp.asarray(spec.beta_bar, jnp.float32)
    num_steps = len(spec.beta_bar) - 1
    streams = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, UNROLL_STREAM), 3))(keys)
    step = jax.vmap(lambda k: jax.random.randint(k, (), 0, num_steps - 1))(streams[:, 0])
    bb_t, bb_s = bb[step], bb[step + 1]
    t_t, t_s = t_lv[step], t_lv[step + 1]
    adj_t = q_sample(streams[:, 1], adj0, node_mask, bb_t, rho)
    logits = jax.lax.stop_gradient(
        denoise_fn(adj_t, node_mask, t_t, bb_t).astype(jnp.float32))
    levers = spec.levers if spec.levers is not None else SamplerLevers()

    def one(key, a, m, lg, t, b_now, b_next):
        return reverse_step(lambda *_: lg[None], key, a[None], m[None], t, b_now, b_next,
                            spec.algorithm, rho=rho, levers=levers)[0]

    adj_s = jax.vmap(one)(streams[:, 2], adj_t, node_mask, logits, t_t, bb_t, bb_s)
    return jax.lax.stop_gradient(adj_s), t_s, bb_s


def unroll_coins(keys: jax.Array, prob: float) -> jax.Array:
    """``bool[B]``: which graphs train on an unrolled input (probability ``prob`` each, from
    ``fold_in(fold_in(keys[b], UNROLL_STREAM), 1)``)."""
    return jax.vmap(lambda k: jax.random.bernoulli(
        jax.random.fold_in(jax.random.fold_in(k, UNROLL_STREAM), 1), prob))(keys)


def training_loss(denoise_fn: DenoiseFn, key: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, loss_type: str = "simple",
                  continuous_time: bool = False, rho: float = 0.5,
                  train_grid: str = "uniform", self_condition: bool = False,
                  unroll: UnrollSpec | None = None,
                  simple_weighting: str = "bond_taylor") -> LossOutput:
    """One Monte-Carlo estimate of L_simple or L_vb on a batch.

    ``key`` is one key or ``[B]`` per-graph keys (with per-graph keys a graph's
    t and noise depend only on its own key). Each graph draws its own
    ``t ~ U{1..T}`` (or, with ``continuous_time`` and
    L_simple only, ``beta_bar ~ U(0, 1/2)`` with the nearest level as t_index, or the
    distorted ``train_grid`` of ``training_levels``),
    is noised by ``q_sample`` and denoised by ``denoise_fn``. Only real strict
    upper pairs count. The loss is the sum of per-pair terms divided by the
    number of real pairs in the batch (a per-pair mean, so batch composition
    does not reweight graphs by size beyond their pair count).

    With ``self_condition`` (self-conditioning, Chen et al. 2022), the denoiser first runs
    without an estimate; for half of the graphs (``self_condition_coins``) its
    probabilities, without gradient, become the fifth argument of the second call, whose
    logits the loss reads (the others get zeros, the unconditioned mode).

    With ``unroll`` (``UnrollSpec``, L_simple in continuous time only), each graph with
    probability ``unroll.prob`` (``unroll_coins``) trains on the model's own one-step
    denoising from a sampler level above (``unrolled_inputs``) instead of a draw of
    ``q(A_t | A_0)``, at the sampler level that step ends on; the target stays ``A_0``.

    ``simple_weighting``: L_simple's per-level weight (``simple_weight``).

    Args:
      denoise_fn: logits of ``p(A_0 | A_t)`` (see ``DenoiseFn``; with ``self_condition``
        it takes the estimate ``[B, N, N]`` as a fifth argument).
      adj0: ``[B, N, N]`` clean graphs; node_mask: ``[B, N]`` bool.
    """
    if loss_type not in LOSSES:
        raise ValueError(f"unknown loss {loss_type!r}; expected one of {LOSSES}")
    if continuous_time and loss_type != "simple":
        raise ValueError("continuous_time is only defined for the 'simple' loss")
    T = schedule.num_timesteps
    bb_table = jnp.asarray(schedule.beta_bar)
    B = adj0.shape[0]
    keys = per_graph_keys(key, B)
    u_t, key_noise = per_graph_time_and_noise_keys(keys)
    if continuous_time:
        bb_t = training_levels(u_t, train_grid)
        t_index = jnp.clip(jnp.round(bb_t / 0.5 * T), 1, T).astype(jnp.int32)
        bb_prev = bb_t  # unused by L_simple
    else:
        t_index = uniform_timestep(u_t, T)
        bb_t, bb_prev = bb_table[t_index], bb_table[t_index - 1]
    adj_t = q_sample(key_noise, adj0, node_mask, bb_t, rho)
    if unroll is not None and unroll.prob > 0.0:
        if not (continuous_time and loss_type == "simple"):
            raise ValueError("config.diffusion.unroll_prob: step-unrolled training needs "
                             "L_simple in continuous time (config.diffusion.loss='simple', "
                             "continuous_time=True)")
        if self_condition:
            raise ValueError("config.diffusion.unroll_prob: not with self-conditioning "
                             "(config.model.ppgn.self_condition)")
        u_adj, u_t, u_bb = unrolled_inputs(denoise_fn, keys, adj0, node_mask, unroll, rho)
        use = unroll_coins(keys, unroll.prob)
        adj_t = jnp.where(use[:, None, None], u_adj, adj_t)
        t_index = jnp.where(use, u_t, t_index)
        bb_t = jnp.where(use, u_bb, bb_t)
    estimate = ()
    if self_condition:
        first = denoise_fn(adj_t, node_mask, t_index, bb_t).astype(jnp.float32)
        use = broadcast_per_graph(self_condition_coins(keys).astype(jnp.float32))
        estimate = (jax.lax.stop_gradient(jax.nn.sigmoid(first)) * use,)
    logits = denoise_fn(adj_t, node_mask, t_index, bb_t, *estimate).astype(jnp.float32)
    if loss_type == "simple":
        terms = binary_nll(logits, adj0) * broadcast_per_graph(
            simple_weight(bb_t, T, simple_weighting))
    else:
        terms = vb_terms(logits, adj0, adj_t, bb_t, bb_prev, rho)
    return pair_mean_loss(terms, node_mask, t_index)


# ----------------------------------------------------------------------------
# Samplers


@dataclasses.dataclass(frozen=True)
class SamplerLevers:
    """The optional levers of the bit-flip samplers; the defaults switch all of them off.

    Attributes:
      alg1_below, alg2_below: hybrid samplers. The steps that start at
        ``beta_bar <= alg1_below`` (``alg2_below``) use Algorithm 1 (2), the others the
        sampler's algorithm (0: off; at most one of the two; ``step_algorithms``).
      renoise_mix: in an Algorithm 1 step, each pair independently takes Algorithm 2's
        draw with this probability. Per pair, Algorithm 2's draw is Bernoulli of
        ``q_marginal_prob1(p_theta(a_0 = 1 | A_t), beta_bar_prev)``, so the mixture is one
        Bernoulli draw of the mixed probability: a stochastic corrector in the spirit of
        DeFoG's detailed-balance rate (it redraws the pair from q(a_{t-1} | a_0 ~ p_theta)).
      logit_scale: multiplies the denoiser's logits before use (> 1 sharpens
        ``p_theta(A_0 | A_t)`` towards its mode, < 1 flattens it).
      logit_scale_above: apply ``logit_scale`` only in steps that start at
        ``beta_bar_t >= logit_scale_above`` (0: in every step).
      target_guidance: ``omega >= 0``, DeFoG's target guidance in Algorithm 1 steps
        (``target_guidance_prob1``): one more jump per pair towards the state the model
        predicts for ``A_0`` (0: off). Algorithm 2 steps do not read it.

    Construction checks the ranges and raises ValueError naming the lever.
    """

    alg1_below: float = 0.0
    alg2_below: float = 0.0
    renoise_mix: float = 0.0
    logit_scale: float = 1.0
    logit_scale_above: float = 0.0
    target_guidance: float = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, float(value))
            except (TypeError, ValueError):
                raise ValueError(f"{f.name}: expected a number, got {value!r}") from None
        for name in ("alg1_below", "alg2_below"):
            level = getattr(self, name)
            if not 0.0 <= level <= 0.5:
                raise ValueError(f"{name}: expected a noise level in [0, 1/2], got {level}")
        if self.alg1_below > 0 and self.alg2_below > 0:
            raise ValueError("alg1_below and alg2_below: set at most one of them")
        if not 0.0 <= self.renoise_mix <= 1.0:
            raise ValueError(f"renoise_mix: expected a probability in [0, 1], got "
                             f"{self.renoise_mix}")
        if not self.logit_scale > 0.0:
            raise ValueError(f"logit_scale: expected a positive factor, got {self.logit_scale}")
        if not 0.0 <= self.logit_scale_above <= 0.5:
            raise ValueError(f"logit_scale_above: expected a noise level in [0, 1/2], got "
                             f"{self.logit_scale_above}")
        if not 0.0 <= self.target_guidance < float("inf"):
            raise ValueError(f"target_guidance: expected a finite omega >= 0, got "
                             f"{self.target_guidance}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


LEVERS = tuple(f.name for f in dataclasses.fields(SamplerLevers))


def target_guidance_prob1(prob1, adj_t, p0_prob1, beta_bar_t, beta_bar_prev, omega: float,
                          rho: float = 0.5):
    """An Algorithm 1 step's ``p(a_prev = 1)`` with DeFoG's target guidance added.

    DeFoG (Qin et al. 2025, "DeFoG: Discrete Flow Matching for Graph Generation") adds
    to its denoising rate the term ``omega * delta(z, x_1) / (Z p_{t|1}(x | x_1))``: a jump
    from the current state ``x`` towards the clean state ``x_1``, faster the less likely
    ``x`` is under the path from ``x_1``. Our process is that path with the kept fraction
    ``alpha = 1 - 2 beta_bar`` as its time, ``p(x | x_1) = alpha [x = x_1] + (1 - alpha)
    m(x)``, ``m`` the prior (Bernoulli(rho)), and ``Z = 2`` states of nonzero probability.
    Averaged over ``x_1 ~ p_theta(a_0 | A_t)``, a pair in state ``x`` jumps to ``z = 1 - x``
    over the step's ``d_alpha = alpha_prev - alpha_t`` with probability

        g = min(1, omega * d_alpha * p_theta(a_0 = z) / (2 (1 - alpha_t) m(x)))

    and otherwise follows the Algorithm 1 kernel (``prob1``).

    Args: ``prob1``, ``adj_t``, ``p0_prob1`` (``p_theta(a_0 = 1 | A_t)``) ``[..., N, N]``;
      levels broadcastable ``[..., 1, 1]``, ``beta_bar_prev < beta_bar_t``.
    Returns: ``[..., N, N]`` probabilities of ``a_prev = 1``.
    """
    present = adj_t > 0.5
    d_alpha = 2.0 * (beta_bar_t - beta_bar_prev)
    m_x = jnp.where(present, rho, 1.0 - rho)
    p_z = jnp.where(present, 1.0 - p0_prob1, p0_prob1)
    g = jnp.clip(omega * d_alpha * p_z / (2.0 * (2.0 * beta_bar_t) * m_x), 0.0, 1.0)
    return jnp.where(present, (1.0 - g) * prob1, g + (1.0 - g) * prob1)


def reverse_step(denoise_fn: DenoiseFn, key: jax.Array, adj_t: jax.Array, node_mask: jax.Array,
                 t_index: jax.Array, beta_bar_t: jax.Array, beta_bar_prev: jax.Array,
                 algorithm: int, argmax: bool = False, rho: float = 0.5,
                 levers: SamplerLevers = SamplerLevers(),
                 decode_time: jax.Array | None = None) -> jax.Array:
    """One reverse step from level t to level t_prev (all graphs of the batch share them).

    Algorithm 1: ``A_{t-1} ~ p_theta(A_{t-1} | A_t)``.
    Algorithm 2: ``Ã_0 ~ p_theta(A_0 | A_t)``, then ``A_{t-1} ~ q(A_{t-1} | Ã_0)``.
    Algorithm 3 (de-randomised, after DNDM: Chen et al. 2023, "Fast sampling via
    de-randomization for discrete diffusion models"): ``q(A_t | A_0)`` keeps each pair with
    probability ``alpha_t = 1 - 2 beta_bar_t`` and otherwise redraws it from the prior.
    Coupled over levels by one uniform ``v`` per pair (``decode_time``, fixed for the
    whole chain: kept at level t iff ``v < alpha_t``), a pair is noise above its own level
    and ``a_0`` below it, with ``q``'s marginals at every level. The chain runs that path
    backwards: the pairs whose ``v`` lies in ``[alpha_t, alpha_prev)`` take a draw of
    ``p_theta(a_0 | A_t)`` now, and every other pair keeps its value, so each pair is
    drawn exactly once, at its own level, and never redrawn (Algorithm 2 redraws every
    pair at every step).
    With ``argmax`` the draw from the model's distribution takes its mode instead
    (used for the last step, to level 0).

    ``levers`` (``SamplerLevers``): this step reads ``renoise_mix``, ``logit_scale``,
    ``logit_scale_above`` and ``target_guidance``; the hybrids' ``alg*_below`` choose
    ``algorithm`` per step.

    Args: adj_t ``[B,N,N]``; node_mask ``[B,N]``; t_index, beta_bar_t, beta_bar_prev scalars;
      decode_time: Algorithm 3's symmetric uniforms ``[B,N,N]`` (``decode_times``).
    Returns: ``[B,N,N]`` 0/1 adjacency at level t_prev.
    """
    B = adj_t.shape[0]
    t_vec = jnp.full((B,), t_index, jnp.int32)
    bt = jnp.full((B,), beta_bar_t, jnp.float32)
    bp = jnp.full((B,), beta_bar_prev, jnp.float32)
    logits = denoise_fn(adj_t, node_mask, t_vec, bt).astype(jnp.float32)
    if levers.logit_scale != 1.0:
        scale = (levers.logit_scale if levers.logit_scale_above <= 0.0 else
                 jnp.where(beta_bar_t >= levers.logit_scale_above, levers.logit_scale, 1.0))
        logits = logits * scale
    k1, k2 = jax.random.split(key)
    if algorithm == 1:
        _, p1 = p_prev_probs(logits, adj_t, broadcast_per_graph(bt), broadcast_per_graph(bp),
                             rho)
        if levers.renoise_mix > 0.0:
            mix = levers.renoise_mix
            renoised = q_marginal_prob1(jax.nn.sigmoid(logits), broadcast_per_graph(bp), rho)
            p1 = (1.0 - mix) * p1 + mix * renoised
        if levers.target_guidance > 0.0:
            p1 = target_guidance_prob1(p1, adj_t, jax.nn.sigmoid(logits), broadcast_per_graph(bt),
                                       broadcast_per_graph(bp), levers.target_guidance, rho)
        return draw_upper(k1, p1, node_mask, argmax)
    if algorithm == 2:
        x0 = draw_upper(k1, jax.nn.sigmoid(logits), node_mask, argmax)
        return q_sample(k2, x0, node_mask, bp, rho)
    if algorithm == 3:
        if decode_time is None:
            raise ValueError("algorithm 3 needs the chain's decode_time (decode_times)")
        x0 = draw_upper(k1, jax.nn.sigmoid(logits), node_mask, argmax)
        alpha_t = broadcast_per_graph(1.0 - 2.0 * bt)
        alpha_prev = broadcast_per_graph(1.0 - 2.0 * bp)
        now = (decode_time >= alpha_t) & (decode_time < alpha_prev)
        return jnp.where(now, x0, adj_t)
    raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of "
                     f"{SAMPLER_ALGORITHMS}")


# fold_in stream of the sampler's key for Algorithm 3's decode times (``sample_graphs``)
DECODE_TIME_STREAM = 10_000_021


def decode_times(key: jax.Array, node_mask: jax.Array) -> jax.Array:
    """Algorithm 3's per-pair uniforms ``v`` (``reverse_step``): ``[B, N]`` -> symmetric
    ``[B, N, N]`` in [0, 1), one draw per strict-upper pair, mirrored (per-graph keys as
    ``uniform_noise``)."""
    shape = node_mask.shape + node_mask.shape[-1:]
    upper = jnp.triu(uniform_noise(key, shape), 1)
    return upper + jnp.swapaxes(upper, -1, -2)


def sample_prior(key: jax.Array, node_mask: jax.Array, rho: float = 0.5) -> jax.Array:
    """``A_T``: Erdős–Rényi(rho) on each graph's real pairs. ``[B,N]`` -> ``[B,N,N]``."""
    return symmetric_upper_bernoulli(key, jnp.full(node_mask.shape + node_mask.shape[-1:], rho),
                                     node_mask)


GRIDS = ("trained", "uniform", "power:GAMMA", "mid:GAMMA")


def parse_grid(grid: str) -> tuple[str, float]:
    """``"trained"`` / ``"uniform"`` / ``"power:2"`` / ``"mid:2"`` -> ``(kind, gamma)``;
    ValueError if bad."""
    kind, _, arg = str(grid).partition(":")
    if kind in ("trained", "uniform") and not arg:
        return kind, 1.0
    if kind in ("power", "mid"):
        try:
            gamma = float(arg)
        except ValueError:
            gamma = -1.0
        if gamma > 0 and math.isfinite(gamma):
            return kind, gamma
    raise ValueError(f"unknown sampling grid {grid!r}; expected one of {GRIDS} (GAMMA > 0, "
                     "finite)")


def sampling_grid(schedule: NoiseSchedule, num_steps: int | None = None,
                  grid: str = "trained") -> tuple[np.ndarray, np.ndarray]:
    """The levels a K-step sampler visits, descending: ``(t_index int32[K+1], beta_bar float64[K+1])``.

    * ``"trained"``: ``K <= T`` evenly strided levels of the trained schedule
      (``sampling_levels``), always including T and 0.
    * ``"uniform"``: ``beta_bar_k = k / (2K)`` for any K (models trained in continuous time).
    * ``"power:GAMMA"``: ``beta_bar_k = (k / K)^GAMMA / 2``; GAMMA > 1 spends more of the
      K steps at low noise, where the sampler fixes the last wrong pairs.
    * ``"mid:GAMMA"``: the kept fraction ``alpha = 1 - 2 beta_bar`` runs from 0 to 1 as
      ``alpha = (1 + sign(w) |w|^GAMMA) / 2``, ``w = 1 - 2k/K``: GAMMA > 1 spends more of the
      K steps around ``alpha = 1/2`` (where, on SBM graphs, the partition becomes
      detectable) and fewer at both ends; GAMMA = 1 is ``"uniform"``.

    Off the trained grid, ``t_index`` is the nearest trained level (what PPGN ignores).
    """
    kind, gamma = parse_grid(grid)
    T = schedule.num_timesteps
    if kind == "trained":
        levels = sampling_levels(T, num_steps)
        return levels, schedule.beta_bar64[levels]
    K = T if num_steps is None else int(num_steps)
    if K < 1:
        raise ValueError(f"num_steps must be >= 1, got {K}")
    u = np.arange(K, -1, -1, dtype=np.float64) / K
    if kind == "mid":
        bb = mid_beta_bar(u, gamma, np)                       # (1 - alpha) / 2
    else:
        bb = 0.5 * u ** gamma
    # the samplers compute in float32: every level but the last must stay a positive
    # normal float32 and the levels must stay distinct there (else a step runs from 0 to 0)
    bb32 = bb.astype(np.float32)
    if not (np.all(bb32[:-1] >= np.finfo(np.float32).tiny) and np.all(np.diff(bb32) < 0)):
        small = float(bb[-2])
        raise ValueError(f"sampling grid {grid!r} with {K} steps: its smallest nonzero level "
                         f"{small:.3g} (or two neighbouring levels) cannot be told apart in "
                         "float32; use fewer steps or a smaller GAMMA")
    t_index = np.where(bb > 0, np.clip(np.round(2.0 * T * bb), 1, T), 0).astype(np.int32)
    return t_index, bb


def denoised_draw(denoise_fn: DenoiseFn, key: jax.Array, adj: jax.Array, node_mask: jax.Array,
                  argmax: bool) -> jax.Array:
    """A draw (or with ``argmax`` the mode) of ``p_theta(A_0 | A)`` with ``A`` taken as level 0
    (``noise_level = 0``): the optional final corrector pass of the samplers."""
    B = adj.shape[0]
    logits = denoise_fn(adj, node_mask, jnp.zeros((B,), jnp.int32),
                        jnp.zeros((B,), jnp.float32)).astype(jnp.float32)
    return draw_upper(key, jax.nn.sigmoid(logits), node_mask, argmax)


def draw_upper(key: jax.Array, prob1: jax.Array, node_mask: jax.Array, argmax: bool) -> jax.Array:
    """``symmetric_upper_bernoulli``, or with ``argmax`` the most likely entries (``prob1 > 1/2``)."""
    if not argmax:
        return symmetric_upper_bernoulli(key, prob1, node_mask)
    upper = ((prob1 > 0.5) & pair_mask(node_mask)).astype(jnp.float32)
    return upper + jnp.swapaxes(upper, -1, -2)


def step_algorithms(beta_bar_from: np.ndarray, algorithm: int, alg1_below: float = 0.0,
                    alg2_below: float = 0.0) -> list[int]:
    """The algorithm of each step of a hybrid sampler, from the level it starts at
    (``beta_bar_from [K]``, descending): Algorithm 1 at ``beta_bar <= alg1_below``,
    Algorithm 2 at ``beta_bar <= alg2_below`` (0: off), ``algorithm`` elsewhere."""
    if alg1_below > 0 and alg2_below > 0:
        raise ValueError("alg1_below and alg2_below: set at most one of them")
    out = []
    for b in np.asarray(beta_bar_from, np.float64):
        if alg1_below > 0 and b <= alg1_below:
            out.append(1)
        elif alg2_below > 0 and b <= alg2_below:
            out.append(2)
        else:
            out.append(int(algorithm))
    return out


def check_algorithm1_levers(algs, levers: SamplerLevers) -> None:
    """ValueError naming the lever when ``target_guidance`` or ``renoise_mix`` is on but no
    step of the plan ``algs`` (``step_algorithms``) is an Algorithm 1 step, the only
    steps that read them (they would be silently ignored)."""
    if 1 in algs:
        return
    for name in ("target_guidance", "renoise_mix"):
        if getattr(levers, name) > 0.0:
            raise ValueError(f"{name} acts in Algorithm 1 steps and this sampler has none "
                             f"(use algorithm=1, or alg1_below > 0 with algorithm 2; or "
                             f"--option {name}=0)")


def sample_graphs(denoise_fn: DenoiseFn, key: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, algorithm: int = 2, num_steps: int | None = None,
                  return_chain: bool = False, grid: str = "trained",
                  argmax_last: bool = False, final_pass: bool = False, rho: float = 0.5,
                  levers: SamplerLevers | None = None, self_condition: bool = False,
                  **lever_values):
    """Run the reverse chain with ``jax.lax.scan`` for one batch.

    ``key`` is one key that the batch shares, or ``[B]`` keys, one per graph (typed keys;
    legacy raw uint32 ones are wrapped): then graph
    ``b``'s draws use only ``keys[b]`` (the same draws as running it alone), while the
    denoiser is still called once per step on the whole batch.

    Args:
      denoise_fn: see ``DenoiseFn``.
      node_mask: ``[B, N]`` bool, the requested node counts as prefix masks.
      schedule: the trained schedule; ``num_steps`` and ``grid`` pick the visited
        levels (``sampling_grid``).
      algorithm: 1, 2 or 3 (see ``reverse_step``; 3 takes no hybrid lever).
      return_chain: also return every intermediate adjacency.
      argmax_last: the last step (to level 0) takes the most likely ``A_0`` instead of
        a draw.
      final_pass: after level 0, call the model once more at ``noise_level = 0`` on
        the result and draw ``A_0`` from its prediction (the mode with ``argmax_last``).
      rho: the prior's edge probability (``q_sample``).
      levers: the hybrid samplers and the levers of ``reverse_step`` (``SamplerLevers``;
        None: all off); ``lever_values`` (e.g. ``logit_scale=0.9``) set single ones.
      self_condition: for a self-conditioned denoiser (PPGN ``self_condition``): each
        call gets the previous call's ``sigmoid(logits)`` (before any lever) as its fifth
        argument, zeros at the first step.
    Returns:
      ``A_0`` ``[B, N, N]``; with ``return_chain`` a tuple ``(A_0, chain)`` where
      ``chain`` is ``[K+1, B, N, N]`` from ``A_T`` down to ``A_0`` (the final pass, if
      any, replaces the last entry).
    """
    if algorithm not in SAMPLER_ALGORITHMS:
        raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of "
                         f"{SAMPLER_ALGORITHMS}")
    levers = dataclasses.replace(levers or SamplerLevers(), **lever_values)
    if algorithm == 3 and (levers.alg1_below > 0 or levers.alg2_below > 0):
        raise ValueError("algorithm 3 draws each pair once along the whole chain: no hybrid "
                         "(alg1_below, alg2_below)")
    t_lv, bb = sampling_grid(schedule, num_steps, grid)
    K = len(t_lv) - 1
    n_scan = K - 1 if argmax_last else K
    xs = (jnp.arange(K, dtype=jnp.int32), jnp.asarray(t_lv[:-1], jnp.int32),
          jnp.asarray(bb[:-1], jnp.float32), jnp.asarray(bb[1:], jnp.float32))
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # legacy raw uint32 key(s)
        key = jax.random.wrap_key_data(key)
    per_graph = key.ndim == 1  # keys [B]: graph b draws only from keys[b]
    if per_graph and key.shape[0] != node_mask.shape[0]:
        raise ValueError(f"{key.shape[0]} per-graph keys for {node_mask.shape[0]} graphs")

    def draw(k, fn, *arrays):
        """``fn(key_k, *arrays)``; with per-graph keys one call per graph ``[1, ...]``."""
        if not per_graph:
            return fn(jax.random.fold_in(key, k), *arrays)
        one = lambda kb, *a: fn(jax.random.fold_in(kb, k), *(x[None] for x in a))[0]
        return jax.vmap(one)(key, *arrays)

    adj_T = draw(10_000_019, lambda kk, m: sample_prior(kk, m, rho), node_mask)
    # Algorithm 3: each pair's decode level, fixed for the whole chain
    times = (draw(DECODE_TIME_STREAM, decode_times, node_mask),) if algorithm == 3 else ()
    algs = step_algorithms(bb[:-1], algorithm, levers.alg1_below, levers.alg2_below)
    check_algorithm1_levers(algs, levers)

    def step(k, carry, t, b_now, b_prev, alg, argmax=False):
        """``(adj, estimate) -> (adj at the next level, estimate for the next call)``;
        ``estimate`` is None without ``self_condition``."""
        adj, est = carry
        run = lambda fn, kk, a, m, *v: reverse_step(
            fn, kk, a, m, t, b_now, b_prev, alg, argmax=argmax, rho=rho, levers=levers,
            decode_time=v[0] if v else None)
        if not per_graph and not self_condition:
            return run(denoise_fn, jax.random.fold_in(key, k), adj, node_mask, *times), est
        logits = batched_logits(adj, t, b_now, est)
        if per_graph:
            new = draw(k, lambda kk, a, m, lg, *v: run(lambda *_: lg, kk, a, m, *v), adj,
                       node_mask, logits, *times)
        else:
            new = run(lambda *_: logits, jax.random.fold_in(key, k), adj, node_mask, *times)
        return new, next_estimate(logits, est)

    def batched_logits(adj, t, level, est):
        """One denoiser call on the whole batch; each graph's draw then reads its row."""
        b = adj.shape[0]
        return denoise_fn(adj, node_mask, jnp.full((b,), t, jnp.int32),
                          jnp.full((b,), level, jnp.float32), *(() if est is None else (est,)))

    def next_estimate(logits, est):
        return None if est is None else jax.nn.sigmoid(logits.astype(jnp.float32))

    def body_for(alg):
        def body(carry, x):
            new = step(*x[:1], carry, *x[1:], alg)
            return new, (new[0] if return_chain else None)
        return body

    carry = (adj_T, jnp.zeros(adj_T.shape, jnp.float32) if self_condition else None)
    steps = []
    lo = 0
    while lo < n_scan:  # one scan per run of steps that share an algorithm
        hi = lo
        while hi < n_scan and algs[hi] == algs[lo]:
            hi += 1
        carry, chain = jax.lax.scan(body_for(algs[lo]), carry,
                                    jax.tree_util.tree_map(lambda a: a[lo:hi], xs))
        steps += [chain] if return_chain else []
        lo = hi
    if argmax_last:  # the step to level 0, taking the mode
        i, t, b_now, b_prev = (a[K - 1] for a in xs)
        carry = step(i, carry, t, b_now, b_prev, algs[K - 1], argmax=True)
        steps.append(carry[0][None])
    adj0, est = carry
    if final_pass:
        if per_graph or self_condition:
            logits = batched_logits(adj0, 0, 0.0, est)
            last = lambda kk, a, m, lg: denoised_draw(lambda *_: lg, kk, a, m, argmax_last)
            adj0 = (draw(K, last, adj0, node_mask, logits) if per_graph else
                    last(jax.random.fold_in(key, K), adj0, node_mask, logits))
        else:
            adj0 = denoised_draw(denoise_fn, jax.random.fold_in(key, K), adj0, node_mask,
                                 argmax_last)
    if return_chain:
        chain = jnp.concatenate([adj_T[None]] + steps, axis=0)
        return adj0, chain.at[-1].set(adj0)
    return adj0


def sample_graphs_vmapped(denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array,
                          schedule: NoiseSchedule, algorithm: int = 2,
                          num_steps: int | None = None, return_chain: bool = False,
                          **grid_options):
    """Per-graph sampler: graph ``b`` uses only ``keys[b]`` (``sample_graphs`` with per-graph
    keys; the denoiser runs once per step on the whole batch).

    A graph's sample therefore does not depend on which other graphs share its
    batch, so sampling in chunks reproduces sampling all at once. ``grid_options``
    are ``sample_graphs``'s keyword options (``grid``, ``argmax_last``, ``final_pass``,
    ``rho``, ``levers``, ``self_condition`` and single levers such as ``logit_scale``).

    Args:
      keys: ``[B]`` typed PRNG keys; node_mask: ``[B, N]`` bool.
    Returns: ``[B, N, N]`` (and ``[B, K+1, N, N]`` chains with ``return_chain``).
    """

    out = sample_graphs(denoise_fn, keys, node_mask, schedule, algorithm, num_steps,
                        return_chain, **grid_options)
    if return_chain:
        return out[0], jnp.swapaxes(out[1], 0, 1)
    return out


# ----------------------------------------------------------------------------
# The process


@dataclasses.dataclass(frozen=True)
class BitFlipSampler(Sampler):
    """Algorithm 1 or 2 over ``num_steps`` levels of a ``BitFlipProcess`` (``sample_graphs``)."""

    process: "BitFlipProcess"
    num_steps: int
    algorithm: int
    return_chain: bool = False
    grid: str = "trained"
    argmax_last: bool = False
    final_pass: bool = False
    levers: SamplerLevers = SamplerLevers()

    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array):
        return sample_graphs_vmapped(denoise_fn, keys, node_mask, self.process.schedule,
                                     self.algorithm, self.num_steps, self.return_chain,
                                     grid=self.grid, argmax_last=self.argmax_last,
                                     final_pass=self.final_pass, rho=self.process.prior_density,
                                     levers=self.levers,
                                     self_condition=self.process.self_condition)

    @property
    def info(self) -> dict:
        return {"process": self.process.name, "num_steps": self.num_steps,
                "algorithm": self.algorithm, "grid": self.grid,
                "argmax_last": self.argmax_last, "final_pass": self.final_pass,
                **self.levers.as_dict(),
                **({"self_condition": True} if self.process.self_condition else {})}


@dataclasses.dataclass(frozen=True)
class BitFlipProcess(NoiseProcess):
    """The paper's bit-flip diffusion as a ``NoiseProcess``.

    Attributes:
      schedule_name: ``"linear"`` (the paper) or ``"cosine"`` beta_bar schedule.
      num_timesteps: T, the trained levels.
      loss_type: ``"simple"`` (L_simple) or ``"vb"`` (L_vb).
      continuous_time: L_simple on ``beta_bar ~ U(0, 1/2)`` instead of the T levels.
      algorithm: the sampler's default algorithm (1, 2 or 3).
      grid, argmax_last, final_pass: the sampler's defaults for the visited levels
        (``sampling_grid``; off the trained grid needs ``continuous_time``), the mode
        at the last step and the corrector pass at ``beta_bar = 0`` (``sample_graphs``).
      prior_density: ``rho``, the edge probability of the prior ``A_T ~ ER(rho)``; 1/2
        is the paper's uniform prior, the training split's density the marginal prior.
      train_grid: with ``continuous_time``, how training draws ``beta_bar``:
        ``"uniform"`` (U(0, 1/2)), ``"power:GAMMA"`` or ``"mid:GAMMA"``
        (``training_levels``).
      simple_weighting: L_simple's per-level weight, ``"bond_taylor"`` (the paper's
        ``1 - 2 beta_bar + 1/T``) or ``"flat"`` (``simple_weight``).
      alg1_below, alg2_below, renoise_mix, logit_scale, logit_scale_above,
        target_guidance: the sampler's default ``SamplerLevers`` (``levers``).
      self_condition: the denoiser is self-conditioned (PPGN ``self_condition``, set from
        ``config.model.ppgn.self_condition``): training runs it twice
        (``training_loss``), the sampler feeds it its previous estimate
        (``sample_graphs``). The ELBO, graph completion and the per-level diagnostics
        (``ddgjax.level_diagnostics``) call it without an estimate (zeros: the
        unconditioned mode it is also trained in), so they score that mode.
      unroll_prob: step-unrolled training (``unrolled_inputs``): the probability that a
        training graph's input is one step of this process's own sampler (its grid,
        algorithm and levers over ``unroll_steps`` steps) from a level above, made by the
        model itself, instead of a draw of ``q(A_t | A_0)``. 0 (the paper's): off.
      unroll_steps: the sampler's step count ``K`` that unrolled training imitates
        (``config.sample.num_steps``; 0: ``num_timesteps``).
    """

    schedule_name: str = "linear"
    num_timesteps: int = 32
    loss_type: str = "simple"
    continuous_time: bool = False
    algorithm: int = 2
    grid: str = "trained"
    argmax_last: bool = False
    final_pass: bool = False
    prior_density: float = 0.5
    train_grid: str = "uniform"
    simple_weighting: str = "bond_taylor"
    alg1_below: float = 0.0
    alg2_below: float = 0.0
    renoise_mix: float = 0.0
    logit_scale: float = 1.0
    logit_scale_above: float = 0.0
    target_guidance: float = 0.0
    self_condition: bool = False
    unroll_prob: float = 0.0
    unroll_steps: int = 0

    name = "discrete"
    sampler_options = ("algorithm", "grid", "argmax_last", "final_pass", "alg1_below",
                       "alg2_below", "renoise_mix", "logit_scale", "logit_scale_above",
                       "target_guidance")

    def __post_init__(self):
        if self.loss_type not in LOSSES:
            raise ValueError(f"config.diffusion.loss: unknown loss {self.loss_type!r}; "
                             f"expected one of {LOSSES}")
        if self.continuous_time and self.loss_type != "simple":
            raise ValueError("config.diffusion.continuous_time: only defined for the 'simple' loss")
        if self.algorithm not in SAMPLER_ALGORITHMS:
            raise ValueError(f"config.sample.algorithm: expected 1, 2 or 3 (0: by loss), "
                             f"got {self.algorithm!r}")
        if self.schedule_name not in SCHEDULES:
            raise ValueError(f"config.diffusion.schedule: unknown schedule "
                             f"{self.schedule_name!r}; expected one of {SCHEDULES}")
        make_schedule(self.schedule_name, self.num_timesteps)  # validates T
        self._check_grid(self.grid)
        try:
            train_kind = parse_grid(self.train_grid)[0]
        except ValueError:
            train_kind = None
        if train_kind not in ("uniform", "power", "mid"):
            raise ValueError(f"config.diffusion.train_grid: expected one of {TRAIN_GRIDS} "
                             f"(GAMMA > 0), got {self.train_grid!r}")
        if self.simple_weighting not in SIMPLE_WEIGHTINGS:
            raise ValueError(f"config.diffusion.simple_weighting: expected one of "
                             f"{SIMPLE_WEIGHTINGS}, got {self.simple_weighting!r}")
        if self.simple_weighting != "bond_taylor" and self.loss_type != "simple":
            raise ValueError("config.diffusion.simple_weighting: weights L_simple only "
                             "(config.diffusion.loss='simple')")
        self.levers  # noqa: B018 - validates the lever defaults (ValueError naming one)
        if self.train_grid != "uniform" and not self.continuous_time:
            raise ValueError("config.diffusion.train_grid: a training grid other than 'uniform' "
                             "needs config.diffusion.continuous_time=True")
        if not 0.0 < self.prior_density < 1.0:
            raise ValueError(f"config.diffusion.prior_density: expected a value in (0, 1), got "
                             f"{self.prior_density} (0 means: set from the training data)")
        if self.unroll_prob:
            if not (self.continuous_time and self.loss_type == "simple"):
                raise ValueError("config.diffusion.unroll_prob: step-unrolled training needs "
                                 "L_simple in continuous time (config.diffusion.loss='simple', "
                                 "continuous_time=True)")
            if self.self_condition:
                raise ValueError("config.diffusion.unroll_prob: not with self-conditioning "
                                 "(config.model.ppgn.self_condition)")
            if self.alg1_below > 0 or self.alg2_below > 0:
                raise ValueError("config.diffusion.unroll_prob: the unrolled step takes the "
                                 "sampler's one algorithm (config.sample.algorithm), not a "
                                 "hybrid: set config.sample.alg1_below and alg2_below to 0")
            self.unroll_spec  # noqa: B018 - validates the probability and the step count

    @property
    def unroll_spec(self) -> "UnrollSpec | None":
        """The ``UnrollSpec`` of ``unroll_prob`` and the sampler's defaults (None when off)."""
        if not self.unroll_prob:
            return None
        t_lv, bb = sampling_grid(self.schedule, int(self.unroll_steps) or self.num_timesteps,
                                 self.grid)
        return UnrollSpec(float(self.unroll_prob), tuple(int(t) for t in t_lv),
                          tuple(float(b) for b in bb), self.algorithm, self.levers)

    def _check_grid(self, grid: str) -> None:
        if parse_grid(grid)[0] != "trained" and not self.continuous_time:
            raise ValueError(f"sampling grid {grid!r} needs a model trained in continuous time "
                             "(config.diffusion.continuous_time); this one knows only its "
                             f"{self.num_timesteps} trained levels: use grid 'trained'")

    @property
    def schedule(self) -> NoiseSchedule:
        return make_schedule(self.schedule_name, self.num_timesteps)

    @property
    def levers(self) -> SamplerLevers:
        """The sampler's default levers (the process's fields of those names)."""
        return SamplerLevers(**{name: getattr(self, name) for name in LEVERS})

    def loss(self, denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array,
             node_mask: jax.Array) -> LossOutput:
        return training_loss(denoise_fn, keys, adj0, node_mask, self.schedule, self.loss_type,
                             self.continuous_time, self.prior_density, self.train_grid,
                             self.self_condition, self.unroll_spec, self.simple_weighting)

    def sampler(self, num_steps: int | None = None, return_chain: bool = False,
                **options) -> BitFlipSampler:
        """A sampler over ``num_steps`` levels (None: T). ``options`` override the process's
        defaults: ``algorithm`` (1 or 2; None or 0: the default, as
        ``config.sample.algorithm = 0`` means "by loss"), ``grid``, ``argmax_last``,
        ``final_pass``, ``alg1_below``, ``alg2_below``, ``renoise_mix``, ``logit_scale``,
        ``logit_scale_above``, ``target_guidance``
        (``sample_graphs``)."""
        self.check_sampler_options(options)
        opt = lambda name: getattr(self, name) if options.get(name) is None else options[name]
        algorithm = opt("algorithm") or self.algorithm
        if algorithm not in SAMPLER_ALGORITHMS:
            raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of "
                             f"{SAMPLER_ALGORITHMS}")
        grid = str(opt("grid") or self.grid)
        self._check_grid(grid)
        num_steps = int(num_steps or self.num_timesteps)
        _, bb = sampling_grid(self.schedule, num_steps, grid)  # validates num_steps
        levers = SamplerLevers(**{name: opt(name) for name in LEVERS})
        check_algorithm1_levers(step_algorithms(bb[:-1], int(algorithm), levers.alg1_below,
                                                levers.alg2_below), levers)
        return BitFlipSampler(self, num_steps, int(algorithm), bool(return_chain), grid,
                              bool(opt("argmax_last")), bool(opt("final_pass")), levers)


def default_algorithm(loss_type: str) -> int:
    """The paper's pairing: Algorithm 1 for L_vb, Algorithm 2 for L_simple."""
    return 1 if loss_type == "vb" else 2


def from_config(config) -> BitFlipProcess:
    """The bit-flip process of ``config.diffusion`` with the sampler defaults of
    ``config.sample`` (``algorithm`` 0: by loss; keys a run config written before they
    existed take their defaults)."""
    d = config.diffusion
    s = config.sample
    algorithm = int(s.get("algorithm", 0) or default_algorithm(d.loss))
    return BitFlipProcess(schedule_name=d.schedule, num_timesteps=int(d.num_timesteps),
                          loss_type=d.loss, continuous_time=bool(d.get("continuous_time", False)),
                          algorithm=algorithm, grid=str(s.get("grid", "trained")),
                          argmax_last=bool(s.get("argmax_last", False)),
                          final_pass=bool(s.get("final_pass", False)),
                          prior_density=prior_density(d),
                          train_grid=str(d.get("train_grid", "uniform")),
                          simple_weighting=str(d.get("simple_weighting", "bond_taylor")),
                          alg1_below=float(s.get("alg1_below", 0.0)),
                          alg2_below=float(s.get("alg2_below", 0.0)),
                          renoise_mix=float(s.get("renoise_mix", 0.0)),
                          logit_scale=float(s.get("logit_scale", 1.0)),
                          logit_scale_above=float(s.get("logit_scale_above", 0.0)),
                          target_guidance=float(s.get("target_guidance", 0.0)),
                          self_condition=bool(config.model.name == "ppgn" and config.model.get(
                              "ppgn", {}).get("self_condition", False)),
                          unroll_prob=float(d.get("unroll_prob", 0.0)),
                          unroll_steps=int(s.get("num_steps", 0) or 0))


PRIORS = ("uniform", "marginal")


def prior_density(diffusion_cfg) -> float:
    """``rho`` of ``config.diffusion``: 1/2 for the uniform prior, ``prior_density`` for
    the marginal one (ValueError if unknown or not yet set from the data)."""
    prior = diffusion_cfg.get("prior", "uniform")
    if prior not in PRIORS:
        raise ValueError(f"config.diffusion.prior: expected one of {PRIORS}, got {prior!r}")
    if prior == "uniform":
        return 0.5
    rho = float(diffusion_cfg.get("prior_density", 0.0))
    if rho == 0.0:
        raise ValueError("config.diffusion.prior_density: the marginal prior needs the edge "
                         "density; training sets it from the training split "
                         "(ddgjax.processes.fit_to_data)")
    return rho


def fit_to_data(config, adj: np.ndarray, node_mask: np.ndarray):
    """``config`` with ``diffusion.prior_density`` set to the edge density of the real
    strict-upper pairs of ``adj [G, N, N]`` where the marginal prior asks for it (else
    ``config`` itself)."""
    d = config.diffusion
    if d.get("prior", "uniform") != "marginal" or float(d.get("prior_density", 0.0)) != 0.0:
        return config
    pairs = pair_mask(np.asarray(node_mask))
    density = float(np.asarray(adj)[pairs].sum() / max(pairs.sum(), 1))
    config = config.copy_and_resolve_references()
    config.diffusion.prior_density = density
    return config
