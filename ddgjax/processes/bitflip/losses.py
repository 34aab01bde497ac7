"""The bit-flip process's training losses: L_vb and L_simple (docs/method.md, "Losses").

``training_loss`` draws one level per graph (``t ~ U{1..T}``, or in continuous time
``beta_bar`` from ``training_levels``), noises the graph with ``q_sample``, calls the
denoiser once and scores its logits of ``p_theta(A_0 | A_t)``:

* L_vb: ``KL(q(a_{t-1} | a_t, a_0) || p_theta(a_{t-1} | A_t))`` per pair, and the
  reconstruction ``-log p_theta(a_0 | A_1)`` at ``t = 1`` (``vb_terms``);
* L_simple: ``-log p_theta(a_0 | A_t)`` per pair, weighted by ``1 - 2 beta_bar_t + 1/T``
  (Bond-Taylor et al. 2021, eq. 7; ``simple_weight``).

Shapes: ``B`` graphs padded to ``N`` nodes; per-graph keys ``[B]``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.processes.base import (DenoiseFn, LossOutput, broadcast_per_graph, pair_mean_loss,
                                   per_graph_keys, per_graph_time_and_noise_keys,
                                   uniform_timestep)
from ddgjax.processes.bitflip.schedules import NoiseSchedule, parse_grid
from ddgjax.processes.bitflip.transitions import (binary_kl, binary_nll, q_posterior_probs,
                                                  q_sample, reverse_probs)

LOSSES = ("simple", "vb")
TRAIN_GRIDS = ("uniform", "power:GAMMA")


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


def simple_weight(beta_bar_t, num_timesteps: int):
    """L_simple's per-level weight ``1 - 2 beta_bar_t + 1/T`` (Bond-Taylor et al. 2021,
    eq. 7: the paper's). ``beta_bar_t`` ``[B]`` -> ``[B]``."""
    return 1.0 - 2.0 * beta_bar_t + 1.0 / num_timesteps


def training_levels(u: jax.Array, train_grid: str = "uniform") -> jax.Array:
    """Continuous-time training levels from uniform draws ``u [B]`` in [0, 1):
    ``beta_bar = u / 2`` (``"uniform"``) or ``u^GAMMA / 2`` (``"power:GAMMA"``: GAMMA > 1
    trains more at low noise), the same distortions as the sampling grids of those names."""
    try:
        kind, gamma = parse_grid(train_grid)
    except ValueError:
        kind = None
    if kind == "uniform":
        return 0.5 * u
    if kind == "power":
        return 0.5 * u ** gamma
    raise ValueError(f"unknown training grid {train_grid!r}; expected one of {TRAIN_GRIDS}")


def training_loss(denoise_fn: DenoiseFn, key: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, loss_type: str = "simple",
                  continuous_time: bool = False, rho: float = 0.5,
                  train_grid: str = "uniform") -> LossOutput:
    """One Monte-Carlo estimate of L_simple or L_vb on a batch.

    ``key`` is one key or ``[B]`` per-graph keys (with per-graph keys a graph's t and noise
    depend only on its own key). Each graph draws its own ``t ~ U{1..T}`` (or, with
    ``continuous_time`` and L_simple only, ``beta_bar = training_levels(u, train_grid)``
    with the nearest level as t_index), is noised by ``q_sample`` and denoised by
    ``denoise_fn``. Only real strict-upper pairs count: the loss is the sum of per-pair
    terms divided by the number of real pairs in the batch (``pair_mean_loss``).

    Args:
      denoise_fn: logits of ``p(A_0 | A_t)`` (see ``DenoiseFn``).
      adj0: ``[B, N, N]`` clean graphs; node_mask: ``[B, N]`` bool.
      rho: the prior's edge probability (``q_sample``).
    """
    if loss_type not in LOSSES:
        raise ValueError(f"unknown loss {loss_type!r}; expected one of {LOSSES}")
    if continuous_time and loss_type != "simple":
        raise ValueError("continuous_time is only defined for the 'simple' loss")
    T = schedule.num_timesteps
    keys = per_graph_keys(key, adj0.shape[0])
    u_t, key_noise = per_graph_time_and_noise_keys(keys)
    if continuous_time:
        bb_t = training_levels(u_t, train_grid)
        t_index = jnp.clip(jnp.round(bb_t / 0.5 * T), 1, T).astype(jnp.int32)
        bb_prev = bb_t  # unused by L_simple
    else:
        bb_table = jnp.asarray(schedule.beta_bar)
        t_index = uniform_timestep(u_t, T)
        bb_t, bb_prev = bb_table[t_index], bb_table[t_index - 1]
    adj_t = q_sample(key_noise, adj0, node_mask, bb_t, rho)
    logits = denoise_fn(adj_t, node_mask, t_index, bb_t).astype(jnp.float32)
    if loss_type == "simple":
        terms = binary_nll(logits, adj0) * broadcast_per_graph(simple_weight(bb_t, T))
    else:
        terms = vb_terms(logits, adj0, adj_t, bb_t, bb_prev, rho)
    return pair_mean_loss(terms, node_mask, t_index)
