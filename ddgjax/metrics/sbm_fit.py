"""Fitting a stochastic block model to a graph: block labels by description length.

Two fits, and :func:`sbm_partitions` chooses (``fit="auto"|"graph-tool"|"ddgjax"``;
every result carries the name of the fit that produced it):

* **graph-tool's**, as the published SBM benchmark (SPECTRE, DiGress, DeFoG) runs it:
  ``minimize_blockmodel_dl`` then 1000 zero-temperature merge-split sweeps, on the
  directed graph holding each edge both ways. graph-tool is not on PyPI; it is reached
  in this interpreter or another one (:mod:`ddgjax.metrics.graph_tool_bridge`).
* **ours**, :func:`fit_sbm`, when graph-tool is absent:

  1. Candidates: for ``k = 1, 2, ...`` a spectral partition (the top ``k``
     eigenvectors of ``D^-1/2 A D^-1/2``, rows normalised, k-means with k-means++
     seeds and 3 restarts), then greedy single-node moves that lower the description
     length (a node moves to the block that lowers it most; sweeps until no move helps).
  2. The partition with the smallest description length wins (the search stops at
     ``k = 8`` or after two successive ``k`` that do not improve on the best).
  3. Zero-temperature split moves (``split_moves=True``, the default): each block is
     cut in two (spectral and random bisections), refined, and the cut kept if it
     lowers the description length.

  The description length (``model``) is either graph-tool's own objective
  (``"dc"``, the default: :func:`dc_description_length`, the degree-corrected SBM of
  the benchmark's directed graph) or the non-degree-corrected microcanonical SBM
  (``"ndc"``, :func:`sbm_description_length`; what ddgjax used before graph-tool could
  be compared). ``docs/evaluation.md`` gives the agreement of both with graph-tool.

Block labels are given in ``g.nodes`` order; -1 marks a node the fit left out (the
benchmark's graph-tool graph has no vertex for trailing isolated nodes, and
:func:`own_fit_on_benchmark_vertices` mirrors that). :mod:`ddgjax.metrics.validity`
tests the fitted blocks.
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
from ddgjax.metrics.sbm_fit_pool import labels_in_workers


def _lnbinom(a, b):
    """Elementwise ``ln C(a, b)`` through the log-gamma function (real ``a``, ``b``)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)


