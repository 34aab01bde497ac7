"""Noise schedules of the discrete (bit-flip) diffusion.

One forward step flips each upper-triangular entry with probability ``beta_t``;
the t-step marginal flips it with probability ``beta_bar_t`` where

    1 - 2 * beta_bar_t = prod_{s <= t} (1 - 2 * beta_s).

We choose ``beta_bar`` directly (linear from 0 to 1/2 in the paper) and derive

    beta_t = (beta_bar_{t-1} - beta_bar_t) / (2 * beta_bar_{t-1} - 1).

Everything is computed in float64 NumPy on the host; the float32 copies are what
the jitted code uses.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

SCHEDULES = ("linear", "cosine")


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


def make_schedule(name: str = "linear", num_timesteps: int = 32) -> NoiseSchedule:
    """Build a named schedule. Raises ValueError for an unknown name or T < 1."""
    if not isinstance(num_timesteps, (int, np.integer)) or num_timesteps < 1:
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
    return NoiseSchedule(int(num_timesteps), bb.astype(np.float32), beta.astype(np.float32), bb, beta)


def sampling_levels(num_timesteps: int, num_steps: int | None = None) -> np.ndarray:
    """Descending ``int32[K+1]`` levels ``T = t_K > ... > t_0 = 0`` for a K-step sampler.

    ``num_steps=None`` or ``T`` gives every level; fewer steps take an evenly
    strided subset of the trained levels (always including T and 0).
    """
    if num_steps is None:
        num_steps = num_timesteps
    if not 1 <= num_steps <= num_timesteps:
        raise ValueError(f"num_steps must be in 1..{num_timesteps} (the trained T), got {num_steps}")
    levels = np.unique(np.round(np.linspace(0, num_timesteps, num_steps + 1)).astype(np.int32))
    return levels[::-1].copy()
