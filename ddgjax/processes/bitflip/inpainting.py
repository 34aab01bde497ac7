"""Graph completion (inpainting) with the bit-flip process: sample the unknown pairs of a
partly known adjacency while the known pairs stay fixed.

At every reverse step from level ``t`` to ``s < t`` the unknown pairs take the sampler's
step (Algorithm 1 or 2, ``sampler.reverse_step``) and the known pairs are drawn afresh
from ``q(A_s | A_0 = known)``, which the bit-flip process gives in closed form; the two
are merged and the merged graph is what the network sees next (the conditioning of
RePaint, Lugmayr et al. 2022, which is exact here because ``q(A_s | A_0)`` is). At level
0 the known pairs are the given ones exactly.

Optional **resampling** (RePaint's "jumps"): the levels are walked in blocks of
``resample_jump`` steps; after a block the whole graph is noised back up to the block's
first level with the forward kernel ``q(A_r | A_s)`` and the block is denoised again,
``resample_rounds`` extra times, so the unknown pairs can adjust to the known ones.
docs/method.md, "Graph completion".

Shapes: one graph at a time under ``jax.vmap`` (``[1, N, N]`` inside), ``B`` graphs
outside; ``known`` is a bool ``[B, N, N]`` mask, symmetric, False on the diagonal and on
padding.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.processes.base import DenoiseFn
from ddgjax.processes.bitflip.process import BitFlipProcess, BitFlipSampler
from ddgjax.processes.bitflip.sampler import reverse_step
from ddgjax.processes.bitflip.schedules import sampling_grid
from ddgjax.processes.bitflip.transitions import (q_sample, sample_prior,
                                                  symmetric_upper_bernoulli)

def forward_jump(key: jax.Array, adj_s: jax.Array, node_mask: jax.Array, beta_bar_s,
                 beta_bar_u, rho: float = 0.5) -> jax.Array:
    """Draw ``A_u ~ q(A_u | A_s)`` for levels ``s < u`` (noising back up).

    The kernel keeps an entry with probability ``alpha_u / alpha_s`` and otherwise redraws it
    from Bernoulli(rho) (``alpha = 1 - 2 beta_bar``); at rho = 1/2 that is a flip with
    probability ``beta_{u|s} = (bb_u - bb_s) / (1 - 2 bb_s)``.

    Args: adj_s ``[B, N, N]``; node_mask ``[B, N]``; beta_bar_s, beta_bar_u scalars.
    Returns: ``[B, N, N]`` 0/1, symmetric.
    """
    alpha_s = 1.0 - 2.0 * beta_bar_s
    redraw = 2.0 * (beta_bar_u - beta_bar_s) / alpha_s  # 1 - alpha_u / alpha_s, no cancellation
    prob1 = (1.0 - redraw) * adj_s + redraw * rho
    return symmetric_upper_bernoulli(key, prob1, node_mask)


def repaint_moves(num_steps: int, jump: int = 0, rounds: int = 0) -> list[tuple[int, int]]:
    """The walk over grid positions ``0 .. K`` (0: ``A_T``, K: level 0) as ``(from, to)``
    moves: ``to = from + 1`` is a reverse step, ``to < from`` a forward jump back up.

    Without resampling (``jump`` or ``rounds`` 0) it is the plain chain ``0 -> 1 -> .. -> K``.
    With it, each block of ``jump`` steps is walked ``rounds + 1`` times, with a jump back
    to the block's start between walks: ``K (rounds + 1)`` reverse steps in all.
    """
    if num_steps < 1 or jump < 0 or rounds < 0:
        raise ValueError(f"expected num_steps >= 1 and non-negative resampling jump/rounds, "
                         f"got {num_steps}, {jump}, {rounds}")
    if jump == 0 or rounds == 0:
        return [(k, k + 1) for k in range(num_steps)]
    moves = []
    for lo in range(0, num_steps, jump):
        hi = min(lo + jump, num_steps)
        for r in range(rounds + 1):
            moves += [(k, k + 1) for k in range(lo, hi)]
            if r < rounds:
                moves.append((hi, lo))
    return moves


def complete_graphs(denoise_fn: DenoiseFn, key: jax.Array, adj_known: jax.Array,
                    known: jax.Array, node_mask: jax.Array, sampler: BitFlipSampler,
                    resample_jump: int = 0, resample_rounds: int = 0) -> jax.Array:
    """Complete one batch sharing ``key``: unknown pairs sampled, known pairs kept.

    Args:
      denoise_fn: see ``DenoiseFn``.
      adj_known: ``[B, N, N]`` 0/1, the given adjacency (read on the known pairs only).
      known: ``[B, N, N]`` bool, symmetric, False on the diagonal and padding.
      node_mask: ``[B, N]`` bool.
      sampler: the levels (``num_steps``, ``grid``), the algorithm and the levers
        (``SamplerLevers``) of a ``BitFlipSampler`` (``BitFlipProcess.sampler``);
        ``return_chain`` is ignored.
      resample_jump, resample_rounds: RePaint resampling (``repaint_moves``; 0: off).
    Returns:
      ``[B, N, N]`` 0/1, symmetric, equal to ``adj_known`` on every known pair.
    """
    rho = sampler.process.prior_density
    t_lv, bb = sampling_grid(sampler.process.schedule, sampler.num_steps, sampler.grid)
    sampler.levers.check_algorithm(sampler.algorithm)
    moves = repaint_moves(len(t_lv) - 1, resample_jump, resample_rounds)
    frm = np.array([a for a, _ in moves])
    to = np.array([b for _, b in moves])
    up = np.array([b < a for a, b in moves], np.int32)  # 1: a forward jump, 0: a reverse step
    xs = (jnp.arange(len(moves), dtype=jnp.int32), jnp.asarray(up),
          jnp.asarray(t_lv[frm], jnp.int32), jnp.asarray(bb[frm], jnp.float32),
          jnp.asarray(bb[to], jnp.float32))
    adj_known = jnp.where(known, adj_known, 0.0)
    B = adj_known.shape[0]

    def impose_known(k, adj, b_to):
        noisy = q_sample(k, adj_known, node_mask, jnp.full((B,), b_to, jnp.float32), rho)
        return jnp.where(known, noisy, adj)

    def down(i, adj, t, b_from, b_to):
        k = jax.random.fold_in(key, i)
        new = reverse_step(denoise_fn, jax.random.fold_in(k, 0), adj, node_mask, t, b_from,
                           b_to, sampler.algorithm, rho=rho, levers=sampler.levers)
        return impose_known(jax.random.fold_in(k, 1), new, b_to)

    def up_move(i, adj, t, b_from, b_to):
        del t
        return forward_jump(jax.random.fold_in(key, i), adj, node_mask, b_from, b_to, rho)

    def body(adj, x):
        i, is_up, t, b_from, b_to = x
        if not up.any():  # the plain chain: reverse steps only
            return down(i, adj, t, b_from, b_to), None
        return jax.lax.switch(is_up, [down, up_move], i, adj, t, b_from, b_to), None

    # A_T: the known pairs noised to the top level; the unknown ones from the prior (the
    # same distribution at beta_bar_T = 1/2, where q(A_T | A_0) is the prior).
    adj = impose_known(jax.random.fold_in(key, 10_000_019), sample_prior(
        jax.random.fold_in(key, 10_000_020), node_mask, rho), bb[0])
    adj, _ = jax.lax.scan(body, adj, xs)
    return jnp.where(known, adj_known, adj)


@dataclasses.dataclass(frozen=True)
class BitFlipCompleter:
    """A hashable completion sampler: ``sampler``'s levels and options plus RePaint
    resampling. ``completer(denoise_fn, keys [B], adj_known, known, node_mask)`` runs
    ``complete_graphs`` per graph under ``jax.vmap`` (graph ``b`` uses only ``keys[b]``)."""

    sampler: BitFlipSampler
    resample_jump: int = 0
    resample_rounds: int = 0

    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, adj_known: jax.Array,
                 known: jax.Array, node_mask: jax.Array) -> jax.Array:
        def one(key, adj, kn, mask):
            return complete_graphs(denoise_fn, key, adj[None], kn[None], mask[None],
                                   self.sampler, self.resample_jump, self.resample_rounds)[0]

        return jax.vmap(one)(keys, adj_known, known, node_mask)

    @property
    def info(self) -> dict:
        return {**self.sampler.info, "resample_jump": self.resample_jump,
                "resample_rounds": self.resample_rounds}


def completer(process, num_steps: int | None = None, resample_jump: int = 0,
              resample_rounds: int = 0, **options) -> BitFlipCompleter:
    """The completion sampler of a bit-flip ``process`` (``options`` as for its sampler).

    ValueError for another process (completion needs ``q(A_t | A_0)`` of bit flips), for
    unknown options and for negative resampling settings.
    """
    if not isinstance(process, BitFlipProcess):
        raise ValueError(f"graph completion needs a bit-flip (discrete) model; this run's "
                         f"process is {getattr(process, 'name', type(process).__name__)!r}")
    if int(resample_jump) < 0 or int(resample_rounds) < 0:
        raise ValueError(f"resample_jump and resample_rounds: expected non-negative integers, "
                         f"got {resample_jump} and {resample_rounds}")
    if (int(resample_jump) > 0) != (int(resample_rounds) > 0):
        raise ValueError("resample_jump and resample_rounds: set both (RePaint resampling) or "
                         f"neither, got {resample_jump} and {resample_rounds}")
    return BitFlipCompleter(process.sampler(num_steps, False, **options), int(resample_jump),
                            int(resample_rounds))
