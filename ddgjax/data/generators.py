"""Seeded random graph generators and the builtin dataset registry.

Every generator takes a ``numpy.random.Generator`` and draws from it in a fixed
order, so ``numpy.random.default_rng(seed)`` fixes the whole list. Nodes are
numbered block by block (block 0 first). Generated graphs carry their
generation data in ``g.graph`` (``block_sizes`` for SBM/community graphs,
``points`` for planar graphs) for tests and inspection; nothing else reads it.

Builtin datasets (:data:`BUILTIN_NAMES`, loaded as ``builtin:NAME`` by
:func:`ddgjax.data.load_dataset`):

=====================  =======  ===========================================
name                   graphs   graphs are
=====================  =======  ===========================================
``community_small``    100      two ER(0.7) communities, 12-20 nodes
``sbm_27``             200      3-block SBM, 21-27 nodes
``planar_60``          200      Delaunay triangulations of 60 points
``spectre_planar_64``  200      Delaunay triangulations of 64 points
``spectre_sbm``        200      2-5 block SBM, blocks of 20-40 nodes
=====================  =======  ===========================================

Each entry also names its split rule (``"paper"`` or ``"spectre"``, see
:mod:`ddgjax.data.datasets`).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import networkx as nx
import numpy as np


def _bernoulli_edges(rng: np.random.Generator, prob: np.ndarray) -> list[tuple[int, int]]:
    """Sample each strict-upper pair ``i<j`` independently with ``prob[i, j]``.

    Args:
      prob: ``float[n, n]`` edge probabilities (only ``i<j`` is read).
    Returns: list of ``(i, j)`` with ``i<j``.
    """
    iu, ju = np.triu_indices(prob.shape[0], k=1)
    keep = rng.random(iu.shape[0]) < prob[iu, ju]
    return list(zip(iu[keep].tolist(), ju[keep].tolist()))


def sbm_graph(rng: np.random.Generator, block_sizes: Sequence[int], p_intra: float,
              p_inter: float) -> nx.Graph:
    """One stochastic-block-model graph; nodes of block b follow those of block b-1.

    Every pair in the same block is an edge with probability ``p_intra``, every
    pair across blocks with ``p_inter``, independently. Sets
    ``g.graph["block_sizes"] = tuple(block_sizes)``.
    """
    labels = np.repeat(np.arange(len(block_sizes)), block_sizes)
    prob = np.where(labels[:, None] == labels[None, :], p_intra, p_inter)
    g = nx.Graph(block_sizes=tuple(int(s) for s in block_sizes))
    g.add_nodes_from(range(labels.shape[0]))
    g.add_edges_from(_bernoulli_edges(rng, prob))
    return g


def community_graph(rng: np.random.Generator, community_size: int, p_intra: float,
                    p_bridge: float) -> nx.Graph:
    """Two ER(``p_intra``) communities of ``community_size`` nodes joined by bridges.

    Every cross pair is a bridge edge with probability ``p_bridge``,
    independently. If no bridge is drawn, one uniformly random cross pair is
    added, so the communities are always joined by at least one edge. Sets
    ``g.graph["block_sizes"] = (community_size, community_size)``.
    """
    g = sbm_graph(rng, (community_size, community_size), p_intra, p_bridge)
    crosses = any((u < community_size) != (v < community_size) for u, v in g.edges)
    if not crosses:
        u, v = rng.integers(community_size, size=2)
        g.add_edge(int(u), int(v) + community_size)
    return g


def edp_bridge_probability(community_size: int, num_communities: int = 2,
                           p_inter: float = 0.05) -> float:
    """Per-pair bridge probability of EDP-GNN's community generator.

    EDP-GNN's ``p_inter`` is *not* a per-pair probability: it is the expected
    number of bridge edges per node. With M communities of N nodes, M(M-1)/2
    community pairs and N^2 cross pairs each, that gives per pair
    ``p_inter * 2 / ((M - 1) * N)``: 0.1 / N for two communities, i.e. about
    0.013 at N = 8 (about 0.8 bridges per graph, before the forced one).
    The shared ``community_small*.json`` files agree: cross-pair density
    about 0.02, and 79-89% of graphs have exactly one bridge.
    """
    return p_inter * 2.0 / ((num_communities - 1) * community_size)


def delaunay_graph(points: np.ndarray) -> nx.Graph:
    """Graph of the Delaunay triangulation of ``float[n, 2]`` points (node i = point i).

    Sets ``g.graph["points"] = points``. For points in general position it is
    a maximal planar straight-line graph with ``3n - 3 - h`` edges, h the
    number of convex-hull vertices.
    """
    from scipy.spatial import Delaunay  # scipy only needed for planar generators

    tri = Delaunay(points)
    g = nx.Graph(points=np.asarray(points))
    g.add_nodes_from(range(points.shape[0]))
    for simplex in tri.simplices:
        a, b, c = (int(x) for x in simplex)
        g.add_edges_from(((a, b), (b, c), (a, c)))
    return g


def planar_graph(rng: np.random.Generator, num_nodes: int) -> nx.Graph:
    """Delaunay triangulation of ``num_nodes`` uniform random points in the unit square."""
    return delaunay_graph(rng.random((num_nodes, 2)))


def generate_community_small(num_graphs: int, rng: np.random.Generator) -> list[nx.Graph]:
    """Community-small as EDP-GNN's generator draws it, checked against the shared files.

    Provenance: ``docs/method.md``, "Datasets".

    Per graph: ``m`` uniform in ``{12, ..., 20}``, two communities of
    ``k = m // 2`` nodes (so totals are even: 12, 14, 16, 18 with probability
    2/9 each and 20 with 1/9, as in ``community_small.json``), ER(0.7) inside,
    bridges with EDP-GNN's ``p_inter = 0.05`` read as it means it (see
    :func:`edp_bridge_probability`: per pair ``0.1 / k``, not 0.05), at least
    one bridge. Unlike EDP-GNN, the communities are fresh ER draws rather than
    ``gnp(k, 0.7, seed=0 or 1)``, so the set has no forced duplicates (the
    shared files have only 60 distinct graphs in 100, and intra density 0.64).
    """
    graphs = []
    for _ in range(num_graphs):
        k = int(rng.integers(12, 21)) // 2
        graphs.append(community_graph(rng, k, 0.7, edp_bridge_probability(k)))
    return graphs


def generate_sbm_27(num_graphs: int, rng: np.random.Generator) -> list[nx.Graph]:
    """SBM-27: 3 blocks of sizes uniform in ``{7, 8, 9}``, p_intra 0.85, p_inter 0.046875."""
    return [sbm_graph(rng, rng.integers(7, 10, size=3).tolist(), 0.85, 0.046875)
            for _ in range(num_graphs)]


def generate_spectre_sbm(num_graphs: int, rng: np.random.Generator) -> list[nx.Graph]:
    """SPECTRE SBM: ``k`` uniform in ``{2..5}`` blocks, sizes uniform in ``{20..40}``.

    Edge probability 0.3 inside a block, 0.005 between blocks.
    """
    graphs = []
    for _ in range(num_graphs):
        k = int(rng.integers(2, 6))
        graphs.append(sbm_graph(rng, rng.integers(20, 41, size=k).tolist(), 0.3, 0.005))
    return graphs


def _planar_generator(num_nodes: int) -> Callable[[int, np.random.Generator], list[nx.Graph]]:
    def generate(num_graphs: int, rng: np.random.Generator) -> list[nx.Graph]:
        return [planar_graph(rng, num_nodes) for _ in range(num_graphs)]

    generate.__doc__ = (f"Delaunay triangulations of {num_nodes} uniform random points in the "
                        "unit square.")
    return generate


class BuiltinSpec(NamedTuple):
    """How one builtin dataset is made.

    Attributes:
      generate: ``(num_graphs, rng) -> list[nx.Graph]``.
      num_graphs: the dataset's size.
      split: its split rule, ``"paper"`` or ``"spectre"``.
    """

    generate: Callable[[int, np.random.Generator], list]
    num_graphs: int
    split: str


_BUILTINS: dict[str, BuiltinSpec] = {
    "community_small": BuiltinSpec(generate_community_small, 100, "paper"),
    "sbm_27": BuiltinSpec(generate_sbm_27, 200, "paper"),
    "planar_60": BuiltinSpec(_planar_generator(60), 200, "paper"),
    "spectre_planar_64": BuiltinSpec(_planar_generator(64), 200, "spectre"),
    "spectre_sbm": BuiltinSpec(generate_spectre_sbm, 200, "spectre"),
}
BUILTIN_NAMES: tuple[str, ...] = tuple(_BUILTINS)


def builtin_spec(name: str) -> BuiltinSpec:
    """The :class:`BuiltinSpec` of ``name``; ValueError listing the valid names otherwise."""
    if name not in _BUILTINS:
        raise ValueError(f"unknown builtin dataset {name!r}; valid names: "
                         f"{', '.join(BUILTIN_NAMES)}")
    return _BUILTINS[name]


def generate_graphs(name: str, num_graphs: int | None = None, seed: int = 0) -> list[nx.Graph]:
    """All graphs of builtin ``name`` in generation order, from ``default_rng(seed)``.

    ``num_graphs`` defaults to the dataset's size (100 for community_small, 200
    otherwise). The first ``k`` graphs do not depend on ``num_graphs >= k``.
    The graphs keep their generation data in ``g.graph`` (``block_sizes`` or
    ``points``); :func:`ddgjax.data.load_dataset` returns cleaned copies
    without it.
    """
    spec = builtin_spec(name)
    num_graphs = spec.num_graphs if num_graphs is None else int(num_graphs)
    if num_graphs < 1:
        raise ValueError(f"num_graphs must be at least 1, got {num_graphs}")
    return spec.generate(num_graphs, np.random.default_rng(seed))
