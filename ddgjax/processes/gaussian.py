"""The Gaussian (continuous-state) baseline: "PPGN-Score" / "EDP-Score" of the paper's tables.

The same denoisers, training loop and sampling driver as the bit-flip process,
with a variance-preserving Gaussian process (DDPM, Ho et al. 2020) in place of
bit flips. Pure functions of arrays, like ``ddgjax.processes.bitflip``, and
``GaussianProcess``, the ``NoiseProcess`` that packages them; see
``docs/gaussian.md`` for the design and its choices.

Signal. Every real strict-upper pair carries ``x0 = 2 a - 1`` in ``{-1, +1}``,
mirrored to the lower triangle; the diagonal and every pair that touches a
padding node are 0 at every level (and so is the noise there).

Forward process. ``T`` levels (``config.diffusion.num_timesteps``) with
``alpha_bar_0 = 1 > alpha_bar_1 > ... > alpha_bar_T > 0``:

    x_t = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) eps,   eps ~ N(0, 1) per real pair.

Model. The denoiser gets ``x_t`` as its "adjacency" input, ``t_index`` (EDP-GNN's
per-level conditioning, levels ``0..T``) and ``sigma_t = sqrt(1 - alpha_bar_t)`` as
its ``noise_level`` (PPGN's diagonal channel); its output on real pairs is the predicted noise ``eps_hat``. The loss is
``|eps_hat - eps|^2`` summed over real strict-upper pairs (DDPM's L_simple), one
uniformly drawn ``t in 1..T`` per graph.

Sampling. ``K <= T`` steps over an evenly strided subset of the trained levels
(``ddgjax.processes.base.sampling_levels``), starting from ``x_T ~ N(0, 1)`` on the
real pairs. Each step from level ``t`` to level ``s < t`` is the DDIM update
(Song et al. 2021) with ``eta = 1`` by default, which is exactly the ancestral
DDPM step ``x_s ~ q(x_s | x_t, x0_hat)`` for the strided pair (t, s):

    x0_hat  = clip((x_t - sigma_t eps_hat) / sqrt(alpha_bar_t), -1, 1)
    eps_hat = (x_t - sqrt(alpha_bar_t) x0_hat) / sigma_t            # consistent with the clip
    var     = eta^2 (1 - alpha_bar_s) / (1 - alpha_bar_t) (1 - alpha_bar_t / alpha_bar_s)
    x_s     = sqrt(alpha_bar_s) x0_hat + sqrt(1 - alpha_bar_s - var) eps_hat + sqrt(var) z

The last step lands on ``s = 0`` where ``x_0 = x0_hat``; the adjacency is
``x0_hat > 0``, i.e. the last estimate of ``A = (x0 + 1) / 2`` thresholded at 1/2.

``sampler="langevin"`` instead runs EDP-GNN's annealed Langevin dynamics with the
same eps-prediction network as the score (``score_y = -eps_hat / sigma_y`` on the
variance-exploding state ``y = x_t / sqrt(alpha_bar_t)``, ``sigma_y = sigma_t /
sqrt(alpha_bar_t)``); see ``langevin_chain`` and docs/gaussian.md.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.graphs import edge_mask, pair_mask
from ddgjax.processes.base import (DenoiseFn, LossOutput, NoiseProcess, Sampler,
                                   broadcast_per_graph, pair_mean_loss, per_graph_keys,
                                   per_graph_noise,
                                   per_graph_time_and_noise_keys, sampling_levels,
                                   uniform_timestep, vmap_per_graph)

SCHEDULES = ("cosine", "linear")
SAMPLERS = ("ddpm", "langevin")
# Annealed-Langevin defaults (EDP-GNN / the paper's PPGN-Score), in adjacency units
# (A = (x0 + 1) / 2, so the signal x0 = 2 A - 1 has twice these noise levels):
# 6 levels from sigma = 1.6 down to 0.1 (geometric here; EDP-GNN's are 0.1, 0.2,
# 0.4, 0.6, 0.8, 1.6), step size eps = 0.005 (the middle of their grid 0.05 /
# 0.005 / 0.0005), noise scale 1 (their grid: 0.1 / 1.0).
LANGEVIN_DEFAULTS = {"num_levels": 6, "sigma_max": 1.6, "sigma_min": 0.1, "step_eps": 0.005,
                     "noise_scale": 1.0}


# ----------------------------------------------------------------------------
# Schedules


class GaussianSchedule(NamedTuple):
    """A variance-preserving schedule of ``T`` levels; arrays are indexed by ``t = 0..T``.

    Attributes:
      num_timesteps: T.
      alpha_bar64: ``float64[T+1]``, alpha_bar[0] = 1, strictly decreasing, alpha_bar[T] > 0.
      sqrt_alpha_bar: ``float32[T+1]``, the signal scale of ``x_t``.
      sigma: ``float32[T+1]``, ``sqrt(1 - alpha_bar)``, the noise scale of ``x_t`` and the
        noise level the denoiser receives (0 at t = 0, close to 1 at t = T).
    """

    num_timesteps: int
    alpha_bar64: np.ndarray
    sqrt_alpha_bar: np.ndarray
    sigma: np.ndarray


def linear_alpha_bar(num_timesteps: int) -> np.ndarray:
    """``float64[T+1]`` from DDPM's linear betas (1e-4 to 0.02 at T = 1000), scaled by 1000 / T.

    The scaling (Nichol & Dhariwal 2021) keeps alpha_bar_T near 4e-5 for any T; it
    needs T >= 21 so that every beta stays below 1.
    """
    scale = 1000.0 / num_timesteps
    betas = np.linspace(scale * 1e-4, scale * 0.02, num_timesteps, dtype=np.float64)
    if betas.max() >= 1.0:
        raise ValueError(f"the linear Gaussian schedule needs num_timesteps >= 21 (got "
                         f"{num_timesteps}); use the 'cosine' schedule for fewer levels")
    return np.concatenate([[1.0], np.cumprod(1.0 - betas)])


def cosine_alpha_bar(num_timesteps: int, s: float = 0.008, max_beta: float = 0.999) -> np.ndarray:
    """``float64[T+1]``: Nichol & Dhariwal's cosine schedule, per-step betas capped at ``max_beta``.

    The cap keeps alpha_bar_T (which the formula puts at exactly 0) positive.
    """
    t = np.arange(num_timesteps + 1, dtype=np.float64) / num_timesteps
    f = np.cos((t + s) / (1 + s) * np.pi / 2) ** 2
    betas = np.minimum(1.0 - f[1:] / f[:-1], max_beta)
    return np.concatenate([[1.0], np.cumprod(1.0 - betas)])


@functools.lru_cache(maxsize=64)
def make_gaussian_schedule(name: str = "cosine", num_timesteps: int = 1000) -> GaussianSchedule:
    """Build a named schedule (cached: callers must not modify its arrays).

    Raises ValueError for an unknown name or an invalid T.
    """
    if isinstance(num_timesteps, bool) or not isinstance(num_timesteps, (int, np.integer)) \
            or num_timesteps < 1:
        raise ValueError(f"num_timesteps must be a positive integer, got {num_timesteps!r}")
    if name == "cosine":
        ab = cosine_alpha_bar(int(num_timesteps))
    elif name == "linear":
        ab = linear_alpha_bar(int(num_timesteps))
    else:
        raise ValueError(f"unknown Gaussian schedule {name!r}; expected one of {SCHEDULES}")
    if not (np.all(np.diff(ab) < 0) and ab[-1] > 0):
        raise ValueError(f"Gaussian schedule {name!r} with T={num_timesteps} is not strictly "
                         "decreasing and positive")
    arrays = (ab, np.sqrt(ab).astype(np.float32), np.sqrt(1.0 - ab).astype(np.float32))
    for a in arrays:  # shared by every caller through the cache
        a.setflags(write=False)
    return GaussianSchedule(int(num_timesteps), *arrays)


# ----------------------------------------------------------------------------
# Forward process


def symmetric_normal(key: jax.Array, node_mask: jax.Array) -> jax.Array:
    """Standard normal noise on every real strict-upper pair, mirrored; 0 elsewhere.

    Args:
      key: one key (drawn jointly for the batch) or ``[B]`` keys (graph ``b`` uses only
        ``key[b]``).
      node_mask: ``[B, N]`` bool.
    Returns: ``float32[B, N, N]``, symmetric, zero diagonal and padding.
    """
    z = per_graph_noise(key, node_mask.shape + node_mask.shape[-1:], jax.random.normal)
    upper = jnp.where(pair_mask(node_mask), z, 0.0)
    return upper + jnp.swapaxes(upper, -1, -2)


def to_signal(adj: jax.Array, node_mask: jax.Array) -> jax.Array:
    """0/1 adjacency -> ``2 A - 1`` on real off-diagonal pairs, 0 elsewhere. ``[B,N,N]``."""
    return jnp.where(edge_mask(node_mask), 2.0 * adj - 1.0, 0.0)


def to_adjacency(x: jax.Array, node_mask: jax.Array) -> jax.Array:
    """Signal -> 0/1 adjacency ``x > 0`` (``A > 1/2``) on real off-diagonal pairs. ``float32``."""
    return (edge_mask(node_mask) & (x > 0)).astype(jnp.float32)


def q_sample(x0: jax.Array, eps: jax.Array, t_index: jax.Array,
             schedule: GaussianSchedule) -> jax.Array:
    """``x_t = sqrt(alpha_bar_t) x0 + sigma_t eps`` for per-graph levels ``t_index`` ``int[B]``.

    ``x0`` and ``eps`` are ``[B, N, N]`` and zero off the real pairs, so ``x_t`` is too.
    """
    sab = jnp.asarray(schedule.sqrt_alpha_bar)[t_index]
    sig = jnp.asarray(schedule.sigma)[t_index]
    return broadcast_per_graph(sab) * x0 + broadcast_per_graph(sig) * eps


def training_loss(denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array, node_mask: jax.Array,
                  schedule: GaussianSchedule) -> LossOutput:
    """One Monte-Carlo estimate of the epsilon-prediction loss on a batch.

    Graph ``b`` draws ``t ~ U{1..T}`` from ``fold_in(keys[b], 0)`` and its noise from
    ``fold_in(keys[b], 1)``. Per pair the term is ``(eps_hat - eps)^2``; only real
    strict-upper pairs count.

    Args:
      denoise_fn: ``(x_t, node_mask, t_index, sigma_t) -> eps_hat`` ``[B, N, N]``.
      keys: ``[B]`` typed PRNG keys (or one key, split per graph); adj0: ``[B, N, N]`` 0/1; node_mask: ``[B, N]`` bool.
    Returns: ``LossOutput`` (``per_graph`` summed over each graph's real pairs).
    """
    T = schedule.num_timesteps
    keys = per_graph_keys(keys, adj0.shape[0])
    u_t, key_noise = per_graph_time_and_noise_keys(keys)
    t_index = uniform_timestep(u_t, T)
    eps = symmetric_normal(key_noise, node_mask)
    x_t = q_sample(to_signal(adj0, node_mask), eps, t_index, schedule)
    sigma_t = jnp.asarray(schedule.sigma)[t_index]
    eps_hat = denoise_fn(x_t, node_mask, t_index, sigma_t).astype(jnp.float32)
    assert eps_hat.shape == adj0.shape, (eps_hat.shape, adj0.shape)
    return pair_mean_loss(jnp.square(eps_hat - eps), node_mask, t_index)


# ----------------------------------------------------------------------------
# Reverse process


class StepCoefficients(NamedTuple):
    """Per-step constants of a K-step sampler (each ``float32[K]``, ``t`` ``int32[K]``),
    computed in float64 on the host. Step ``k`` goes from level ``t[k]`` to the next
    lower level ``s``."""

    t: np.ndarray
    sigma_t: np.ndarray          # sqrt(1 - ab_t): the model's noise-level input
    inv_sqrt_ab_t: np.ndarray    # 1 / sqrt(ab_t)
    sigma_over_sqrt_ab_t: np.ndarray  # sqrt(1 - ab_t) / sqrt(ab_t)
    sqrt_ab_t: np.ndarray
    inv_sigma_t: np.ndarray
    sqrt_ab_s: np.ndarray
    eps_coef: np.ndarray         # sqrt(1 - ab_s - var)
    std: np.ndarray              # sqrt(var)


def step_coefficients(schedule: GaussianSchedule, num_steps: int | None = None,
                      eta: float = 1.0) -> StepCoefficients:
    """The constants of a ``num_steps``-step sampler (``None``: all T levels).

    ``var = eta^2 (1 - ab_s)/(1 - ab_t) (1 - ab_t/ab_s)``; ``eta = 1`` is the variance
    of the DDPM posterior ``q(x_s | x_t, x0)`` of the strided pair, ``eta = 0`` is
    deterministic DDIM.
    """
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    levels = sampling_levels(schedule.num_timesteps, num_steps)
    t, s = levels[:-1], levels[1:]
    ab = schedule.alpha_bar64
    ab_t, ab_s = ab[t], ab[s]
    one_m_t, one_m_s = 1.0 - ab_t, 1.0 - ab_s
    var = eta ** 2 * one_m_s / one_m_t * (1.0 - ab_t / ab_s)
    eps_coef = np.sqrt(np.maximum(one_m_s - var, 0.0))
    f32 = lambda a: np.asarray(a, np.float32)
    return StepCoefficients(
        t=t.astype(np.int32), sigma_t=f32(np.sqrt(one_m_t)), inv_sqrt_ab_t=f32(1 / np.sqrt(ab_t)),
        sigma_over_sqrt_ab_t=f32(np.sqrt(one_m_t / ab_t)), sqrt_ab_t=f32(np.sqrt(ab_t)),
        inv_sigma_t=f32(1 / np.sqrt(one_m_t)), sqrt_ab_s=f32(np.sqrt(ab_s)),
        eps_coef=f32(eps_coef), std=f32(np.sqrt(var)))


def reverse_step(denoise_fn: DenoiseFn, key: jax.Array, x_t: jax.Array, node_mask: jax.Array,
                 c: StepCoefficients, clip_x0: bool = True):
    """One step from level ``c.t`` to the next lower level (all graphs of the batch share it).

    Args:
      key: one key for the batch's fresh noise ``z``.
      x_t: ``[B, N, N]`` signal at level t (zero off the real pairs).
      c: a ``StepCoefficients`` whose fields are scalars (one step of the table).
      clip_x0: clip the ``x0`` estimate to ``[-1, 1]`` (DDPM's practice).
    Returns: ``(x_s, x0_hat)``, each ``[B, N, N]``, zero off the real pairs.
    """
    B = x_t.shape[0]
    t_vec = jnp.full((B,), c.t, jnp.int32)
    sig_vec = jnp.full((B,), c.sigma_t, jnp.float32)
    eps_hat = denoise_fn(x_t, node_mask, t_vec, sig_vec).astype(jnp.float32)
    x0_hat = c.inv_sqrt_ab_t * x_t - c.sigma_over_sqrt_ab_t * eps_hat
    if clip_x0:
        x0_hat = jnp.clip(x0_hat, -1.0, 1.0)
        eps_hat = (x_t - c.sqrt_ab_t * x0_hat) * c.inv_sigma_t
    z = symmetric_normal(key, node_mask)
    x_s = c.sqrt_ab_s * x0_hat + c.eps_coef * eps_hat + c.std * z
    em = edge_mask(node_mask)
    return jnp.where(em, x_s, 0.0), jnp.where(em, x0_hat, 0.0)


def sample_graphs(denoise_fn: DenoiseFn, key: jax.Array, node_mask: jax.Array,
                  schedule: GaussianSchedule, num_steps: int | None = None, eta: float = 1.0,
                  clip_x0: bool = True, return_chain: bool = False):
    """Run the K-step reverse chain with ``jax.lax.scan`` for one batch sharing ``key``.

    Args:
      node_mask: ``[B, N]`` bool, the requested node counts as prefix masks.
      num_steps: K <= T (``None``: T), evenly strided over the trained levels.
    Returns:
      ``A_0`` ``float32[B, N, N]`` 0/1 (the last ``x0`` estimate thresholded at 0, i.e.
      A at 1/2); with ``return_chain`` also ``[K+1, B, N, N]``: the thresholded states
      ``x_T > 0, ..., x_0 > 0`` (the chain's last entry is ``A_0``).
    """
    c = step_coefficients(schedule, num_steps, eta)
    steps = jnp.arange(len(c.t), dtype=jnp.int32)
    x_T = symmetric_normal(jax.random.fold_in(key, 10_000_019), node_mask)

    def body(x, xs):
        i, coef = xs
        x_s, _ = reverse_step(denoise_fn, jax.random.fold_in(key, i), x, node_mask, coef, clip_x0)
        return x_s, (to_adjacency(x_s, node_mask) if return_chain else None)

    table = StepCoefficients(*(jnp.asarray(a) for a in c))
    x0, chain = jax.lax.scan(body, x_T, (steps, table))
    # The last step goes to level 0, where var = 0 and x_0 = x0_hat exactly.
    adj0 = to_adjacency(x0, node_mask)
    if return_chain:
        return adj0, jnp.concatenate([to_adjacency(x_T, node_mask)[None], chain], axis=0)
    return adj0


def sample_graphs_vmapped(denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array,
                          schedule: GaussianSchedule, num_steps: int | None = None,
                          eta: float = 1.0, clip_x0: bool = True, return_chain: bool = False):
    """Per-graph sampler under ``jax.vmap``: graph ``b`` uses only ``keys[b]``.

    Args: keys ``[B]`` typed PRNG keys; node_mask ``[B, N]`` bool.
    Returns: ``[B, N, N]`` (and ``[B, K+1, N, N]`` chains with ``return_chain``).
    """

    return vmap_per_graph(
        lambda key, mask: sample_graphs(denoise_fn, key, mask, schedule, num_steps, eta,
                                        clip_x0, return_chain), keys, node_mask, return_chain)


# ----------------------------------------------------------------------------
# Annealed Langevin dynamics (EDP-GNN / NCSN style) with the eps-prediction model


class LangevinCoefficients(NamedTuple):
    """Per-step constants of a K-step annealed-Langevin sampler (``float32[K]``; ``t``
    ``int32[K]``), computed in float64 on the host. Step ``k`` is one Langevin update
    at the trained level ``t[k]``."""

    t: np.ndarray
    sigma_t: np.ndarray      # sqrt(1 - ab_t): the model's noise-level input
    sqrt_ab_t: np.ndarray    # maps the VE state y to the model's input x_t = sqrt(ab_t) y
    score_coef: np.ndarray   # (step / 2) / sigma_y: the drift is -score_coef * eps_hat
    noise_std: np.ndarray    # noise_scale * sqrt(step)


def ve_sigma(schedule: GaussianSchedule) -> np.ndarray:
    """``float64[T+1]``: each level's noise std in adjacency units, ``sigma_t / sqrt(ab_t) / 2``.

    ``x_t / sqrt(ab_t) = x0 + (sigma_t / sqrt(ab_t)) eps`` is the variance-exploding
    (EDP-GNN / NCSN) form of level ``t`` on the signal ``x0 = 2 A - 1``; on ``A`` the
    noise std is half that.
    """
    ab = schedule.alpha_bar64
    return np.sqrt((1.0 - ab) / ab) / 2.0


def langevin_levels(schedule: GaussianSchedule, num_levels: int, sigma_max: float,
                    sigma_min: float) -> np.ndarray:
    """Descending distinct trained levels ``int32[L']`` nearest (in log sigma) to the
    geometric grid of ``num_levels`` adjacency-unit noise levels ``sigma_max .. sigma_min``.

    The model only knows the trained levels ``1..T``, so each grid point is mapped to
    the trained level whose ``ve_sigma`` is closest in log; duplicates (a grid finer
    than the trained levels) are dropped, so ``L' <= num_levels``.
    """
    if int(num_levels) < 1:
        raise ValueError(f"num_levels must be >= 1, got {num_levels}")
    if not 0.0 < sigma_min <= sigma_max:
        raise ValueError(f"need 0 < sigma_min <= sigma_max, got {sigma_min}, {sigma_max}")
    grid = np.exp(np.linspace(np.log(sigma_max), np.log(sigma_min), int(num_levels)))
    log_sig = np.log(ve_sigma(schedule)[1:])  # levels 1..T
    t = 1 + np.argmin(np.abs(log_sig[None, :] - np.log(grid)[:, None]), axis=1)
    _, first = np.unique(t, return_index=True)
    return t[np.sort(first)].astype(np.int32)


def langevin_coefficients(schedule: GaussianSchedule, num_steps: int, num_levels: int = 6,
                          sigma_max: float = 1.6, sigma_min: float = 0.1,
                          step_eps: float = 0.005,
                          noise_scale: float = 1.0) -> LangevinCoefficients:
    """The step table of annealed Langevin with ``num_steps`` (K) updates in all.

    The K updates are split over the ``L'`` levels of ``langevin_levels`` as evenly as
    possible (the first ``K mod L'`` levels get one more); K must be >= L'. Level
    ``l`` (adjacency-unit noise ``sigma_l``) uses EDP-GNN's / NCSN's step size
    ``eps_l = step_eps * sigma_l^2 / sigma_L^2`` (``sigma_L`` the last, smallest level).
    """
    if step_eps <= 0 or noise_scale < 0:
        raise ValueError(f"need step_eps > 0 and noise_scale >= 0, got {step_eps}, {noise_scale}")
    levels = langevin_levels(schedule, num_levels, sigma_max, sigma_min)
    L = len(levels)
    if not isinstance(num_steps, (int, np.integer)) or num_steps < L:
        raise ValueError(f"the Langevin sampler needs num_steps >= its {L} levels, got {num_steps}")
    per_level = np.full(L, num_steps // L) + (np.arange(L) < num_steps % L)
    t = np.repeat(levels, per_level)
    sig_a = ve_sigma(schedule)[t]                                  # adjacency units
    eps_a = step_eps * sig_a ** 2 / ve_sigma(schedule)[levels[-1]] ** 2
    # In signal units y = 2 A - 1 the same update has step 4 eps_a and noise 2 sigma_a.
    step_y, sig_y = 4.0 * eps_a, 2.0 * sig_a
    ab = schedule.alpha_bar64[t]
    f32 = lambda a: np.asarray(a, np.float32)
    return LangevinCoefficients(
        t=t.astype(np.int32), sigma_t=f32(np.sqrt(1.0 - ab)), sqrt_ab_t=f32(np.sqrt(ab)),
        score_coef=f32(step_y / 2.0 / sig_y), noise_std=f32(noise_scale * np.sqrt(step_y)))


def langevin_chain(denoise_fn: DenoiseFn, key: jax.Array, node_mask: jax.Array,
                   c: LangevinCoefficients, return_chain: bool = False):
    """Annealed Langevin on the variance-exploding state ``y`` (signal units, ``2 A - 1``).

    The score of level ``t`` comes from the eps-prediction model. With
    ``x_t = sqrt(ab_t) y`` and ``sigma_y = sigma_t / sqrt(ab_t)``, the DDPM identity
    ``grad_x log q_t(x_t) = -E[eps | x_t] / sigma_t`` gives

        score_y(y) = sqrt(ab_t) grad_x log q_t(sqrt(ab_t) y) = -eps_hat(sqrt(ab_t) y, t) / sigma_y,

    and each update is ``y <- y + (step/2) score_y(y) + noise_scale sqrt(step) z`` with
    ``z`` symmetric normal on the real pairs. Starts from ``y = sigma_y(first level) z``.

    Returns: ``(y [B, N, N], chain)``: the last state, and with ``return_chain`` the
    thresholded states ``[K+1, B, N, N]`` (``y > 0``, initial state first).
    """
    y0 = float(c.sigma_t[0] / c.sqrt_ab_t[0]) * symmetric_normal(
        jax.random.fold_in(key, 10_000_019), node_mask)
    B = node_mask.shape[0]
    em = edge_mask(node_mask)

    def body(y, xs):
        i, coef = xs
        t_vec = jnp.full((B,), coef.t, jnp.int32)
        sig_vec = jnp.full((B,), coef.sigma_t, jnp.float32)
        eps_hat = denoise_fn(coef.sqrt_ab_t * y, node_mask, t_vec, sig_vec).astype(jnp.float32)
        z = symmetric_normal(jax.random.fold_in(key, i), node_mask)
        y = jnp.where(em, y - coef.score_coef * eps_hat + coef.noise_std * z, 0.0)
        return y, (to_adjacency(y, node_mask) if return_chain else None)

    steps = jnp.arange(len(c.t), dtype=jnp.int32)
    table = LangevinCoefficients(*(jnp.asarray(a) for a in c))
    y, chain = jax.lax.scan(body, y0, (steps, table))
    if return_chain:
        chain = jnp.concatenate([to_adjacency(y0, node_mask)[None], chain], axis=0)
    return y, chain


def langevin_sample_graphs_vmapped(denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array,
                                   c: LangevinCoefficients, return_chain: bool = False):
    """Per-graph annealed Langevin under ``jax.vmap`` (graph ``b`` uses only ``keys[b]``).

    Returns ``A = (y > 0)`` ``[B, N, N]`` (i.e. ``A = (y + 1)/2`` thresholded at 1/2; and
    ``[B, K+1, N, N]`` chains with ``return_chain``).
    """

    def one(key, mask):
        y, chain = langevin_chain(denoise_fn, key, mask, c, return_chain)
        adj = to_adjacency(y, mask)
        return (adj, chain) if return_chain else adj

    return vmap_per_graph(one, keys, node_mask, return_chain)


@dataclasses.dataclass(frozen=True)
class LangevinSampler(Sampler):
    """Annealed Langevin (EDP-GNN style) with the DDPM-trained model as the score.

    ``num_steps`` is K, the total number of Langevin updates (= denoiser calls).
    """

    process: "GaussianProcess"
    num_steps: int
    num_levels: int
    sigma_max: float
    sigma_min: float
    step_eps: float
    noise_scale: float
    return_chain: bool = False

    def coefficients(self) -> LangevinCoefficients:
        return langevin_coefficients(self.process.schedule, self.num_steps, self.num_levels,
                                     self.sigma_max, self.sigma_min, self.step_eps,
                                     self.noise_scale)

    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array):
        return langevin_sample_graphs_vmapped(denoise_fn, keys, node_mask, self.coefficients(),
                                              self.return_chain)

    @property
    def info(self) -> dict:
        levels = langevin_levels(self.process.schedule, self.num_levels, self.sigma_max,
                                 self.sigma_min)
        return {"process": self.process.name, "sampler": "langevin",
                "num_steps": self.num_steps, "num_levels": self.num_levels,
                "sigma_max": self.sigma_max, "sigma_min": self.sigma_min,
                "step_eps": self.step_eps, "noise_scale": self.noise_scale,
                "levels": [int(t) for t in levels],
                "level_sigmas": [float(s) for s in ve_sigma(self.process.schedule)[levels]]}


# ----------------------------------------------------------------------------
# The process


@dataclasses.dataclass(frozen=True)
class GaussianSampler(Sampler):
    """DDIM/DDPM steps (``eta``, ``clip_x0``) over ``num_steps`` strided levels."""

    process: "GaussianProcess"
    num_steps: int
    eta: float
    clip_x0: bool
    return_chain: bool = False

    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array):
        return sample_graphs_vmapped(denoise_fn, keys, node_mask, self.process.schedule,
                                     self.num_steps, self.eta, self.clip_x0, self.return_chain)

    @property
    def info(self) -> dict:
        return {"process": self.process.name, "num_steps": self.num_steps, "eta": self.eta,
                "clip_x0": self.clip_x0}


@dataclasses.dataclass(frozen=True)
class GaussianProcess(NoiseProcess):
    """The DDPM baseline as a ``NoiseProcess``.

    Attributes:
      schedule_name: ``"cosine"`` (any T) or ``"linear"`` (DDPM's, T >= 21) alpha_bar schedule.
      num_timesteps: T.
      eta: the sampler's default eta (1: ancestral DDPM, 0: deterministic DDIM).
      clip_x0: the sampler's default for clipping the x0 estimate to [-1, 1].
    """

    schedule_name: str = "cosine"
    num_timesteps: int = 1000
    eta: float = 1.0
    clip_x0: bool = True

    name = "gaussian"
    sampler_options = ("sampler", "eta", "clip_x0") + tuple(LANGEVIN_DEFAULTS)

    def __post_init__(self):
        make_gaussian_schedule(self.schedule_name, self.num_timesteps)  # validates
        if not 0.0 <= self.eta <= 1.0:
            raise ValueError(f"config.diffusion.gaussian.eta: expected a value in [0, 1], "
                             f"got {self.eta}")

    @property
    def schedule(self) -> GaussianSchedule:
        return make_gaussian_schedule(self.schedule_name, self.num_timesteps)

    def loss(self, denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array,
             node_mask: jax.Array) -> LossOutput:
        return training_loss(denoise_fn, keys, adj0, node_mask, self.schedule)

    def sampler(self, num_steps: int | None = None, return_chain: bool = False,
                **options) -> Sampler:
        """``sampler="ddpm"`` (default): DDIM/DDPM steps with ``eta``, ``clip_x0``.
        ``sampler="langevin"``: annealed Langevin with ``num_levels``, ``sigma_max``,
        ``sigma_min`` (adjacency units), ``step_eps``, ``noise_scale``
        (``LANGEVIN_DEFAULTS``); ``num_steps`` is then the total number of updates.
        Options of the other sampler raise ValueError."""
        self.check_sampler_options(options)
        kind = options.pop("sampler", None) or "ddpm"
        if kind not in SAMPLERS:
            raise ValueError(f"unknown Gaussian sampler {kind!r}; expected one of {SAMPLERS}")
        given = {k for k, v in options.items() if v is not None}
        if kind == "langevin":
            if given & {"eta", "clip_x0"}:
                raise ValueError(f"options {sorted(given & {'eta', 'clip_x0'})} belong to the "
                                 "ddpm sampler, not sampler='langevin'")
            o = {k: (v if options.get(k) is None else options[k])
                 for k, v in LANGEVIN_DEFAULTS.items()}
            sampler = LangevinSampler(self, int(num_steps or self.num_timesteps),
                                      int(o["num_levels"]), float(o["sigma_max"]),
                                      float(o["sigma_min"]), float(o["step_eps"]),
                                      float(o["noise_scale"]), bool(return_chain))
            sampler.coefficients()  # validates before tracing
            return sampler
        if given & set(LANGEVIN_DEFAULTS):
            raise ValueError(f"options {sorted(given & set(LANGEVIN_DEFAULTS))} need "
                             "sampler='langevin'")
        eta = float(self.eta if options.get("eta") is None else options["eta"])
        clip_x0 = bool(self.clip_x0 if options.get("clip_x0") is None else options["clip_x0"])
        num_steps = int(num_steps or self.num_timesteps)
        step_coefficients(self.schedule, num_steps, eta)  # validates before tracing
        return GaussianSampler(self, num_steps, eta, clip_x0, bool(return_chain))


def from_config(config) -> GaussianProcess:
    """The Gaussian process of ``config.diffusion``: the cosine schedule of ``num_timesteps``
    levels and the sampler's ``diffusion.gaussian.eta`` (1 for a run config written before
    it existed)."""
    eta = config.diffusion.get("gaussian", {}).get("eta", 1.0)
    return GaussianProcess(num_timesteps=int(config.diffusion.num_timesteps), eta=float(eta))


def fit_to_data(config, adj, node_mask):
    """The Gaussian process takes nothing from the data: ``config`` unchanged."""
    del adj, node_mask
    return config
