"""Noise schedules and level grids of the bit-flip process (float64 NumPy, host side).

One forward step flips each upper-triangular entry with probability ``beta_t``;
the t-step marginal flips it with probability ``beta_bar_t`` where

    1 - 2 * beta_bar_t = prod_{s <= t} (1 - 2 * beta_s).

We choose ``beta_bar`` directly (linear from 0 to 1/2 in the paper) and derive

    beta_t = (beta_bar_{t-1} - beta_bar_t) / (2 * beta_bar_{t-1} - 1).

A sampler visits a descending grid of levels (``sampling_grid``): a strided subset of
the ``T`` trained levels, or, for a model trained in continuous time, any number of
levels ``beta_bar_k = (k / K)^GAMMA / 2``. Everything is computed in float64; the
float32 copies are what the jitted code uses. docs/method.md, "Forward process",
derives these relations.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ddgjax.processes.base import sampling_levels

SCHEDULES = ("linear", "cosine")
GRIDS = ("trained", "uniform", "power:GAMMA")


class NoiseSchedule(NamedTuple):
    """A discrete schedule of ``T`` steps; arrays are indexed by ``t = 0..T``.

    Attributes:
      num_timesteps: T.
      beta_bar: ``float32[T+1]``, beta_bar[0] = 0, beta_bar[T] = 1/2.
      beta: ``float32[T+1]``, per-step flip probability; beta[0] = 0 (unused).
      beta_bar64, beta64: the same in float64.
    """

    num_timesteps: int
    beta_bar: np.ndarray
    beta: np.ndarray
    beta_bar64: np.ndarray
    beta64: np.ndarray


def linear_beta_bar(num_timesteps: int) -> np.ndarray:
    """``float64[T+1]``: beta_bar_t = t / (2T) (the paper's schedule)."""
    t = np.arange(num_timesteps + 1, dtype=np.float64)
    return t / (2.0 * num_timesteps)


def cosine_beta_bar(num_timesteps: int, s: float = 0.008) -> np.ndarray:
    """``float64[T+1]``: 1 - 2 beta_bar_t = alpha_bar_t of Nichol & Dhariwal's cosine schedule."""
    t = np.arange(num_timesteps + 1, dtype=np.float64) / num_timesteps
    f = np.cos((t + s) / (1 + s) * np.pi / 2) ** 2
    alpha_bar = np.clip(f / f[0], 0.0, 1.0)
    beta_bar = 0.5 - 0.5 * alpha_bar
    beta_bar[0], beta_bar[-1] = 0.0, 0.5
    return beta_bar


def step_betas(beta_bar: np.ndarray) -> np.ndarray:
    """``float64[T+1]`` per-step betas from beta_bar; beta[0] = 0.

    Also valid for a strided subset of levels: the flip probability of the
    combined step from level r to level s > r is (bb_s - bb_r) / (1 - 2 bb_r).
    """
    beta_bar = np.asarray(beta_bar, dtype=np.float64)
    beta = np.zeros_like(beta_bar)
    prev, cur = beta_bar[:-1], beta_bar[1:]
    beta[1:] = (prev - cur) / (2.0 * prev - 1.0)
    return beta


@functools.lru_cache(maxsize=64)
def make_schedule(name: str = "linear", num_timesteps: int = 32) -> NoiseSchedule:
    """Build a named schedule (cached: callers must not modify its arrays).

    Raises ValueError for an unknown name or T < 1.
    """
    if (isinstance(num_timesteps, bool) or not isinstance(num_timesteps, (int, np.integer))
            or num_timesteps < 1):
        raise ValueError(f"num_timesteps must be a positive integer, got {num_timesteps!r}")
    if name == "linear":
        bb = linear_beta_bar(num_timesteps)
    elif name == "cosine":
        bb = cosine_beta_bar(num_timesteps)
    else:
        raise ValueError(f"unknown noise schedule {name!r}; expected one of {SCHEDULES}")
    if np.any(np.diff(bb) <= 0):
        raise ValueError(f"schedule {name!r} with T={num_timesteps} is not strictly increasing")
    beta = step_betas(bb)
    arrays = (bb.astype(np.float32), beta.astype(np.float32), bb, beta)
    for a in arrays:  # shared by every caller through the cache
        a.setflags(write=False)
    return NoiseSchedule(int(num_timesteps), *arrays)


def parse_grid(grid: str) -> tuple[str, float]:
    """``"trained"`` / ``"uniform"`` / ``"power:2"`` -> ``(kind, gamma)``; ValueError if bad."""
    kind, _, arg = str(grid).partition(":")
    if kind in ("trained", "uniform") and not arg:
        return kind, 1.0
    if kind == "power":
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
    """The levels a K-step sampler visits, descending: ``(t_index int32[K+1],
    beta_bar float64[K+1])``.

    * ``"trained"``: ``K <= T`` evenly strided levels of the trained schedule
      (``sampling_levels``), always including T and 0.
    * ``"uniform"``: ``beta_bar_k = k / (2K)`` for any K (models trained in continuous time).
    * ``"power:GAMMA"``: ``beta_bar_k = (k / K)^GAMMA / 2``; GAMMA > 1 spends more of the
      K steps at low noise, where the sampler fixes the last wrong pairs.

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
    bb = 0.5 * (np.arange(K, -1, -1, dtype=np.float64) / K) ** gamma
    # the samplers compute in float32: every level but the last must stay a positive
    # normal float32 and the levels must stay distinct there (else a step runs from 0 to 0)
    bb32 = bb.astype(np.float32)
    if not (np.all(bb32[:-1] >= np.finfo(np.float32).tiny) and np.all(np.diff(bb32) < 0)):
        raise ValueError(f"sampling grid {grid!r} with {K} steps: its smallest nonzero level "
                         f"{float(bb[-2]):.3g} (or two neighbouring levels) cannot be told "
                         "apart in float32; use fewer steps or a smaller GAMMA")
    t_index = np.where(bb > 0, np.clip(np.round(2.0 * T * bb), 1, T), 0).astype(np.int32)
    return t_index, bb
