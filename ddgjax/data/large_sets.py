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

Graph-level properties (``g.graph["properties"]``, see :mod:`ddgjax.data.formats`): SBM-L
graphs carry ``{"communities": k}``, the number of blocks drawn. Caches written before
graphs carried properties stay valid: :func:`read_cached` recovers each graph's properties
by replaying its split's draws (:func:`split_properties`, :data:`LARGE_REPLAYS`) without
building the graphs.
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


def _sbm_l_block_sizes(rng: np.random.Generator, blocks: tuple, block_size: tuple) -> np.ndarray:
    """The first draws of one SBM-L graph: k (inclusive range ``blocks``), then k sizes
    (inclusive range ``block_size``) -> ``int64[k]``."""
    k = rng.integers(blocks[0], blocks[1] + 1)
    return rng.integers(block_size[0], block_size[1] + 1, size=k)


def sbm_l_graph(rng: np.random.Generator, p_in: float = 0.3, p_out: float = 0.005,
                blocks: tuple = (2, 5), block_size: tuple = (20, 40)) -> nx.Graph:
    """k blocks (inclusive range), their sizes (inclusive range), then one uniform
    ``[n, n]`` matrix whose strict upper triangle below the pair's probability is the edges;
    nodes block by block. Sets ``g.graph["properties"] = {"communities": k}``."""
    sizes = _sbm_l_block_sizes(rng, blocks, block_size)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    prob = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rng.random(prob.shape) < prob, 1)
    g = nx.Graph(properties={"communities": len(sizes)})
    g.add_nodes_from(range(labels.shape[0]))
    g.add_edges_from(zip(*np.nonzero(upper)))
    return g


def skip_doubles(rng: np.random.Generator, count: int) -> None:
    """Advance ``rng`` past ``count`` float64 draws (``rng.random(count)``) in O(1).

    ``Generator.random`` spends one 64-bit output of the bit generator per double; the bit
    generator's ``advance`` skips those but drops its buffered half of a 64-bit output (left
    by 32-bit draws such as small-range ``integers``), which ``random`` would have kept, so
    the buffer is put back.
    """
    bits = rng.bit_generator
    before = bits.state
    bits.advance(count)
    after = bits.state
    if "has_uint32" in before:
        after["has_uint32"], after["uinteger"] = before["has_uint32"], before["uinteger"]
    bits.state = after


def sbm_l_replay(rng: np.random.Generator, p_in: float = 0.3, p_out: float = 0.005,
                 blocks: tuple = (2, 5), block_size: tuple = (20, 40)) -> tuple[dict, int]:
    """Replay one :func:`sbm_l_graph` draw without building it: ``rng`` ends where the
    generator leaves it. Returns ``({"communities": k}, number of nodes)``."""
    sizes = _sbm_l_block_sizes(rng, blocks, block_size)
    n = int(sizes.sum())
    skip_doubles(rng, n * n)
    return {"communities": len(sizes)}, n


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
# name -> replay of one graph's draws for the sets whose graphs carry properties: consumes
# exactly what the set's graph function draws; returns (properties, number of nodes)
LARGE_REPLAYS: dict[str, Callable[[np.random.Generator], tuple[dict, int]]] = {
    "sbm_l": sbm_l_replay,
}


def _split_rng(name: str, split: str) -> np.random.Generator:
    params, _ = LARGE_SETS[name]
    return split_rng((SPLIT_SIZES[split], *params, SEED, split))


def generate_split(name: str, split: str, num_graphs: int | None = None) -> list[nx.Graph]:
    """The first ``num_graphs`` graphs (default: all) of ``split`` of large set ``name``."""
    _, graph = LARGE_SETS[name]
    rng = _split_rng(name, split)
    return [graph(rng) for _ in range(SPLIT_SIZES[split] if num_graphs is None else num_graphs)]


def replay_split(name: str, split: str,
                 num_graphs: int | None = None) -> list[tuple[dict, int]] | None:
    """``(properties, number of nodes)`` of the first ``num_graphs`` graphs (default: all) of
    ``split`` of large set ``name``, as :func:`generate_split` would draw them, by replaying
    the draws without building graphs (a fraction of a second for a whole split); None for a
    set whose graphs carry no properties."""
    replay = LARGE_REPLAYS.get(name)
    if replay is None:
        return None
    rng = _split_rng(name, split)
    return [replay(rng) for _ in range(SPLIT_SIZES[split] if num_graphs is None else num_graphs)]


def split_properties(name: str, split: str, num_graphs: int | None = None) -> list[dict] | None:
    """The property dicts of the first ``num_graphs`` graphs (default: all) of ``split``
    (e.g. ``[{"communities": 3}, ...]`` for ``sbm_l``); None for a set without properties."""
    replayed = replay_split(name, split, num_graphs)
    return None if replayed is None else [props for props, _ in replayed]


def attach_properties(name: str, f: GraphListFile) -> GraphListFile:
    """Set the ``g.graph["properties"]`` of each graph of large set ``name``'s graph list
    ``f`` (cache file order; ``f.split`` names each split's graphs) to its replayed
    properties, merged under any the file carries (in place; returns ``f``; a set without
    properties is left alone). Raises GraphFormatError where a graph's node count differs
    from the replayed one (a cache of other graphs)."""
    if name not in LARGE_REPLAYS:
        return f
    for split, indices in f.split.items():
        if split not in SPLIT_SIZES:
            continue
        for i, (props, n) in zip(indices, replay_split(name, split, len(indices))):
            g = f.graphs[i]
            if g.number_of_nodes() != n:
                raise GraphFormatError(f"{f.path}: graph {i}: has {g.number_of_nodes()} nodes, "
                                       f"but {name}'s {split} draws give {n}")
            g.graph["properties"] = {**props, **g.graph.get("properties", {})}
    return f


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/ddgjax`` (default ``~/.cache/ddgjax``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ddgjax")


def read_cached(name: str) -> GraphListFile:
    """The graph list of large set ``name`` (train, val, test in that order, with their
    ``split``) from its cache file, generated and written on first use (seconds to a few
    minutes) or when the file cannot be read or holds other graphs. Graphs of sets with
    properties carry them (``g.graph["properties"]``), replayed for caches written without
    them (:func:`attach_properties`)."""
    path = os.path.join(cache_dir(), f"{name}.json.gz")
    if os.path.exists(path):
        try:
            return attach_properties(name, read_graph_list(path))
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
