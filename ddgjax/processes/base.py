"""The noise-process interface, and the per-graph plumbing every process shares.

A noise process is a frozen (hashable) dataclass, so it can be a static argument
of ``jax.jit`` and a cache key. It knows how to corrupt clean graphs and how to
score a denoiser on them (``loss``), and how to build a reverse-process sampler
(``sampler``). Training and sampling talk to this interface only; they never
name a process. ``ddgjax.processes.process_from_config`` picks one.

Shapes: ``B`` graphs padded to ``N`` nodes (``ddgjax.graphs`` states the
convention); ``keys`` are ``[B]`` typed PRNG keys, one per graph, so a graph's
randomness does not depend on which graphs share its batch.

A denoiser (``DenoiseFn``) maps ``(x_t [B,N,N], node_mask bool[B,N],
t_index int32[B], noise_level float32[B])`` to ``[B,N,N]``: ``t_index`` is the
level ``0..T`` (EDP-GNN's per-level conditioning), ``noise_level`` the
process's scalar noise level (PPGN's diagonal channel). What the output means
is the process's business (bit-flip: logits of ``A_0``; Gaussian: the noise).
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.graphs import pair_mask

# (x_t, node_mask, t_index, noise_level) -> output [B, N, N]
DenoiseFn = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


class LossOutput(NamedTuple):
    """One Monte-Carlo loss estimate on a batch.

    Attributes:
      loss: scalar, the summed per-pair terms divided by the batch's real pairs.
      per_graph: ``[B]`` each graph's summed terms over its real strict-upper pairs.
      num_pairs: ``[B]`` real strict-upper pairs per graph (float32).
      t_index: ``int32[B]`` the level each graph was noised to.
    """

    loss: jax.Array
    per_graph: jax.Array
    num_pairs: jax.Array
    t_index: jax.Array


class Sampler(abc.ABC):
    """A reverse-process sampler; concrete samplers are frozen dataclasses (hashable).

    ``sampler(denoise_fn, keys [B], node_mask [B, N])`` returns ``A_0``
    ``float32[B, N, N]`` 0/1, or with ``return_chain`` the pair ``(A_0, chain)``
    where ``chain`` is ``[B, K+1, N, N]`` from ``A_T`` down to ``A_0``. Graph
    ``b`` uses only ``keys[b]`` (the chain runs per graph under ``jax.vmap``).
    """

    num_steps: int
    return_chain: bool

    @abc.abstractmethod
    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array):
        ...

    @property
    @abc.abstractmethod
    def info(self) -> dict:
        """JSON-able description of the sampler (steps and its options), for records."""


class NoiseProcess(abc.ABC):
    """A forward noise process with its loss and reverse samplers.

    Concrete processes are frozen dataclasses whose fields are plain scalars and
    strings (schedules are derived from them), so a process is hashable and
    static under ``jit``.
    """

    name: str  # class attribute: the registry name of the process
    num_timesteps: int

    @abc.abstractmethod
    def loss(self, denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array,
             node_mask: jax.Array) -> LossOutput:
        """One Monte-Carlo estimate of the training loss.

        Args:
          denoise_fn: the model (see ``DenoiseFn``).
          keys: ``[B]`` per-graph keys.
          adj0: ``float32[B, N, N]`` clean graphs; node_mask: ``bool[B, N]``.
        """

    @abc.abstractmethod
    def sampler(self, num_steps: int | None = None, return_chain: bool = False,
                **options) -> Sampler:
        """A ``num_steps``-step sampler (``None``: all T levels).

        ``options`` are the process's sampler options (its ``sampler_options``);
        an unknown option raises ValueError naming the valid ones.
        """

    sampler_options: tuple = ()  # names accepted by ``sampler(**options)``

    def check_sampler_options(self, options: dict) -> None:
        """Raise ValueError for options this process's sampler does not take."""
        bad = sorted(k for k in options if k not in self.sampler_options)
        if bad:
            valid = ", ".join(self.sampler_options) or "none"
            raise ValueError(f"the {self.name} process's sampler has no option(s) {bad}; "
                             f"valid options: {valid}")

    def replace(self, **changes):
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


# ----------------------------------------------------------------------------
# Per-graph plumbing shared by the processes


def broadcast_per_graph(x) -> jax.Array:
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


def per_graph_keys(key: jax.Array, batch_size: int) -> jax.Array:
    """One key -> ``[B]`` keys by splitting; ``[B]`` keys are returned as they are."""
    if key.ndim == 1:
        if key.shape[0] != batch_size:
            raise ValueError(f"expected {batch_size} per-graph keys, got {key.shape[0]}")
        return key
    return jax.random.split(key, batch_size)


def per_graph_time_and_noise_keys(keys: jax.Array):
    """``[B]`` keys -> (``u_t`` uniform ``[B]`` for the level, ``[B]`` keys for the noise).

    Graph ``b`` draws its level from ``fold_in(keys[b], 0)`` and its noise from
    ``fold_in(keys[b], 1)``.
    """
    key_t = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    key_noise = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    return jax.vmap(lambda k: jax.random.uniform(k, ()))(key_t), key_noise


def uniform_timestep(u_t: jax.Array, num_timesteps: int) -> jax.Array:
    """Uniform ``[0, 1)`` draws ``[B]`` -> ``int32[B]`` levels uniform on ``1..T``.

    ``u`` in ``[(t-1)/T, t/T)`` maps to level ``t``; level 0 (the data) is never drawn.
    """
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
