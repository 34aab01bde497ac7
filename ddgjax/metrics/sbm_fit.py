"""Fitting a stochastic block model to one graph: block labels by description length.

graph-tool is used when ``import graph_tool`` works, as the original SPECTRE code
does (``minimize_blockmodel_dl`` then zero-temperature merge-split sweeps); otherwise
our own fit, :func:`fit_sbm`:

1. Candidates: for ``k = 1, 2, ...`` a spectral partition (the top ``k``
   eigenvectors of ``D^-1/2 A D^-1/2``, rows normalised, k-means with k-means++ seeds
   and 3 restarts), then greedy single-node moves that lower the description length
   below (a node moves to the block that lowers it most; sweeps until no move helps).
2. The partition with the smallest description length wins (the search stops at
   ``k = 8`` or after two successive ``k`` that do not improve on the best). The
   description length is that of the microcanonical non-degree-corrected SBM of
   Peixoto (Phys. Rev. E 95, 012317, 2017) for simple graphs, in nats::

       sum_{r<s} ln C(n_r n_s, e_rs) + sum_r ln C(n_r (n_r-1)/2, e_rr)   (edges | blocks)
       + ln C(B(B+1)/2 + E - 1, E)                                        (edge counts)
       + ln N! - sum_r ln n_r! + ln C(N-1, B-1) + ln N                    (partition)

   (graph-tool's default is the degree-corrected variant; on block-model graphs with
   Erdos-Renyi blocks both recover the planted blocks, and the pass rate of the SBM
   validity test on the training graphs of ``spectre_sbm`` matches the original's
   86%: see ``docs/evaluation.md``).

:func:`sbm_partition` chooses between the two; :mod:`ddgjax.metrics.validity` tests
the fitted blocks.
"""
from __future__ import annotations

import functools
import math
import os
import warnings
from typing import Sequence

import networkx as nx
import numpy as np
from scipy import linalg as slinalg
from scipy.special import gammaln

from ddgjax.metrics.graph_tool_bridge import GraphToolError, find_graph_tool, graph_tool_blocks


