"""Per-graph statistics for the MMD metrics, batched over padded adjacencies in JAX.

For a list of networkx graphs, :func:`graph_statistics` returns, per graph,

* ``degree_hist``: counts of nodes of degree 0, 1, 2, ... (``nx.degree_histogram``),
  zero-padded to a common length;
* ``clustering_hist``: counts of nodes whose clustering coefficient falls in each of
  100 equal bins on [0, 1] (``np.histogram(nx.clustering values, 100, (0, 1))``);
* ``orbit``: the 15 ORCA node-orbit counts summed over nodes and divided by the node
  count (float64);
* ``spectral`` (optional): the 200-bin histogram of the normalised-Laplacian
  eigenvalues on (-1e-5, 2), divided by its sum, as SPECTRE does.

Where the work is done. The graphs are sorted by size and padded into batches of a
few fixed shapes (node counts multiples of 32; 64 graphs a batch on CPU, 256 on an
accelerator; the K4 block size a multiple of 16: few compilations). One jitted
function per batch computes degrees, triangles, orbit sums and degree histograms.
Three things are finished on the host, vectorised over all graphs where possible:

* clustering coefficients ``2 t / (d (d-1))`` are divided in float64 and binned
  against ``np.linspace(0, 1, 101)``, because ``np.histogram`` puts some exact
  rationals into the lower bin (0.7 goes to bin 69, not 70) and we must match it;
* orbit sums (exact int32) are divided by ``n`` in float64;
* spectra: ``np.linalg.eigvalsh`` in float64 on each graph's real block, as the
  original does. JAX's ``eigh`` always computes eigenvectors and was 2-10x slower
  than LAPACK's values-only routine on CPU in our measurements, and float32
  eigenvalues would move some across bin edges. Isolated nodes get eigenvalue 0
  (networkx's convention: ``D^-1/2 (D - A) D^-1/2`` with 1/sqrt(0) := 0).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from ddgjax.metrics.orbits import NUM_ORBITS, _orbit_counts

CLUSTERING_BINS = 100
SPECTRAL_BINS = 200
SPECTRAL_RANGE = (-1e-5, 2.0)
_SIZE_QUANTUM = 32          # padded node counts are multiples of this
_ELEMENT_BUDGET = 1 << 26   # largest B * N * N * D gathered in one batch (K4 blocks)


class GraphStatistics(NamedTuple):
    """Statistics of ``G`` graphs, in the order the graphs were given.

    Attributes:
      num_nodes: ``int64[G]``.
      degree_hist: ``int64[G, K]`` node counts per degree 0..K-1.
      clustering_hist: ``int64[G, 100]`` node counts per clustering bin.
      orbit: ``float64[G, 15]`` orbit counts summed over nodes / n (0 for n = 0).
      spectral: ``float64[G, 200]`` eigenvalue histogram / its sum, or None.
    """

    num_nodes: np.ndarray
    degree_hist: np.ndarray
    clustering_hist: np.ndarray
    orbit: np.ndarray
    spectral: np.ndarray | None


def pad_columns(a: np.ndarray, width: int) -> np.ndarray:
    """``[n, F]`` -> ``[n, width]`` with zero columns on the right (histograms of different
    lengths compared as one)."""
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))


def strip_graph(g: nx.Graph) -> nx.Graph:
    """Without self-loops and isolated nodes, relabelled 0..n-1 (paper protocol).

    Returns ``g`` itself when there is nothing to strip and its nodes are 0..n-1.
    """
    if (nx.number_of_selfloops(g) == 0 and all(d > 0 for _, d in g.degree())
            and all(v == i for i, v in enumerate(g))):
        return g
    h = nx.Graph(g)
    h.remove_edges_from(list(nx.selfloop_edges(h)))
    h.remove_nodes_from(list(nx.isolates(h)))
    return nx.convert_node_labels_to_integers(h)


@partial(jax.jit, static_argnames=("max_degree",))
def batch_statistics(adj, node_mask, max_degree: int):
    """Per-graph raw statistics of a padded batch (all counts exact integers).

    Args:
      adj: ``[B, N, N]`` 0/1 adjacency. node_mask: ``[B, N]`` bool.
      max_degree: static bound on node degrees (K4 neighbourhood size).

    Returns:
      dict with ``degree`` and ``triangles`` ``int32[B, N]`` (0 on padding),
      ``degree_hist`` ``int32[B, N]`` and ``orbit_sum`` ``int32[B, 15]``.
    """
    n = adj.shape[-1]
    counts = _orbit_counts(adj, node_mask, max_degree)                  # [B, N, 15]
    deg = counts[..., 0]
    onehot = (deg[..., None] == jnp.arange(n)) & node_mask[..., None]   # [B, N, N]
    return {
        "degree": deg,
        "triangles": counts[..., 3],
        "degree_hist": onehot.sum(1).astype(jnp.int32),
        "orbit_sum": counts.sum(1),
    }


def spectral_histogram(adj: np.ndarray) -> np.ndarray:
    """``int64[200]`` histogram of one graph's normalised-Laplacian eigenvalues.

    ``adj`` is the ``[n, n]`` 0/1 adjacency of the real nodes. The Laplacian is
    networkx's ``D^-1/2 (D - A) D^-1/2`` (an isolated node gets eigenvalue 0), its
    eigenvalues come from float64 LAPACK (``np.linalg.eigvalsh``) like the original's,
    and the bins are ``np.histogram``'s: 200 on (-1e-5, 2), values outside dropped.
    """
    a = np.asarray(adj, np.float64)
    deg = a.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1.0)), 0.0)
    lap = np.diag(np.where(deg > 0, 1.0, 0.0)) - a * inv[:, None] * inv[None, :]
    eig = np.linalg.eigvalsh(lap) if len(a) else np.zeros(0)
    return np.histogram(eig, bins=SPECTRAL_BINS, range=SPECTRAL_RANGE)[0].astype(np.int64)


def _max_batch() -> int:
    """Graphs per jitted call: 64 on CPU, 256 on an accelerator."""
    return 64 if jax.default_backend() == "cpu" else 256


def _padded_size(n: int) -> int:
    """Bucket of a graph size: (0, 32], (32, 64], (64, 128], ... (powers of two)."""
    return max(_SIZE_QUANTUM, 1 << max(0, int(n) - 1).bit_length())


def _batches(sizes: np.ndarray, max_degree: int):
    """Yield (indices, padded N, batch size) with few distinct shapes.

    Graphs are grouped by power-of-two size class; a class with fewer graphs than one
    batch is merged into the next larger class (a compilation costs more than the
    padding). A group is padded to its largest graph rounded up to a multiple of 32
    and cut into batches of a fixed size that depends only on the padded shape, so
    each shape compiles once.
    """
    order = np.argsort(sizes, kind="stable")
    classes: dict[int, list[int]] = {}
    for i in order:
        classes.setdefault(_padded_size(sizes[i]), []).append(int(i))
    groups, carry = [], []
    keys = sorted(classes)
    for j, key in enumerate(keys):
        carry = carry + classes[key]
        if len(carry) >= _max_batch() or j == len(keys) - 1:
            groups.append(carry)
            carry = []
    for idx in groups:
        nb = max(_SIZE_QUANTUM, -(-int(sizes[idx[-1]]) // _SIZE_QUANTUM) * _SIZE_QUANTUM)
        per_graph = nb * nb * max(min(max_degree, nb), 1)
        cap = max(1, _ELEMENT_BUDGET // per_graph)
        bsize = min(_max_batch(), 1 << (cap.bit_length() - 1))
        for s in range(0, len(idx), bsize):
            yield idx[s:s + bsize], nb, bsize


def _padded_batch(graphs: Sequence[nx.Graph], n_pad: int, b_pad: int):
    """Adjacency ``float32[b_pad, n_pad, n_pad]`` and node mask of graphs, in node order.

    Nodes keep their iteration order (every statistic here is invariant to node order);
    self-loops are ignored. Rows past ``len(graphs)`` are empty graphs.
    """
    adj = np.zeros((b_pad, n_pad, n_pad), np.float32)
    mask = np.zeros((b_pad, n_pad), bool)
    for k, g in enumerate(graphs):
        n = g.number_of_nodes()
        mask[k, :n] = True
        if g.number_of_edges() == 0:
            continue
        index = {v: i for i, v in enumerate(g)}
        e = np.array([(index[u], index[v]) for u, v in g.edges()], dtype=np.int64)
        adj[k, e[:, 0], e[:, 1]] = 1.0
        adj[k, e[:, 1], e[:, 0]] = 1.0
    idx = np.arange(n_pad)
    adj[:, idx, idx] = 0.0
    return adj, mask


def graph_statistics(graphs: Sequence[nx.Graph], spectral: bool = False) -> GraphStatistics:
    """Statistics of a list of graphs (see the module docstring).

    Graphs must be undirected (``nx.Graph``); self-loops are ignored. Empty graphs
    give all-zero statistics.
    """
    graphs = list(graphs)
    g_count = len(graphs)
    sizes = np.array([g.number_of_nodes() for g in graphs], dtype=np.int64)
    max_deg_all = max([max((d for _, d in g.degree()), default=0) for g in graphs], default=0)
    dbound = max(16, -(-max_deg_all // 16) * 16)  # static K4 block size: few distinct values

    deg_len = int(max_deg_all) + 1
    degree_hist = np.zeros((g_count, deg_len), np.int64)
    orbit_sum = np.zeros((g_count, NUM_ORBITS), np.int64)
    spectral_hist = np.zeros((g_count, SPECTRAL_BINS), np.int64) if spectral else None
    node_graph, node_deg, node_tri = [], [], []

    for idx, nb, bsize in _batches(sizes, dbound):
        adj, mask = _padded_batch([graphs[i] for i in idx], nb, bsize)
        out = jax.device_get(batch_statistics(adj, mask, min(dbound, nb)))
        k = len(idx)
        w = min(deg_len, nb)
        degree_hist[idx, :w] = out["degree_hist"][:k, :w]
        orbit_sum[idx] = out["orbit_sum"][:k]
        if spectral:      # one LAPACK call per graph on its real block: no padding cost
            for j, i in enumerate(idx):
                n = int(sizes[i])
                spectral_hist[i] = spectral_histogram(adj[j, :n, :n])
        m = mask[:k]
        node_graph.append(np.broadcast_to(np.asarray(idx)[:, None], m.shape)[m])
        node_deg.append(out["degree"][:k][m])
        node_tri.append(out["triangles"][:k][m])

    clustering_hist = np.zeros((g_count, CLUSTERING_BINS), np.int64)
    if node_graph:
        gi = np.concatenate(node_graph).astype(np.int64)
        d = np.concatenate(node_deg).astype(np.int64)
        t = np.concatenate(node_tri).astype(np.int64)
        clustering_hist = clustering_histograms(gi, d, t, g_count)

    n_safe = np.maximum(sizes, 1)[:, None].astype(np.float64)
    orbit = orbit_sum.astype(np.float64) / n_safe
    spectral_pmf = None
    if spectral:
        tot = spectral_hist.sum(1, keepdims=True).astype(np.float64)
        spectral_pmf = np.divide(spectral_hist, tot, out=np.zeros(spectral_hist.shape),
                                 where=tot > 0)
    return GraphStatistics(num_nodes=sizes, degree_hist=degree_hist,
                           clustering_hist=clustering_hist, orbit=orbit, spectral=spectral_pmf)


def clustering_histograms(graph_index, degree, triangles, num_graphs: int) -> np.ndarray:
    """100-bin clustering histograms from per-node (graph, degree, triangle count).

    Matches ``np.histogram(list(nx.clustering(g).values()), bins=100, range=(0, 1))``
    bit for bit: the coefficient ``2t / (d(d-1))`` (0 when ``t = 0``) is computed in
    float64 and binned against the same float64 edges ``np.histogram`` uses.
    """
    d = np.asarray(degree, np.int64)
    t = np.asarray(triangles, np.int64)
    denom = np.maximum(d * (d - 1), 1)
    c = np.where(t > 0, (2 * t) / denom, 0.0)
    edges = np.linspace(0.0, 1.0, CLUSTERING_BINS + 1)
    b = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, CLUSTERING_BINS - 1)
    flat = np.asarray(graph_index, np.int64) * CLUSTERING_BINS + b
    return np.bincount(flat, minlength=num_graphs * CLUSTERING_BINS).reshape(
        num_graphs, CLUSTERING_BINS)
