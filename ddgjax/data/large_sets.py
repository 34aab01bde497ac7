"""The large procedural benchmarks of PolyGraph (2026): Planar-L, SBM-L and Lobster-L.

Each has 8,192 training, 4,096 validation and 4,096 test graphs, generated on first use
and cached on disk (``cache_dir()``), never committed. The graphs are the benchmark's:
every (dataset, split) draws from its own ``numpy.random.default_rng`` seeded, as the
``polygraph-benchmark`` package seeds it, by the MD5 digest (:func:`config_digest`) of
the generator's parameters, the seed 42 and the split name (facts from that package's
source; the code here is ours):

=============  ==========================================================================
name           graphs
=============  ==========================================================================
``planar_l``   Delaunay triangulations of 64 points uniform in the unit square
``sbm_l``      k ~ U{2..5} blocks of U{20..40} nodes, p_in 0.3, p_out 0.005 (40-187 nodes)
``lobster_l``  ``networkx.random_lobster(80, 0.7, 0.7)``, redrawn until 10 <= n <= 100
=============  ==========================================================================
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
from typing import Callable

import networkx as nx
import numpy as np

from ddgjax.data.formats import GraphListFile, read_graph_list, write_graph_list
from ddgjax.graphs import GraphFormatError

SPLIT_SIZES = {"train": 8192, "val": 4096, "test": 4096}
# networkx >= 3.5 renamed random_lobster (the same generator)
_random_lobster = getattr(nx, "random_lobster_graph", None) or nx.random_lobster
SEED = 42


class _ValueHasher(pickle._Pickler):  # noqa: SLF001 - the pure-Python pickler, as joblib's
    """Pickle protocol 3 without memo entries for strings: the bytes that ``joblib.hash``
    digests for a tuple of numbers, strings and tuples."""

    def memoize(self, obj):
        if not isinstance(obj, (str, bytes)):
            super().memoize(obj)


def config_digest(config: tuple) -> str:
    """MD5 hex digest of ``config`` as ``joblib.hash(config, hash_name="md5")`` gives it
    (e.g. ``(4096, 64, 42, "test")`` -> ``fe55675c...``, Planar-L's test split)."""
    stream = io.BytesIO()
    _ValueHasher(stream, protocol=3).dump(config)
    return hashlib.md5(stream.getvalue()).hexdigest()


def split_rng(config: tuple) -> np.random.Generator:
    """The generator of one split: seeded by the digest's hex text read as a big integer."""
    return np.random.default_rng(int.from_bytes(config_digest(config).encode(), "big"))


def planar_l_graph(rng: np.random.Generator, num_nodes: int = 64) -> nx.Graph:
    """Delaunay triangulation of ``num_nodes`` points ``rng.uniform(size=(n, 2))``."""
    from scipy.spatial import Delaunay

    points = rng.uniform(size=(num_nodes, 2))
    g = nx.Graph()
    g.add_nodes_from(range(num_nodes))
    for a, b, c in Delaunay(points).simplices.tolist():
        g.add_edges_from(((a, b), (a, c), (b, c)))
    return g


def sbm_l_graph(rng: np.random.Generator, p_in: float = 0.3, p_out: float = 0.005,
                blocks: tuple = (2, 5), block_size: tuple = (20, 40)) -> nx.Graph:
    """k blocks (inclusive range), their sizes (inclusive range), then one uniform
    ``[n, n]`` matrix whose strict upper triangle below the pair's probability is the edges;
    nodes block by block."""
    k = rng.integers(blocks[0], blocks[1] + 1)
    sizes = rng.integers(block_size[0], block_size[1] + 1, size=k)
    labels = np.repeat(np.arange(k), sizes)
    prob = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rng.random(prob.shape) < prob, 1)
    g = nx.Graph()
    g.add_nodes_from(range(labels.shape[0]))
    g.add_edges_from(zip(*np.nonzero(upper)))
    return g


def lobster_l_graph(rng: np.random.Generator, backbone: int = 80, p1: float = 0.7,
                    p2: float = 0.7, min_nodes: int = 10, max_nodes: int = 100) -> nx.Graph:
    """``networkx.random_lobster`` with a seed drawn from ``rng`` per try, until its node
    count is in ``[min_nodes, max_nodes]``."""
    while True:
        g = _random_lobster(backbone, p1, p2, seed=int(rng.integers(1e9)))
        if min_nodes <= g.number_of_nodes() <= max_nodes:
            return nx.convert_node_labels_to_integers(g)


# name -> (the digested parameters after the graph count, the graph of one draw)
LARGE_SETS: dict[str, tuple[tuple, Callable[[np.random.Generator], nx.Graph]]] = {
    "planar_l": ((64,), planar_l_graph),
    "sbm_l": ((0.3, 0.005, (2, 5), (20, 40)), sbm_l_graph),
    "lobster_l": ((80, 0.7, 0.7, 10, 100), lobster_l_graph),
}
LARGE_NAMES = tuple(LARGE_SETS)


def generate_split(name: str, split: str, num_graphs: int | None = None) -> list[nx.Graph]:
    """The first ``num_graphs`` graphs (default: all) of ``split`` of large set ``name``."""
    params, graph = LARGE_SETS[name]
    size = SPLIT_SIZES[split]
    rng = split_rng((size, *params, SEED, split))
    return [graph(rng) for _ in range(size if num_graphs is None else num_graphs)]


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/ddgjax`` (default ``~/.cache/ddgjax``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ddgjax")


def read_cached(name: str) -> GraphListFile:
    """The graph list of large set ``name`` (train, val, test in that order, with their
    ``split``) from its cache file, generated and written on first use (seconds to a few
    minutes) or when the file cannot be read."""
    path = os.path.join(cache_dir(), f"{name}.json.gz")
    if os.path.exists(path):
        try:
            return read_graph_list(path)
        except GraphFormatError:  # a damaged cache (e.g. a killed write) is made again
            os.remove(path)
    graphs, split = [], {}
    for part in ("train", "val", "test"):
        made = generate_split(name, part)
        split[part] = list(range(len(graphs), len(graphs) + len(made)))
        graphs += made
    os.makedirs(cache_dir(), exist_ok=True)
    write_graph_list(path, graphs, name=name, split=split)
    return GraphListFile(graphs=graphs, split=split, name=name, path=path)