def _lnbinom(a, b):
    """Elementwise ``ln C(a, b)`` through the log-gamma function (real ``a``, ``b``)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)


def sbm_description_length(adj: np.ndarray, blocks: np.ndarray) -> float:
    """Description length (nats) of a simple graph under a non-degree-corrected SBM.

    Args:
      adj: ``[n, n]`` 0/1 symmetric adjacency, zero diagonal.
      blocks: ``int[n]`` block labels (any integers).
    """
    _, b = np.unique(blocks, return_inverse=True)
    k = int(b.max()) + 1 if len(b) else 0
    onehot = np.eye(k)[b]
    sizes = onehot.sum(0)
    e = onehot.T @ adj @ onehot                       # e_rs (r != s), 2 e_rr on diagonal
    return float(_dl_from_counts(sizes, e, adj.shape[0], adj.sum() / 2))


@functools.lru_cache(maxsize=None)
def _triu(k: int):
    return np.triu_indices(k, 1)


def _dl_from_counts(sizes, e, n, m):
    """Description length for block sizes ``[..., k]`` and edge counts ``[..., k, k]``.

    Leading axes are batch axes (candidate moves are scored all at once). Empty blocks
    contribute nothing, and ``B`` counts the non-empty ones.
    """
    sizes = np.asarray(sizes, np.float64)
    e = np.asarray(e, np.float64)
    k = sizes.shape[-1]
    iu = _triu(k)
    pairs = (sizes[..., :, None] * sizes[..., None, :])[..., iu[0], iu[1]]
    dl = _lnbinom(pairs, e[..., iu[0], iu[1]]).sum(-1)
    diag = np.diagonal(e, axis1=-2, axis2=-1)
    dl = dl + _lnbinom(sizes * (sizes - 1) / 2, diag / 2).sum(-1)
    nb = (sizes > 0).sum(-1)
    if m > 0:
        dl = dl + _lnbinom(nb * (nb + 1) / 2 + m - 1, m)
    dl = dl + gammaln(n + 1) - gammaln(sizes + 1).sum(-1) + _lnbinom(n - 1, nb - 1)
    return dl + math.log(max(n, 1))


def _move_scores(sizes, e, nbr, b, nodes, n, m):
    """DL after moving each node of ``nodes`` to each block: ``[len(nodes), k]``.

    Moving node ``i`` from ``r`` to ``s`` changes the edge counts ``e = O^T A O``
    (``O`` the one-hot block matrix) by ``delta k_i^T + k_i delta^T`` with
    ``delta = 1_s - 1_r`` and ``k_i`` the node's neighbour counts per block.
    """
    k = sizes.shape[0]
    eye = np.eye(k)
    kv = nbr[nodes]                                                   # [p, k]
    delta = eye[None, :, :] - eye[b[nodes]][:, None, :]               # [p, s, k]
    sz = sizes[None, None, :] + delta
    ee = (e[None, None] + delta[..., :, None] * kv[:, None, None, :]
          + kv[:, None, :, None] * delta[..., None, :])                # [p, s, k, k]
    return _dl_from_counts(sz, ee, n, m)


def _refine(adj: np.ndarray, b: np.ndarray, rng: np.random.Generator,
            max_sweeps: int = 50) -> np.ndarray:
    """Greedy zero-temperature single-node moves on the description length.

    Each sweep scores every (node, target block) pair at once, then visits the nodes
    that had an improving move in random order, re-scores each against the current
    state and moves it to its best block if that still lowers the description length.
    Stops when a sweep finds no improving move.
    """
    n = adj.shape[0]
    m = adj.sum() / 2
    k = int(b.max()) + 1
    b = b.copy()
    onehot = np.eye(k)[b]
    sizes = onehot.sum(0)
    nbr = adj @ onehot                                  # [n, k]
    e = onehot.T @ nbr                                  # [k, k]
    current = float(_dl_from_counts(sizes, e, n, m))
    for _ in range(max_sweeps):
        all_nodes = np.arange(n)
        scores = _move_scores(sizes, e, nbr, b, all_nodes, n, m)
        scores[all_nodes, b] = current
        cand = np.nonzero(scores.min(1) < current - 1e-9)[0]
        if len(cand) == 0:
            break
        for i in rng.permutation(cand):
            sc = _move_scores(sizes, e, nbr, b, np.array([i]), n, m)[0]
            r = b[i]
            sc[r] = current
            s = int(np.argmin(sc))
            if s == r or sc[s] >= current - 1e-9:
                continue
            delta = np.eye(k)[s] - np.eye(k)[r]
            kv = nbr[i].copy()
            e = e + np.outer(delta, kv) + np.outer(kv, delta)
            sizes = sizes + delta
            nbr[:, r] -= adj[:, i]
            nbr[:, s] += adj[:, i]
            b[i] = s
            current = float(sc[s])
    _, b = np.unique(b, return_inverse=True)
    return b


def _kmeans(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 30):
    """Lloyd's k-means with k-means++ seeding. Returns (labels, inertia)."""
    n = len(x)
    cent = [x[rng.integers(n)]]
    d2 = ((x - cent[0]) ** 2).sum(1)
    for _ in range(1, k):
        p = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1.0 / n)
        cent.append(x[rng.choice(n, p=p)])
        d2 = np.minimum(d2, ((x - cent[-1]) ** 2).sum(1))
    cent = np.array(cent)
    lab = np.zeros(n, np.int64)
    for it in range(iters):
        dist = ((x[:, None, :] - cent[None]) ** 2).sum(-1)
        new = dist.argmin(1)
        if it and (new == lab).all():
            break
        lab = new
        for j in range(k):
            if (lab == j).any():
                cent[j] = x[lab == j].mean(0)
    dist = ((x[:, None, :] - cent[None]) ** 2).sum(-1)
    return lab, float(dist[np.arange(n), lab].sum())


def _spectral_partition(vecs: np.ndarray, k: int, rng, restarts: int = 3) -> np.ndarray:
    """k-means on the rows (normalised) of the top ``k`` eigenvectors."""
    if k == 1:
        return np.zeros(len(vecs), np.int64)
    x = vecs[:, -k:]
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    lab = min((_kmeans(x, k, rng) for _ in range(restarts)), key=lambda t: t[1])[0]
    _, lab = np.unique(lab, return_inverse=True)
    return lab