def sbm_description_length(adj: np.ndarray, blocks: np.ndarray) -> float:
    """Description length (nats) of a simple graph under a non-degree-corrected SBM.

    The microcanonical SBM of Peixoto (Phys. Rev. E 95, 012317, 2017) for simple
    graphs::

        sum_{r<s} ln C(n_r n_s, e_rs) + sum_r ln C(n_r (n_r-1)/2, e_rr)   (edges | blocks)
        + ln C(B(B+1)/2 + E - 1, E)                                        (edge counts)
        + ln N! - sum_r ln n_r! + ln C(N-1, B-1) + ln N                    (partition)

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


def dc_description_length(adj: np.ndarray, blocks: np.ndarray) -> float:
    """Description length (nats) that graph-tool's benchmark fit minimises.

    The degree-corrected microcanonical SBM (Peixoto, Phys. Rev. E 95, 012317, 2017;
    graph-tool's ``BlockState`` defaults: sparse multigraph likelihood, uniform
    edge-count prior, "distributed" degree prior) of the *directed* graph with each
    edge of ``adj`` both ways, which is how the benchmark hands graphs to graph-tool.
    With ``E = 2m``, ``e_rs`` the directed block edge counts, ``e_r = sum_s e_rs``::

        2 sum_r ln e_r! - sum_{r,s} ln e_rs! - 2 sum_i ln k_i!          (edges | blocks, degrees)
        + ln C(B^2 + E - 1, E)                                          (edge counts)
        + ln N! - sum_r ln n_r! + ln C(N-1, B-1) + ln N                 (partition)
        + 2 sum_r [ln q(e_r, n_r) + ln n_r! - sum_k ln n_k^r!]          (in- and out-degrees)

    ``q(m, n)`` counts the partitions of ``m`` into at most ``n`` parts, ``n_k^r`` the
    nodes of degree ``k`` in block ``r``. Matches graph-tool 2.45's ``state.entropy()``
    to within about 1 nat on the SPECTRE graphs (graph-tool approximates large ``q``).

    Args:
      adj: ``[n, n]`` 0/1 symmetric adjacency, zero diagonal.
      blocks: ``int[n]`` block labels (any integers).
    """
    _, b = np.unique(blocks, return_inverse=True)
    part = _Partition(np.asarray(adj, np.float64), b, "dc")
    const = 2 * gammaln(part.deg + 1).sum()
    return part.description_length() - float(const)


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


@functools.lru_cache(maxsize=4)
def _log_q_table(m_max: int, n_max: int) -> np.ndarray:
    """``[n_max + 1, m_max + 1]``: ln q(m, n), the partitions of ``m`` into at most ``n`` parts.

    Exact, by the recursion ``q(m, n) = q(m, n - 1) + q(m - n, n)`` in log space.
    """
    lq = np.full((n_max + 1, m_max + 1), -np.inf)
    lq[0, 0] = 0.0
    for n in range(1, n_max + 1):
        row = lq[n - 1].copy()
        for start in range(n, m_max + 1, n):
            stop = min(start + n, m_max + 1)
            row[start:stop] = np.logaddexp(lq[n - 1, start:stop], row[start - n:stop - n])
        lq[n] = row
    return lq


def _q_table_for(n: int, m2: float) -> np.ndarray:
    """A ln q table covering ``n`` nodes and ``m2`` edge ends (sizes rounded up, cached)."""
    up = lambda x: 1 << max(int(math.ceil(x)), 1).bit_length()
    return _log_q_table(up(m2), up(n))


def _dc_dl_from_counts(sizes, e, hterm, n, m, lq):
    """graph-tool's description length (its default degree-corrected SBM) from counts.

    The graph is the benchmark's directed graph holding each edge both ways, so
    ``E = 2m`` directed edges, ``e_rs`` as in :func:`sbm_block_counts` (``2 e_rr`` on
    the diagonal) and in- and out-degree both ``k_i``. ``hterm[..., r]`` is
    ``sum_k ln n_k^r!`` over block ``r``'s degree histogram. The constant
    ``-2 sum_i ln k_i!`` is left out. Leading axes are batch axes.
    """
    sizes = np.asarray(sizes, np.float64)
    er = e.sum(-1)
    nb = (sizes > 0).sum(-1)
    dl = 2 * gammaln(er + 1).sum(-1) - gammaln(e + 1).sum((-2, -1))          # adjacency
    dl = dl + _lnbinom(nb * nb + 2 * m - 1, 2 * m)                           # edge counts
    dl = dl + gammaln(n + 1) + _lnbinom(n - 1, nb - 1) + math.log(max(n, 1))  # partition
    dl = dl + gammaln(sizes + 1).sum(-1)          # -ln n_r! (partition) + 2 ln n_r! (degrees)
    lqv = lq[np.rint(sizes).astype(np.int64), np.rint(er).astype(np.int64)]
    return dl + 2 * (lqv.sum(-1) - hterm.sum(-1))                            # degrees


class _Partition:
    """A partition and the counts both description lengths need, updated per move."""

    def __init__(self, adj: np.ndarray, b: np.ndarray, model: str):
        self.adj, self.model = adj, model
        self.n, self.m = adj.shape[0], adj.sum() / 2
        self.k = int(b.max()) + 1
        self.b = b.copy()
        onehot = np.eye(self.k)[self.b]
        self.sizes = onehot.sum(0)
        self.nbr = adj @ onehot                                        # [n, k]
        self.e = onehot.T @ self.nbr                                   # [k, k]
        if model == "dc":
            self.deg = np.rint(adj.sum(1)).astype(np.int64)
            self.hist = np.zeros((self.k, self.deg.max() + 1 if self.n else 1))
            np.add.at(self.hist, (self.b, self.deg), 1)
            self.lq = _q_table_for(self.n, 2 * self.m)

    def description_length(self) -> float:
        if self.model == "dc":
            return float(_dc_dl_from_counts(self.sizes, self.e, gammaln(self.hist + 1).sum(1),
                                            self.n, self.m, self.lq))
        return float(_dl_from_counts(self.sizes, self.e, self.n, self.m))

    def move_scores(self, nodes: np.ndarray) -> np.ndarray:
        """DL after moving each node of ``nodes`` to each block: ``[len(nodes), k]``.

        Moving node ``i`` from ``r`` to ``s`` changes the edge counts ``e = O^T A O``
        (``O`` the one-hot block matrix) by ``delta k_i^T + k_i delta^T`` with
        ``delta = 1_s - 1_r`` and ``k_i`` the node's neighbour counts per block; the
        degree histograms lose the node's degree in ``r`` and gain it in ``s``.
        """
        eye = np.eye(self.k)
        kv = self.nbr[nodes]                                           # [p, k]
        delta = eye[None, :, :] - eye[self.b[nodes]][:, None, :]       # [p, s, k]
        sz = self.sizes[None, None, :] + delta
        ee = (self.e[None, None] + delta[..., :, None] * kv[:, None, None, :]
              + kv[:, None, :, None] * delta[..., None, :])            # [p, s, k, k]
        if self.model != "dc":
            return _dl_from_counts(sz, ee, self.n, self.m)
        cnt = self.hist[:, self.deg[nodes]].T                          # [p, k]: n^r_{k_i}
        hterm = gammaln(self.hist + 1).sum(1)
        ht = (hterm[None, None, :] + np.clip(delta, 0, None) * np.log(cnt + 1)[:, None, :]
              - np.clip(-delta, 0, None) * np.log(np.maximum(cnt, 1))[:, None, :])
        return _dc_dl_from_counts(sz, ee, ht, self.n, self.m, self.lq)

    def move(self, i: int, s: int) -> None:
        r = self.b[i]
        delta = np.eye(self.k)[s] - np.eye(self.k)[r]
        kv = self.nbr[i].copy()
        self.e = self.e + np.outer(delta, kv) + np.outer(kv, delta)
        self.sizes = self.sizes + delta
        self.nbr[:, r] -= self.adj[:, i]
        self.nbr[:, s] += self.adj[:, i]
        if self.model == "dc":
            self.hist[r, self.deg[i]] -= 1
            self.hist[s, self.deg[i]] += 1
        self.b[i] = s


def _refine(adj: np.ndarray, b: np.ndarray, rng: np.random.Generator, model: str = "dc",
            max_sweeps: int = 50) -> np.ndarray:
    """Greedy zero-temperature single-node moves on the description length.

    Each sweep scores every (node, target block) pair at once, then visits the nodes
    that had an improving move in random order, re-scores each against the current
    state and moves it to its best block if that still lowers the description length.
    Stops when a sweep finds no improving move.
    """
    part = _Partition(adj, b, model)
    current = part.description_length()
    all_nodes = np.arange(part.n)
    for _ in range(max_sweeps):
        scores = part.move_scores(all_nodes)
        scores[all_nodes, part.b] = current
        cand = np.nonzero(scores.min(1) < current - 1e-9)[0]
        if len(cand) == 0:
            break
        for i in rng.permutation(cand):
            sc = part.move_scores(np.array([i]))[0]
            r = part.b[i]
            sc[r] = current
            s = int(np.argmin(sc))
            if s == r or sc[s] >= current - 1e-9:
                continue
            part.move(i, s)
            current = float(sc[s])
    _, b = np.unique(part.b, return_inverse=True)
    return b


def _split_proposals(adj: np.ndarray, members: np.ndarray, rng: np.random.Generator,
                     num_random: int):
    """Two-way splits of one block: its spectral bisection and ``num_random`` random ones.

    Yields boolean masks over ``members`` (True = the new block).
    """
    sub = adj[np.ix_(members, members)]
    deg = sub.sum(1)
    if (deg > 0).sum() >= 2:
        inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
        _, vecs = np.linalg.eigh(sub * inv[:, None] * inv[None, :])
        fiedler = vecs[:, -2]
        yield fiedler > np.median(fiedler)
    for _ in range(num_random):
        yield rng.random(len(members)) < 0.5


def _split_moves(adj: np.ndarray, b: np.ndarray, rng: np.random.Generator, model: str,
                 num_random: int = 2, max_rounds: int = 4) -> np.ndarray:
    """Tries splitting each block in two (then greedy moves); keeps a split that lowers the DL.

    A zero-temperature version of the split half of graph-tool's merge-split moves:
    per round, every block of at least 4 nodes gets the proposals of
    :func:`_split_proposals`, each refined by :func:`_refine`; the best proposal that
    lowers the description length is kept, and rounds repeat until none does.
    """
    best = _Partition(adj, b, model).description_length()
    for _ in range(max_rounds):
        improved = None
        for r in range(int(b.max()) + 1):
            members = np.nonzero(b == r)[0]
            if len(members) < 4:
                continue
            for mask in _split_proposals(adj, members, rng, num_random):
                if mask.all() or not mask.any():
                    continue
                cand = b.copy()
                cand[members[mask]] = b.max() + 1
                cand = _refine(adj, cand, rng, model)
                dl = _Partition(adj, cand, model).description_length()
                if dl < best - 1e-9:
                    best, improved = dl, cand
        if improved is None:
            break
        b = improved
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


def fit_sbm(g: nx.Graph, k_max: int = 8, seed: int = 0, patience: int = 2,
            model: str = "dc", split_moves: bool = True, split_random: int = 2) -> np.ndarray:
    """Block labels ``int[n]`` (0..B-1) of a stochastic block model fitted to ``g``.

    Without graph-tool: spectral candidates for ``k = 1, 2, ...``, greedy moves on
    the description length, smallest description length wins (module docstring);
    the search over ``k`` stops at ``k_max`` or after ``patience`` successive ``k``
    that do not improve on the best. Deterministic for a given ``seed``.

    Args:
      model: ``"dc"`` (graph-tool's objective, :func:`dc_description_length`) or
        ``"ndc"`` (:func:`sbm_description_length`).
      split_moves: then try cutting each block in two (:func:`_split_moves`, with
        ``split_random`` random bisections per block and round). About 5x slower
        (0.2-0.3 s per 100-node graph); it moves 7 of 300 verdicts towards
        graph-tool's and none away (``docs/evaluation.md``).
    """
    if model not in ("dc", "ndc"):
        raise ValueError(f"unknown SBM model {model!r}; choose 'dc' or 'ndc'")
    n = g.number_of_nodes()
    if n == 0:
        return np.zeros(0, np.int64)
    adj = nx.to_numpy_array(g, nodelist=list(g.nodes), dtype=np.float64, weight=None)
    np.fill_diagonal(adj, 0.0)
    rng = np.random.default_rng(seed)
    deg = adj.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
    k_max = min(k_max, n)
    _, vecs = slinalg.eigh(adj * inv[:, None] * inv[None, :], subset_by_index=[n - k_max, n - 1])
    best_b, best_dl, worse = None, np.inf, 0
    for k in range(1, k_max + 1):
        b = _refine(adj, _spectral_partition(vecs, k, rng), rng, model)
        dl = _Partition(adj, b, model).description_length()
        if dl < best_dl - 1e-9:
            best_b, best_dl, worse = b, dl, 0
        else:
            worse += 1
            if worse >= patience:
                break
    if split_moves:
        best_b = _split_moves(adj, best_b, rng, model, num_random=split_random)
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
    number of merge-split sweeps; ``seed`` seeds either fit. Our fit runs in worker
    processes (:mod:`ddgjax.metrics.sbm_fit_pool`, ``$DDGJAX_SBM_FIT_WORKERS``).
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
    return labels_in_workers(own_fit_on_benchmark_vertices, graphs, seed=seed), OWN_FIT_LABEL


def benchmark_vertex_count(g: nx.Graph) -> int:
    """How many nodes the benchmark's fit sees: up to the last one (``g.nodes`` order) with an edge.

    The benchmark builds graph-tool's graph from the edge list alone, so nodes after
    the last one that has an edge do not exist for the fit.
    """
    index = {v: i for i, v in enumerate(g.nodes)}
    ends = [max(index[u], index[v]) for u, v in g.edges if u != v]
    return max(ends) + 1 if ends else 0


def own_fit_on_benchmark_vertices(g: nx.Graph, seed: int = 0, **fit_kwargs) -> np.ndarray:
    """:func:`fit_sbm` on the nodes the benchmark fits; ``int[n]``, -1 for the others."""
    nodes = list(g.nodes)
    v = benchmark_vertex_count(g)
    out = np.full(len(nodes), -1, np.int64)
    if v:
        sub = nx.Graph()
        sub.add_nodes_from(nodes[:v])
        sub.add_edges_from(g.subgraph(nodes[:v]).edges)
        out[:v] = fit_sbm(sub, seed=seed, **fit_kwargs)
    return out


def sbm_partition(g: nx.Graph, seed: int = 0, fit: str | None = None) -> np.ndarray:
    """Block labels ``int[n]`` of one graph (:func:`sbm_partitions` for the fit)."""
    return sbm_partitions([g], fit=fit, seed=seed)[0][0]
