"""Noise schedules of the bit-flip process (``ddgjax.processes.bitflip``).

One forward step flips each upper-triangular entry with probability ``beta_t``;
the t-step marginal flips it with probability ``beta_bar_t`` where

    1 - 2 * beta_bar_t = prod_{s <= t} (1 - 2 * beta_s).

We choose ``beta_bar`` directly (linear from 0 to 1/2 in the paper) and derive

    beta_t = (beta_bar_{t-1} - beta_bar_t) / (2 * beta_bar_{t-1} - 1).

Everything is computed in float64 NumPy on the host; the float32 copies are what
the jitted code uses. docs/method.md, "Forward process", derives these relations.
"""
from __future__ import annotations

import functools
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
