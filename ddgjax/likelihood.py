"""Likelihoods of graphs under a trained bit-flip model (host side): the negative ELBO, an
upper bound on ``-log p_theta(A_0)``, in bits per pair and bits per graph.

``nll(run, graphs)`` pads the graphs into fixed-shape batches and runs the jitted
Monte-Carlo estimator of ``ddgjax.processes.bitflip.elbo`` (every level, ``num_draws`` draws of
``A_t ~ q(A_t | A_0)`` each), one compile per (model, grid, draws, batch shape). Units: a
graph with ``n`` real nodes has ``n (n - 1) / 2`` pairs; bits per pair divides its bound by
that. ``density_bits_per_pair`` is the Erdős–Rényi baseline with a given edge density, and
``exact_nelbo_by_enumeration`` the same bound computed exactly for a tiny graph (a check of
the estimator). docs/method.md, "Likelihood".
"""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from ddgjax.graphs import clean_graph, node_mask_from_counts
from ddgjax.processes.bitflip import ALGORITHMS, BitFlipProcess, sampling_grid
from ddgjax.processes.bitflip.elbo import nelbo_draws, prior_term, summarize_draws
from ddgjax.sampling import Run, SamplingError, graph_keys

LN2 = math.log(2.0)
ESTIMATOR = ("negative ELBO: prior KL + sum over every level of E_q[KL(q(A_s|A_t,A_0) || "
             "p_theta(A_s|A_t))] + E_q[-log p_theta(A_0|A_t1)]; each expectation the mean of "
             "num_draws independent draws of A_t ~ q(A_t|A_0); standard error "
             "sqrt(sum_levels var_level / num_draws)")