def fit_sbm(g: nx.Graph, k_max: int = 8, seed: int = 0, patience: int = 2) -> np.ndarray:
    """Block labels ``int[n]`` (0..B-1) of a stochastic block model fitted to ``g``.

    Without graph-tool: spectral candidates for ``k = 1, 2, ...``, greedy moves on
    the description length, smallest description length wins (module docstring);
    the search over ``k`` stops at ``k_max`` or after ``patience`` successive ``k``
    that do not improve on the best. Deterministic for a given ``seed``.
    """
    n = g.number_of_nodes()
    if n == 0:
        return np.zeros(0, np.int64)
    adj = nx.to_numpy_array(g, nodelist=list(g.nodes), dtype=np.float64)
    np.fill_diagonal(adj, 0.0)
    rng = np.random.default_rng(seed)
    deg = adj.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
    k_max = min(k_max, n)
    _, vecs = slinalg.eigh(adj * inv[:, None] * inv[None, :], subset_by_index=[n - k_max, n - 1])
    best_b, best_dl, worse = None, np.inf, 0
    for k in range(1, k_max + 1):
        b = _refine(adj, _spectral_partition(vecs, k, rng), rng)
        dl = sbm_description_length(adj, b)
        if dl < best_dl - 1e-9:
            best_b, best_dl, worse = b, dl, 0
        else:
            worse += 1
            if worse >= patience:
                break
    return best_b


SBM_FITS = ("auto", "graph-tool", "ddgjax")
OWN_FIT_LABEL = "ddgjax"
FIT_ENV_VAR = "DDGJAX_SBM_FIT"


def resolve_sbm_fit(fit: str | None = None):
    """``(runtime, label)`` for the requested fit: graph-tool's runtime or None (ours).

    ``fit``: ``"graph-tool"`` (an error if graph-tool cannot be found), ``"ddgjax"``
    (our fit), ``"auto"`` (graph-tool when found, else ours) or None (``$DDGJAX_SBM_FIT``
    if set, else ``"auto"``).
    """
    if fit is None:
        fit = os.environ.get(FIT_ENV_VAR, "auto").strip() or "auto"
    if fit not in SBM_FITS:
        raise ValueError(f"unknown SBM fit {fit!r}; choose one of {list(SBM_FITS)}")
    if fit == "ddgjax":
        return None, OWN_FIT_LABEL
    runtime = find_graph_tool()
    if runtime is None and fit == "graph-tool":
        raise RuntimeError("SBM fit 'graph-tool' asked for but graph-tool was not found "
                           "(install python3-graph-tool or set $DDGJAX_GRAPH_TOOL_PYTHON)")
    return runtime, (runtime.label if runtime else OWN_FIT_LABEL)


def sbm_partitions(graphs: Sequence[nx.Graph], fit: str | None = None, seed: int = 0,
                   refinement_steps: int = 1000):
    """Block labels of every graph and the name of the fit that produced them.

    Returns ``(blocks, label)``: ``blocks[i]`` is ``int[n_i]`` in ``graphs[i].nodes``
    order, -1 for nodes the fit left out (graph-tool's trailing isolated nodes, or a
    failed fit); ``label`` is e.g. ``"graph-tool 2.45"`` or ``"ddgjax"``. With
    ``fit="auto"`` (or None), a graph-tool interpreter that fails gives a warning and
    our fit; with ``fit="graph-tool"`` it raises. ``refinement_steps`` is graph-tool's
    number of merge-split sweeps; ``seed`` seeds either fit.
    """
    runtime, label = resolve_sbm_fit(fit)
    graphs = list(graphs)
    if runtime is not None:
        try:
            return graph_tool_blocks(graphs, runtime, seed=seed,
                                     refinement_steps=refinement_steps), label
        except GraphToolError as err:
            if fit == "graph-tool":
                raise
            warnings.warn(f"{err}; using ddgjax's own SBM fit instead", RuntimeWarning)
    return [fit_sbm(g, seed=seed) for g in graphs], OWN_FIT_LABEL


def sbm_partition(g: nx.Graph, seed: int = 0, fit: str | None = None) -> np.ndarray:
    """Block labels ``int[n]`` of one graph (:func:`sbm_partitions` for the fit)."""
    return sbm_partitions([g], fit=fit, seed=seed)[0][0]
