"""The negative ELBO of clean graphs under a bit-flip model, by Monte-Carlo over levels.

For a grid of levels ``t_K = T > ... > t_1 > t_0 = 0`` (noise levels ``bb_k``, descending
``bb_K = 1/2 ... bb_0 = 0``; ``schedules.sampling_grid``), the reverse model
``p_theta(A_{t_{k-1}} | A_{t_k})`` of the sampler's Algorithm 1 (or 2) gives

    -log p_theta(A_0) <= L = L_prior + sum_{k=2..K} E_q L_k + E_q L_1,
    L_prior = KL(q(A_T | A_0) || p(A_T))                                (0 at bb_T = 1/2),
    L_k     = KL(q(A_{t_{k-1}} | A_{t_k}, A_0) || p_theta(A_{t_{k-1}} | A_{t_k})),
    L_1     = -log p_theta(A_0 | A_{t_1}),

each expectation over ``A_{t_k} ~ q(A_{t_k} | A_0)`` and every term a sum over the real
strict-upper pairs (nats). The estimator (``nelbo_draws``) draws ``S`` independent
``A_{t_k}`` at *every* level and averages: unbiased, with variance ``sum_k var_k / S``,
estimated from the per-level sample variances (``summarize_draws``). docs/method.md,
"Likelihood".

Shapes: ``B`` graphs padded to ``N`` nodes; per-graph keys ``[B]``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.graphs import pair_mask
from ddgjax.processes.base import DenoiseFn
from ddgjax.processes.bitflip.losses import vb_terms
from ddgjax.processes.bitflip.transitions import (ALGORITHMS, binary_kl, q_marginal_prob1,
                                                  q_sample)


def level_term(denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array, node_mask: jax.Array,
               t_index, beta_bar_t, beta_bar_prev, rho: float = 0.5,
               algorithm: int = 1) -> jax.Array:
    """One draw of the level term of ``L`` per graph (nats, summed over its real pairs).

    ``A_t ~ q(A_t | A_0)``; the term is ``KL(q(a_prev | a_t, a_0) || p_theta(a_prev | A_t))``,
    or ``-log p_theta(a_0 | A_t)`` when ``beta_bar_prev = 0`` (the reconstruction).

    Args:
      keys: ``[B]`` per-graph keys; adj0 ``[B, N, N]``; node_mask ``[B, N]``.
      t_index, beta_bar_t, beta_bar_prev: scalars shared by the batch (``t_index`` is
        what level-indexed models read).
    Returns: ``float32[B]``.
    """
    B = adj0.shape[0]
    bt = jnp.full((B,), beta_bar_t, jnp.float32)
    adj_t = q_sample(keys, adj0, node_mask, bt, rho)
    logits = denoise_fn(adj_t, node_mask, jnp.full((B,), t_index, jnp.int32),
                        bt).astype(jnp.float32)
    terms = vb_terms(logits, adj0, adj_t, bt, jnp.full((B,), beta_bar_prev, jnp.float32), rho,
                     algorithm)
    return jnp.sum(jnp.where(pair_mask(node_mask), terms, 0.0), axis=(1, 2))


def prior_term(adj0: jax.Array, node_mask: jax.Array, beta_bar_top: float,
               rho: float = 0.5) -> jax.Array:
    """``L_prior = KL(q(A_T | A_0) || ER(rho))`` per graph (nats; exactly 0 at bb_T = 1/2).
    adj0 ``[B, N, N]``, node_mask ``[B, N]`` -> ``[B]``."""
    q1 = q_marginal_prob1(adj0, beta_bar_top, rho)
    q0 = q_marginal_prob1(1.0 - adj0, beta_bar_top, 1.0 - rho)
    kl = binary_kl(q0, q1, jnp.full_like(q0, 1.0 - rho), jnp.full_like(q1, rho))
    return jnp.sum(jnp.where(pair_mask(node_mask), kl, 0.0), axis=(1, 2))


def nelbo_draws(denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                t_index: np.ndarray, beta_bar: np.ndarray, num_draws: int, rho: float = 0.5,
                algorithm: int = 1) -> jax.Array:
    """``S = num_draws`` draws of every level term: ``float32[K, S, B]`` nats per graph.

    Level ``k = 1..K`` (row ``k - 1``) is the step ``t_k -> t_{k-1}`` of the descending grid
    ``(t_index, beta_bar)`` (``[K + 1]`` each, from ``bb = 1/2`` down to ``bb = 0``). Draw
    ``s`` of level ``k`` for graph ``b`` uses only ``fold_in(keys[b], (k - 1) S + s)``, so a
    graph's estimate does not depend on its batch. One ``lax.scan`` over the ``K S`` draws,
    one network call of ``B`` graphs each.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown reverse model (algorithm) {algorithm!r}; expected 1 or 2")
    if num_draws < 1:
        raise ValueError(f"num_draws: expected a positive number of draws, got {num_draws}")
    asc_t = np.asarray(t_index)[::-1]      # level k at position k: t_0 = 0, ..., t_K = T
    asc_b = np.asarray(beta_bar, np.float64)[::-1]
    K = len(asc_t) - 1
    rep = lambda a: np.repeat(a, num_draws)
    xs = (jnp.arange(K * num_draws, dtype=jnp.int32), jnp.asarray(rep(asc_t[1:]), jnp.int32),
          jnp.asarray(rep(asc_b[1:]), jnp.float32), jnp.asarray(rep(asc_b[:-1]), jnp.float32))

    def body(carry, x):
        i, t, b_t, b_prev = x
        k = jax.vmap(lambda kk: jax.random.fold_in(kk, i))(keys)
        return carry, level_term(denoise_fn, k, adj0, node_mask, t, b_t, b_prev, rho, algorithm)

    _, out = jax.lax.scan(body, None, xs)
    return out.reshape(K, num_draws, adj0.shape[0])


def summarize_draws(draws_ksb: np.ndarray, prior_b: np.ndarray | None = None) -> dict:
    """Per-graph estimate and Monte-Carlo standard error from ``nelbo_draws``.

    ``L_hat = L_prior + sum_k mean_s(draw_ks)``; its variance is ``sum_k var_k / S`` with
    ``var_k`` the unbiased sample variance of level ``k``'s draws (NaN for ``S = 1``).
    Returns ``{"nats": [B], "se_nats": [B], "per_level_nats": [B, K]}`` (float64).
    """
    d = np.asarray(draws_ksb, np.float64)
    K, S, B = d.shape
    per_level = d.mean(axis=1).T
    total = per_level.sum(axis=1) + (0.0 if prior_b is None else np.asarray(prior_b, np.float64))
    if S > 1:
        se = np.sqrt((d.var(axis=1, ddof=1) / S).sum(axis=0))
    else:
        se = np.full(B, np.nan)
    return {"nats": total, "se_nats": se, "per_level_nats": per_level}