def elbo_grid(process: BitFlipProcess, num_levels: int | None = None,
              grid: str | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """The levels of the bound: ``(t_index [K+1], beta_bar [K+1], info)``, descending.

    Default: the ``T`` trained levels (``grid="trained"``) for a model trained on the grid;
    for one trained in continuous time, ``grid="uniform"`` (``beta_bar_k = k / (2K)``) with
    ``K = num_levels`` or ``T``. ``"power:GAMMA"`` also works in continuous time. Fewer
    trained levels (``num_levels < T``) are a strided grid, a valid but looser bound.
    """
    if grid is None:
        grid = "uniform" if process.continuous_time else "trained"
    try:
        process._check_grid(grid)
        t_index, bb = sampling_grid(process.schedule, num_levels or None, grid)
    except ValueError as e:
        raise SamplingError(f"likelihood levels: {e}") from e
    info = {"grid": grid, "num_levels": len(t_index) - 1,
            "continuous_time": bool(process.continuous_time),
            "beta_bar": [float(b) for b in bb[::-1]]}
    return t_index, bb, info


_COMPILED: dict = {}


def compiled_nelbo(model, process: BitFlipProcess, t_index: np.ndarray, beta_bar: np.ndarray,
                   num_draws: int, algorithm: int):
    """Jitted ``(params, keys [B], adj0 [B, N, N], node_mask [B, N]) -> (draws [K, S, B],
    prior [B])``; cached per (model, process, grid, draws, algorithm)."""
    key = (model, process, tuple(np.asarray(t_index).tolist()),
           tuple(np.asarray(beta_bar).tolist()), int(num_draws), int(algorithm))
    if key not in _COMPILED:
        rho = process.prior_density

        def run(params, keys, adj0, node_mask):
            denoise = lambda a, m, t, s: model.apply(params, a, m, t, s)
            draws = nelbo_draws(denoise, keys, adj0, node_mask, t_index, beta_bar, num_draws,
                                rho, algorithm)
            return draws, prior_term(adj0, node_mask, float(beta_bar[0]), rho)

        _COMPILED[key] = jax.jit(run)
    return _COMPILED[key]


def as_graph(item, index: int) -> nx.Graph:
    """A ``networkx.Graph`` or a square 0/1 adjacency -> a clean graph (nodes ``0..n-1``)."""
    if isinstance(item, nx.Graph):
        return clean_graph(item, index=index)
    adj = np.asarray(item)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise SamplingError(f"graph {index}: expected a networkx graph or a square [n, n] "
                            f"adjacency, got shape {adj.shape}")
    if not np.array_equal(adj, adj.T) or not np.isin(adj, (0, 1)).all():
        raise SamplingError(f"graph {index}: the adjacency must be symmetric with 0/1 entries")
    return nx.from_numpy_array((adj != 0).astype(np.uint8) * (1 - np.eye(len(adj), dtype=np.uint8)))


def nll(run: Run, graphs, *, num_draws: int = 8, seed: int = 0, batch_size: int = 64,
        num_levels: int | None = None, grid: str | None = None, algorithm: int = 1,
        progress=None) -> dict:
    """The negative ELBO of each graph under ``run`` (``ddgjax.processes.bitflip.elbo``).

    Args:
      graphs: ``networkx.Graph`` objects or square 0/1 adjacencies, each with
        ``2 <= n <= run.max_nodes`` nodes.
      num_draws: draws of ``A_t`` per level and graph (>= 2 for a standard error).
      seed: graph ``i`` uses the key ``fold_in(key(seed), i)`` whatever the batch size.
      num_levels, grid: the levels of the bound (``elbo_grid``).
      algorithm: the reverse model whose bound it is: 1 (the posterior marginalised over
        ``p_theta(A_0 | A_t)``, the L_vb model) or 2 (re-noise a draw of ``A_0``).
    Returns a dict: ``bits_per_pair``, ``bits_per_graph``, ``se_bits_per_pair``,
    ``se_bits_per_graph``, ``num_pairs`` (``[G]`` each), ``per_level_bits`` (``[G, K]``,
    level 1 first), ``mean_bits_per_pair`` (over graphs) with ``se_mean_bits_per_pair``,
    ``levels`` (``elbo_grid``'s info), ``num_draws``, ``algorithm``, ``seed``, ``estimator``.
    """
    if not isinstance(run.process, BitFlipProcess):
        raise SamplingError(f"likelihoods need a bit-flip (discrete) model; this run's process "
                            f"is {run.process.name!r}")
    if int(num_draws) < 1:
        raise SamplingError(f"num_draws: expected a positive number of draws, got {num_draws}")
    if algorithm not in ALGORITHMS:
        raise SamplingError(f"algorithm: expected 1 or 2, got {algorithm!r}")
    if batch_size < 1:
        raise SamplingError(f"batch_size: expected a positive number, got {batch_size}")
    graphs = [as_graph(g, i) for i, g in enumerate(graphs)]
    if not graphs:
        raise SamplingError("likelihood: no graphs given")
    counts = np.array([g.number_of_nodes() for g in graphs], np.int32)
    for i, n in enumerate(counts):
        if n > run.max_nodes:
            raise SamplingError(f"graph {i} has {n} nodes; this model was trained with "
                                f"max_nodes={run.max_nodes}")
        if n < 2:
            raise SamplingError(f"graph {i} has {n} node(s), hence no pairs to score")
    t_index, bb, levels = elbo_grid(run.process, num_levels, grid)
    fn = compiled_nelbo(run.model, run.process, t_index, bb, int(num_draws), algorithm)
    N, G = run.max_nodes, len(graphs)
    bs = min(batch_size, G)
    draws, prior = [], []
    for lo in range(0, G, bs):
        part = graphs[lo:lo + bs]
        adj = np.zeros((bs, N, N), np.float32)
        cnt = np.zeros(bs, np.int32)
        for j, g in enumerate(part):
            n = g.number_of_nodes()
            adj[j, :n, :n] = nx.to_numpy_array(g, nodelist=range(n), dtype=np.float32, weight=None)
            cnt[j] = n
        d, p = fn(run.params, graph_keys(seed, lo, bs), jnp.asarray(adj),
                  jnp.asarray(node_mask_from_counts(cnt, N)))
        draws.append(np.asarray(d)[:, :, :len(part)])
        prior.append(np.asarray(p)[:len(part)])
        if progress is not None:
            progress(min(lo + bs, G), G)
    s = summarize_draws(np.concatenate(draws, axis=2), np.concatenate(prior))
    pairs = counts * (counts - 1) / 2.0
    bits, se = s["nats"] / LN2, s["se_nats"] / LN2
    return {"bits_per_pair": bits / pairs, "bits_per_graph": bits,
            "se_bits_per_pair": se / pairs, "se_bits_per_graph": se, "num_pairs": pairs,
            "per_level_bits": s["per_level_nats"] / LN2,
            "mean_bits_per_pair": float(np.mean(bits / pairs)),
            "se_mean_bits_per_pair": float(np.sqrt(np.sum((se / pairs) ** 2)) / G),
            "levels": levels, "num_draws": int(num_draws), "algorithm": int(algorithm),
            "seed": int(seed), "estimator": ESTIMATOR}


def edge_density(graphs) -> float:
    """Edges over pairs, pooled over ``graphs`` (each pair of real nodes counted once)."""
    edges = sum(g.number_of_edges() for g in graphs)
    pairs = sum(g.number_of_nodes() * (g.number_of_nodes() - 1) / 2 for g in graphs)
    return edges / max(pairs, 1)


def density_bits_per_pair(graphs, density: float) -> np.ndarray:
    """``[G]`` bits per pair of each graph under Erdős–Rényi(``density``): the Bernoulli
    cross-entropy ``-(e log2 d + (P - e) log2 (1 - d)) / P``, ``e`` edges, ``P`` pairs."""
    if not 0.0 < density < 1.0:
        raise ValueError(f"density: expected a value in (0, 1), got {density}")
    out = []
    for g in graphs:
        n, e = g.number_of_nodes(), g.number_of_edges()
        P = n * (n - 1) / 2
        out.append(-(e * math.log2(density) + (P - e) * math.log2(1.0 - density)) / P)
    return np.array(out)


def _kernel(alpha_from: float, alpha_to: float, rho: float) -> np.ndarray:
    """``[2, 2]`` transition ``q(a_to | a_from)``: keep with ``alpha_to / alpha_from``, else
    redraw from Bernoulli(rho) (the bit flip at rho = 1/2)."""
    keep = alpha_to / alpha_from
    return keep * np.eye(2) + (1.0 - keep) * np.array([[1.0 - rho, rho], [1.0 - rho, rho]])


def exact_nelbo_by_enumeration(denoise_fn, adj0: np.ndarray, t_index, beta_bar,
                               rho: float = 0.5, algorithm: int = 1) -> float:
    """The negative ELBO of ``nelbo_draws`` (nats) with every expectation summed exactly over
    all ``2^P`` states of the graph's ``P`` pairs, for a tiny graph (``P <= 12``).

    Written independently of ``ddgjax.processes.bitflip``: transitions as ``2 x 2``
    matrices in float64, the posterior by Bayes' rule on them.

    Args:
      denoise_fn: ``(adj [M, n, n], node_mask [M, n], t_index int32[M], noise_level [M])``
        -> logits ``[M, n, n]``.
      adj0: ``[n, n]`` 0/1; t_index, beta_bar: the descending grid (``[K + 1]`` each).
    """
    adj0 = np.asarray(adj0, np.float64)
    n = adj0.shape[0]
    iu = np.triu_indices(n, 1)
    a0 = adj0[iu].astype(int)
    P = len(a0)
    if P > 12:
        raise ValueError(f"enumeration over 2^{P} states is too large; use n <= 5")
    states = np.array(list(itertools.product((0, 1), repeat=P)), dtype=int)   # [M, P]
    adj = np.zeros((len(states), n, n), np.float32)
    adj[:, iu[0], iu[1]] = states
    adj += np.swapaxes(adj, 1, 2)
    mask = np.ones((len(states), n), bool)
    bb_asc = np.asarray(beta_bar, np.float64)[::-1]              # ascending levels
    alpha = 1.0 - 2.0 * bb_asc
    t_asc = np.asarray(t_index)[::-1]
    total = 0.0
    # prior: KL(q(a_T | a_0) || Bernoulli(rho)) per pair
    qT = _kernel(1.0, alpha[-1], rho)[a0]                                    # [P, 2]
    m = np.array([1.0 - rho, rho])
    total += float(np.sum(qT * (np.log(np.maximum(qT, 1e-300)) - np.log(m))))
    for k in range(1, len(alpha)):
        q_t = _kernel(1.0, alpha[k], rho)                  # q(a_t | a_0)
        q_prev = _kernel(1.0, alpha[k - 1], rho)           # q(a_prev | a_0)
        step = _kernel(alpha[k - 1], alpha[k], rho)        # q(a_t | a_prev)
        weight = np.prod(q_t[a0[None, :], states], axis=1)                  # [M]
        logits = np.asarray(denoise_fn(jnp.asarray(adj), jnp.asarray(mask),
                                       jnp.full((len(states),), int(t_asc[k]), jnp.int32),
                                       jnp.full((len(states),), bb_asc[k], jnp.float32)),
                            np.float64)[:, iu[0], iu[1]]                     # [M, P]
        p1 = 1.0 / (1.0 + np.exp(-logits))
        p_a0 = np.stack([1.0 - p1, p1], -1)                                  # [M, P, 2]
        if k == 1:                         # reconstruction: -log p_theta(a_0 | A_t1)
            terms = -np.log(np.take_along_axis(p_a0, a0[None, :, None], -1)[..., 0])
        else:
            # posterior[x, a, y] = q(a_prev = y | a_t = x, a_0 = a)
            num = q_prev[None, :, :] * step.T[:, None, :]                   # [x, a, y]
            post = num / num.sum(-1, keepdims=True)
            q_post = post[states, a0[None, :]]                               # [M, P, 2]
            if algorithm == 1:
                p_prev = np.einsum("mpa,mpay->mpy", p_a0, post[states])
            else:
                p_prev = p_a0 @ q_prev
            terms = np.sum(q_post * (np.log(np.maximum(q_post, 1e-300))
                                     - np.log(np.maximum(p_prev, 1e-300))), -1)
        total += float(np.sum(weight * terms.sum(axis=1)))
    return total
