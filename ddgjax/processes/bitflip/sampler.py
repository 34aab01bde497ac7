"""The bit-flip samplers: the reverse step and the reverse chain (``jax.lax.scan``).

From ``A_T ~ ER(rho)`` the chain walks a descending grid of levels
(``schedules.sampling_grid``) to ``A_0``; each step calls the denoiser once on the whole
batch and draws the next level per pair (docs/method.md, "Sampling"):

* Algorithm 1: ``A_{t-1} ~ p_theta(A_{t-1} | A_t)``, the posterior marginalised over the
  model's ``p_theta(A_0 | A_t)``;
* Algorithm 2: ``Ã_0 ~ p_theta(A_0 | A_t)``, then ``A_{t-1} ~ q(A_{t-1} | Ã_0)``.

Two levers (``SamplerLevers``) change a step: ``logit_scale`` multiplies the denoiser's
logits, ``renoise_mix`` mixes Algorithm 2's draw into Algorithm 1 steps per pair.

Keys: with ``[B]`` per-graph keys, graph ``b`` draws only from ``keys[b]`` (step ``k``
from ``fold_in(keys[b], k)``, the prior from ``fold_in(keys[b], PRIOR_STREAM)``), so a
graph's sample does not depend on the rest of its batch.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from ddgjax.processes.base import DenoiseFn, broadcast_per_graph
from ddgjax.processes.bitflip.schedules import NoiseSchedule, sampling_grid
from ddgjax.processes.bitflip.transitions import (ALGORITHMS, p_prev_probs, q_marginal_prob1,
                                                  q_sample, sample_prior,
                                                  symmetric_upper_bernoulli)

# fold_in stream of a graph's key for its prior draw A_T (steps use streams 0 .. K-1)
PRIOR_STREAM = 10_000_019


@dataclasses.dataclass(frozen=True)
class SamplerLevers:
    """The optional levers of the bit-flip samplers; the defaults switch both off.

    Attributes:
      renoise_mix: in an Algorithm 1 step, each pair independently takes Algorithm 2's
        draw with this probability. Per pair, Algorithm 2's draw is Bernoulli of
        ``q_marginal_prob1(p_theta(a_0 = 1 | A_t), beta_bar_prev)``, so the mixture is one
        Bernoulli draw of the mixed probability: a stochastic corrector in the spirit of
        DeFoG's detailed-balance rate (it redraws the pair from q(a_{t-1} | a_0 ~ p_theta)).
      logit_scale: multiplies the denoiser's logits before use (> 1 sharpens
        ``p_theta(A_0 | A_t)`` towards its mode, < 1 flattens it).

    Construction checks the ranges and raises ValueError naming the lever.
    """

    renoise_mix: float = 0.0
    logit_scale: float = 1.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, float(value))
            except (TypeError, ValueError):
                raise ValueError(f"{f.name}: expected a number, got {value!r}") from None
        if not 0.0 <= self.renoise_mix <= 1.0:
            raise ValueError(f"renoise_mix: expected a probability in [0, 1], got "
                             f"{self.renoise_mix}")
        if not self.logit_scale > 0.0:
            raise ValueError(f"logit_scale: expected a positive factor, got {self.logit_scale}")

    def check_algorithm(self, algorithm: int) -> None:
        """ValueError naming ``renoise_mix`` when it is on but ``algorithm`` is not 1, the
        only algorithm that reads it (it would be silently ignored)."""
        if self.renoise_mix > 0.0 and algorithm != 1:
            raise ValueError(f"renoise_mix: acts only in Algorithm 1 steps, and this sampler "
                             f"runs Algorithm {algorithm} (use algorithm 1, or renoise_mix 0)")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


LEVERS = tuple(f.name for f in dataclasses.fields(SamplerLevers))


def reverse_step(denoise_fn: DenoiseFn, key: jax.Array, adj_t: jax.Array, node_mask: jax.Array,
                 t_index: jax.Array, beta_bar_t: jax.Array, beta_bar_prev: jax.Array,
                 algorithm: int, rho: float = 0.5,
                 levers: SamplerLevers = SamplerLevers()) -> jax.Array:
    """One reverse step from level t to level t_prev (all graphs of the batch share them).

    Algorithm 1: ``A_{t-1} ~ p_theta(A_{t-1} | A_t)`` (with ``levers.renoise_mix``, each
    pair's probability mixed with Algorithm 2's). Algorithm 2: ``Ã_0 ~ p_theta(A_0 | A_t)``,
    then ``A_{t-1} ~ q(A_{t-1} | Ã_0)``. ``levers.logit_scale`` multiplies the logits first.

    Args: adj_t ``[B,N,N]``; node_mask ``[B,N]``; t_index, beta_bar_t, beta_bar_prev scalars;
      key: one key for the batch.
    Returns: ``[B,N,N]`` 0/1 adjacency at level t_prev.
    """
    B = adj_t.shape[0]
    t_vec = jnp.full((B,), t_index, jnp.int32)
    bt = jnp.full((B,), beta_bar_t, jnp.float32)
    bp = jnp.full((B,), beta_bar_prev, jnp.float32)
    logits = denoise_fn(adj_t, node_mask, t_vec, bt).astype(jnp.float32)
    if levers.logit_scale != 1.0:
        logits = logits * levers.logit_scale
    k1, k2 = jax.random.split(key)
    if algorithm == 1:
        _, p1 = p_prev_probs(logits, adj_t, broadcast_per_graph(bt), broadcast_per_graph(bp),
                             rho)
        if levers.renoise_mix > 0.0:
            mix = levers.renoise_mix
            renoised = q_marginal_prob1(jax.nn.sigmoid(logits), broadcast_per_graph(bp), rho)
            p1 = (1.0 - mix) * p1 + mix * renoised
        return symmetric_upper_bernoulli(k1, p1, node_mask)
    if algorithm == 2:
        x0 = symmetric_upper_bernoulli(k1, jax.nn.sigmoid(logits), node_mask)
        return q_sample(k2, x0, node_mask, bp, rho)
    raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of {ALGORITHMS}")


def sample_graphs(denoise_fn: DenoiseFn, key: jax.Array, node_mask: jax.Array,
                  schedule: NoiseSchedule, algorithm: int = 2, num_steps: int | None = None,
                  return_chain: bool = False, grid: str = "trained", rho: float = 0.5,
                  levers: SamplerLevers = SamplerLevers()):
    """Run the reverse chain with ``jax.lax.scan`` for one batch.

    ``key`` is one key that the batch shares, or ``[B]`` keys, one per graph (typed keys;
    legacy raw uint32 ones are wrapped): then graph ``b``'s draws use only ``keys[b]``
    (the same draws as running it alone), while the denoiser is still called once per
    step on the whole batch.

    Args:
      denoise_fn: see ``DenoiseFn``.
      node_mask: ``[B, N]`` bool, the requested node counts as prefix masks.
      schedule: the trained schedule; ``num_steps`` and ``grid`` pick the visited
        levels (``sampling_grid``).
      algorithm: 1 or 2 (``reverse_step``).
      return_chain: also return every intermediate adjacency.
      rho: the prior's edge probability (``q_sample``).
      levers: ``SamplerLevers`` (default: both off).
    Returns:
      ``A_0`` ``[B, N, N]``; with ``return_chain`` a tuple ``(A_0, chain)`` where
      ``chain`` is ``[K+1, B, N, N]`` from ``A_T`` down to ``A_0``.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of "
                         f"{ALGORITHMS}")
    levers.check_algorithm(algorithm)
    t_lv, bb = sampling_grid(schedule, num_steps, grid)
    K = len(t_lv) - 1
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

    def body(adj, x):
        k, t, b_now, b_prev = x
        step = lambda fn, kk, a, m: reverse_step(fn, kk, a, m, t, b_now, b_prev, algorithm,
                                                 rho=rho, levers=levers)
        if per_graph:  # one denoiser call on the whole batch; each graph's draw reads its row
            b = adj.shape[0]
            logits = denoise_fn(adj, node_mask, jnp.full((b,), t, jnp.int32),
                                jnp.full((b,), b_now, jnp.float32))
            new = draw(k, lambda kk, a, m, lg: step(lambda *_: lg, kk, a, m), adj, node_mask,
                       logits)
        else:
            new = step(denoise_fn, jax.random.fold_in(key, k), adj, node_mask)
        return new, (new if return_chain else None)

    adj_T = draw(PRIOR_STREAM, lambda kk, m: sample_prior(kk, m, rho), node_mask)
    adj0, chain = jax.lax.scan(body, adj_T, xs)
    if return_chain:
        return adj0, jnp.concatenate([adj_T[None], chain], axis=0)
    return adj0


def sample_graphs_vmapped(denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array,
                          schedule: NoiseSchedule, algorithm: int = 2,
                          num_steps: int | None = None, return_chain: bool = False,
                          grid: str = "trained", rho: float = 0.5,
                          levers: SamplerLevers = SamplerLevers()):
    """Per-graph sampler: graph ``b`` uses only ``keys[b]`` (``sample_graphs`` with per-graph
    keys; the denoiser runs once per step on the whole batch), so sampling in chunks
    reproduces sampling all at once.

    Args:
      keys: ``[B]`` typed PRNG keys; node_mask: ``[B, N]`` bool; the rest as
        ``sample_graphs``.
    Returns: ``[B, N, N]`` (and ``[B, K+1, N, N]`` chains with ``return_chain``).
    """
    out = sample_graphs(denoise_fn, keys, node_mask, schedule, algorithm, num_steps,
                        return_chain, grid, rho, levers)
    if return_chain:
        return out[0], jnp.swapaxes(out[1], 0, 1)
    return out
