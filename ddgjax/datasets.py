"""Graph datasets: loaders, seeded generators, splits and the node-count distribution.

One entry point, :func:`load_dataset`, turns a *source* string into a
:class:`Dataset` of train / test / val lists of ``networkx.Graph`` (nodes
``0..n-1``, no self-loops, no attributes):

==========================  ===================================================
source                      meaning
==========================  ===================================================
``path/to/file.json``       JSON graph-list file (the format of
                            ``../shared/data``, see :mod:`ddgjax.graphs`)
``path/to/dir/``            a directory of edge-list files (``*.txt``,
                            ``*.edgelist``, ``*.edges``) or of GraphML files
                            (``*.graphml``), one graph per file
``path/to/g.graphml``       one GraphML graph (a one-graph dataset)
``path/to/g.edgelist``      one edge-list graph (``.txt``/``.edges`` too)
``path/to/list.pkl``        a pickled list of networkx graphs (``.pickle``
                            too); only with ``allow_pickle=True``
``builtin:NAME``            a seeded generator, NAME one of
                            :data:`BUILTIN_NAMES`
==========================  ===================================================

Splits.
  * A JSON file's own ``split`` (``train``/``test`` and optionally ``val``
    index lists) is used when it has one.
  * Otherwise the paper's rule (EDP-GNN / GDSS / the seed code): no shuffling,
    test = the first ``int(0.2 * len)`` graphs of the file, train = the rest,
    no val. Directories are in lexicographic filename order (``g10`` sorts
    before ``g2``: zero-pad the numbers if the order matters).
  * Generated paper sets (``community_small``, ``sbm_27``, ``planar_60``) use
    the paper's rule on generation order; generated SPECTRE sets
    (``spectre_planar_64``, ``spectre_sbm``) use SPECTRE's 128/32/40 lengths
    (test = round(0.2 N), train = round(0.8 (N - test)), val = the rest) on a
    random permutation drawn from ``numpy.random.default_rng([seed, 1])``
    (a stream separate from the graphs'; *not* the torch permutation of the
    SPECTRE files, which only the JSON files reproduce).

Every loaded graph passes through :func:`ddgjax.graphs.clean_graph`
(self-loops dropped with a warning, labels relabelled to ``0..n-1`` in sorted
order). Errors are :class:`~ddgjax.graphs.GraphFormatError` and name the file,
the graph index or line where relevant, and the problem.

Node counts for sampling come from :func:`node_count_distribution` of the
training split (the empirical distribution, i.e. "copy ``n`` from a random
training graph").
"""
from __future__ import annotations

import os
import pickle
import warnings
from typing import Callable, NamedTuple, Sequence

import networkx as nx
import numpy as np

from ddgjax.graphs import GraphFormatError, clean_graph, read_graph_list

EDGE_LIST_SUFFIXES = (".txt", ".edgelist", ".edges")
GRAPHML_SUFFIXES = (".graphml",)
PICKLE_SUFFIXES = (".pkl", ".pickle")
JSON_SUFFIXES = (".json",)
BUILTIN_PREFIX = "builtin:"


class Dataset(NamedTuple):
    """A dataset split into lists of ``networkx.Graph`` (nodes ``0..n-1``).

    Attributes:
      name: dataset name (JSON ``name`` field, file/dir stem, or builtin NAME).
      train: training graphs.
      test: test graphs (the reference set of the metrics).
      val: validation graphs; empty where the dataset has none.
      source: the source string it was loaded from (path or ``builtin:NAME``).
    """

    name: str
    train: list
    test: list
    val: list
    source: str


# ----------------------------------------------------------------------------
# splits


def paper_split(num_graphs: int) -> dict[str, list[int]]:
    """The paper's split: test = indices ``0..int(0.2 N)-1``, train = the rest, no val."""
    num_test = int(0.2 * num_graphs)
    return {"train": list(range(num_test, num_graphs)), "test": list(range(num_test)), "val": []}


def spectre_split(num_graphs: int, seed: int) -> dict[str, list[int]]:
    """SPECTRE-style random split; 128/32/40 train/val/test for ``num_graphs=200``.

    Lengths: test = round(0.2 N), train = round(0.8 (N - test)), val = the rest.
    The permutation comes from ``numpy.random.default_rng([seed, 1])``; each
    index list is sorted ascending.
    """
    num_test = int(round(0.2 * num_graphs))
    num_train = int(round(0.8 * (num_graphs - num_test)))
    perm = np.random.default_rng([seed, 1]).permutation(num_graphs)
    train = sorted(perm[:num_train].tolist())
    val = sorted(perm[num_train:num_graphs - num_test].tolist())
    test = sorted(perm[num_graphs - num_test:].tolist())
    return {"train": train, "test": test, "val": val}


def _check_split(split: dict, num_graphs: int, where: str) -> dict[str, list[int]]:
    """Validate a carried split: needs train and test, no index in two parts."""
    missing = [k for k in ("train", "test") if k not in split]
    if missing:
        raise GraphFormatError(f"{where}: split lacks {missing}; it has {sorted(split)} "
                               "(remove 'split' to use the paper rule: first 20% test)")
    parts = {k: list(split.get(k, [])) for k in ("train", "test", "val")}
    for k, idx in parts.items():
        bad = [i for i in idx if not (isinstance(i, (int, np.integer)) and 0 <= i < num_graphs)]
        if bad:
            raise GraphFormatError(f"{where}: split '{k}' has indices outside 0..{num_graphs - 1}: "
                                   f"{bad[:5]}")
    for a, b in (("train", "test"), ("train", "val"), ("val", "test")):
        both = sorted(set(parts[a]) & set(parts[b]))
        if both:
            raise GraphFormatError(f"{where}: graphs {both[:5]} are in both split '{a}' and '{b}'")
    return parts


def _make_dataset(name: str, graphs: Sequence[nx.Graph], split: dict | None,
                  source: str, where: str) -> Dataset:
    """Clean every graph, check non-emptiness and apply ``split`` (paper rule if None)."""
    if not graphs:
        raise GraphFormatError(f"{where}: contains no graphs")
    graphs = [clean_graph(g, where, i) for i, g in enumerate(graphs)]
    for i, g in enumerate(graphs):
        if g.number_of_nodes() == 0:
            raise GraphFormatError(f"{where}: graph {i}: has no nodes")
    parts = _check_split(split, len(graphs), where) if split else paper_split(len(graphs))
    if not parts["train"]:
        raise GraphFormatError(f"{where}: the training split is empty ({len(graphs)} graphs)")
    if not parts["test"]:
        warnings.warn(f"{where}: the test split is empty ({len(graphs)} graphs; the paper rule "
                      "puts int(0.2 * N) graphs in test)", stacklevel=3)
    pick = lambda key: [graphs[i] for i in parts[key]]  # noqa: E731
    return Dataset(name=name, train=pick("train"), test=pick("test"), val=pick("val"),
                   source=source)


# ----------------------------------------------------------------------------
# file readers (each returns a list of raw graphs, plus a split where the file has one)


def _suffix(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def read_edge_list(path: str) -> nx.Graph:
    """Read one edge-list file: one ``i j`` pair of integers per line.

    ``#`` starts a comment (whole line or trailing); blank lines are skipped;
    tokens after the first two on a line (e.g. the ``{}`` data column that
    ``networkx.write_edgelist`` writes by default) are ignored. Node ids may be
    any integers; they are relabelled to ``0..n-1`` in sorted order later.
    Isolated nodes cannot be expressed in this format: a node is a node only
    if some edge touches it. An empty file is an error.
    """
    g = nx.Graph()
    try:
        with open(path) as f:
            lines = f.readlines()
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{path}: not a text edge-list file: {e}") from e
    for lineno, line in enumerate(lines, start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) < 2:
            raise GraphFormatError(f"{path}: line {lineno}: expected two node ids 'i j', "
                                   f"got {line.strip()!r}")
        try:
            u, v = int(tokens[0]), int(tokens[1])
        except ValueError as e:
            raise GraphFormatError(f"{path}: line {lineno}: node ids must be integers, "
                                   f"got {line.strip()!r}") from e
        g.add_edge(u, v)
    if g.number_of_nodes() == 0:
        raise GraphFormatError(f"{path}: no edges (an edge-list file cannot express a graph "
                               "without edges)")
    return g


def _int_labels_if_possible(g: nx.Graph) -> nx.Graph:
    """Relabel string node ids that all spell integers (GraphML's ``"0"``..) to ints.

    Without this, sorted relabelling would put ``"10"`` before ``"2"``.
    """
    try:
        mapping = {v: int(v) for v in g.nodes}
    except (TypeError, ValueError):
        return g
    if len(set(mapping.values())) != len(mapping):
        return g
    return nx.relabel_nodes(g, mapping)


def read_graphml(path: str) -> nx.Graph:
    """Read the (first) graph of a GraphML file; integer-looking ids become ints."""
    try:
        g = nx.read_graphml(path)
    except Exception as e:  # networkx raises several types (NetworkXError, ParseError, ...)
        raise GraphFormatError(f"{path}: malformed GraphML: {type(e).__name__}: {e}") from e
    return _int_labels_if_possible(g)


def read_graph_dir(path: str) -> list[nx.Graph]:
    """Read a directory of edge-list or GraphML files, one graph per file.

    Files are taken in lexicographic filename order; files with other suffixes
    are ignored with a warning (hidden files silently); subdirectories are
    ignored. Mixing edge-list and GraphML files is an error.
    """
    names = sorted(n for n in os.listdir(path)
                   if not n.startswith(".") and os.path.isfile(os.path.join(path, n)))
    edge_files = [n for n in names if _suffix(n) in EDGE_LIST_SUFFIXES]
    graphml_files = [n for n in names if _suffix(n) in GRAPHML_SUFFIXES]
    other = [n for n in names if n not in edge_files and n not in graphml_files]
    if edge_files and graphml_files:
        raise GraphFormatError(f"{path}: mixes edge-list files ({edge_files[0]}, ...) and "
                               f"GraphML files ({graphml_files[0]}, ...); use one format")
    if not edge_files and not graphml_files:
        raise GraphFormatError(
            f"{path}: no graph files found (expected "
            f"{', '.join('*' + s for s in EDGE_LIST_SUFFIXES + GRAPHML_SUFFIXES)})")
    if other:
        warnings.warn(f"{path}: ignoring {len(other)} file(s) of other types: {other[:5]}",
                      stacklevel=3)
    if edge_files:
        return [read_edge_list(os.path.join(path, n)) for n in edge_files]
    return [read_graphml(os.path.join(path, n)) for n in graphml_files]


def read_graph_pickle(path: str) -> tuple[list, dict | None]:
    """Unpickle a list of networkx graphs, or a dict ``{"train", "test"[, "val"]}`` of lists.

    Unpickling runs whatever code the file names: call only on trusted files.
    Returns ``(graphs, split)``, split None for a plain list.
    """
    warnings.warn(f"{path}: loading a pickle, which can run arbitrary code; load only files "
                  "you trust (the JSON graph-list format is safe)", stacklevel=3)
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
    except Exception as e:  # pickle can raise almost anything
        raise GraphFormatError(f"{path}: cannot unpickle: {type(e).__name__}: {e}") from e
    if isinstance(obj, dict) and {"train", "test"} <= set(obj):
        graphs, split, start = [], {}, 0
        for key in ("train", "val", "test"):
            part = list(obj.get(key, []))
            graphs.extend(part)
            split[key] = list(range(start, start + len(part)))
            start += len(part)
        return graphs, split
    if not isinstance(obj, (list, tuple)):
        raise GraphFormatError(f"{path}: expected a pickled list of networkx graphs (or a dict "
                               f"with 'train' and 'test' lists), got {type(obj).__name__}")
    return list(obj), None


def _load_path(path: str, source: str, allow_pickle: bool) -> Dataset:
    """Dispatch a filesystem path on its type and suffix."""
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: file or directory not found")
    if os.path.isdir(path):
        return _make_dataset(_stem(path), read_graph_dir(path), None, source, path)
    suffix = _suffix(path)
    if suffix in JSON_SUFFIXES:
        f = read_graph_list(path)
        return _make_dataset(f.name, f.graphs, f.split or None, source, path)
    if suffix in GRAPHML_SUFFIXES:
        return _make_dataset(_stem(path), [read_graphml(path)], None, source, path)
    if suffix in EDGE_LIST_SUFFIXES:
        return _make_dataset(_stem(path), [read_edge_list(path)], None, source, path)
    if suffix in PICKLE_SUFFIXES:
        if not allow_pickle:
            raise GraphFormatError(
                f"{path}: refusing to load a pickle, which can run arbitrary code; pass "
                "allow_pickle=True if you trust the file, or convert it to the JSON graph-list "
                "format (ddgjax.graphs.write_graph_list)")
        graphs, split = read_graph_pickle(path)
        return _make_dataset(_stem(path), graphs, split, source, path)
    raise GraphFormatError(
        f"{path}: unknown format {suffix or '(no suffix)'!r}; supported: JSON (.json), GraphML "
        f"(.graphml), edge lists ({', '.join(EDGE_LIST_SUFFIXES)}), a directory of those, "
        f"pickles ({', '.join(PICKLE_SUFFIXES)}, with allow_pickle=True), or builtin:NAME")


# ----------------------------------------------------------------------------
# seeded generators
#
# Every generator takes a numpy Generator and draws from it in a fixed order, so
# ``numpy.random.default_rng(seed)`` fixes the whole list. Nodes are numbered
# block by block (block 0 first). Generated graphs carry their generation data
# in ``g.graph`` (``block_sizes`` for SBM/community graphs, ``points`` for
# planar graphs) for tests and inspection; nothing else reads it.


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
    """Community-small as EDP-GNN's generator draws it (REFERENCE §6, checked on the data).

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


class _Builtin(NamedTuple):
    generate: Callable[[int, np.random.Generator], list]
    num_graphs: int
    split: str  # "paper" or "spectre"


_BUILTINS: dict[str, _Builtin] = {
    "community_small": _Builtin(generate_community_small, 100, "paper"),
    "sbm_27": _Builtin(generate_sbm_27, 200, "paper"),
    "planar_60": _Builtin(_planar_generator(60), 200, "paper"),
    "spectre_planar_64": _Builtin(_planar_generator(64), 200, "spectre"),
    "spectre_sbm": _Builtin(generate_spectre_sbm, 200, "spectre"),
}
BUILTIN_NAMES: tuple[str, ...] = tuple(_BUILTINS)


def _builtin(name: str) -> _Builtin:
    if name not in _BUILTINS:
        raise ValueError(f"unknown builtin dataset {name!r}; valid names: "
                         f"{', '.join(BUILTIN_NAMES)}")
    return _BUILTINS[name]


def generate_graphs(name: str, num_graphs: int | None = None, seed: int = 0) -> list[nx.Graph]:
    """All graphs of builtin ``name`` in generation order, from ``default_rng(seed)``.

    ``num_graphs`` defaults to the dataset's size (100 for community_small, 200
    otherwise). The first ``k`` graphs do not depend on ``num_graphs >= k``.
    The graphs keep their generation data in ``g.graph`` (``block_sizes`` or
    ``points``); :func:`load_dataset` returns cleaned copies without it.
    """
    spec = _builtin(name)
    num_graphs = spec.num_graphs if num_graphs is None else int(num_graphs)
    if num_graphs < 1:
        raise ValueError(f"num_graphs must be at least 1, got {num_graphs}")
    return spec.generate(num_graphs, np.random.default_rng(seed))


def _load_builtin(name: str, source: str, seed: int, num_graphs: int | None) -> Dataset:
    spec = _builtin(name)
    graphs = generate_graphs(name, num_graphs, seed)
    split = paper_split(len(graphs)) if spec.split == "paper" else spectre_split(len(graphs), seed)
    return _make_dataset(name, graphs, split, source, source)


# ----------------------------------------------------------------------------
# the entry point


def load_dataset(source: str | os.PathLike, *, seed: int = 0, allow_pickle: bool = False,
                 num_graphs: int | None = None) -> Dataset:
    """Load a dataset from a path or generate a builtin one (see the module docstring).

    Args:
      source: a path (JSON file, GraphML file, edge-list file, directory of
        edge-list or GraphML files, pickle) or ``"builtin:NAME"``.
      seed: seeds builtin generators and the SPECTRE-style random split; files
        ignore it.
      allow_pickle: allow ``.pkl``/``.pickle`` files (they can run code).
      num_graphs: number of graphs a builtin generator makes (default: the
        dataset's size). Files always load whole; passing it with a path is a
        ValueError (slice the returned lists instead).

    Returns: a :class:`Dataset`.

    Raises:
      GraphFormatError: missing path, unknown format, malformed content, no
        graphs, empty training split.
      ValueError: unknown builtin name (the message lists the valid ones);
        ``num_graphs`` with a path or below 1.
    """
    source = os.fspath(source)
    if source.startswith(BUILTIN_PREFIX):
        return _load_builtin(source[len(BUILTIN_PREFIX):], source, seed, num_graphs)
    if num_graphs is not None:
        raise ValueError(f"{source}: num_graphs applies only to builtin:NAME sources; "
                         "a file always loads whole")
    return _load_path(os.path.expanduser(source), source, allow_pickle)


def max_num_nodes(graphs: Sequence[nx.Graph]) -> int:
    """Largest node count among ``graphs`` (ValueError for an empty list)."""
    if not graphs:
        raise ValueError("max_num_nodes of an empty graph list")
    return max(g.number_of_nodes() for g in graphs)


# ----------------------------------------------------------------------------
# node-count distribution


class NodeCountDistribution(NamedTuple):
    """Empirical distribution of node counts.

    Attributes:
      counts: ``int64[K]`` distinct node counts, ascending.
      probs: ``float64[K]`` their probabilities (sum 1).
    """

    counts: np.ndarray
    probs: np.ndarray

    def to_dict(self) -> dict:
        """JSON-serialisable ``{"counts": [int], "probs": [float]}``."""
        return {"counts": [int(c) for c in self.counts], "probs": [float(p) for p in self.probs]}

    @classmethod
    def from_dict(cls, d: dict) -> "NodeCountDistribution":
        """Inverse of :meth:`to_dict`; validates lengths, positivity and the sum."""
        counts = np.asarray(d["counts"], dtype=np.int64)
        probs = np.asarray(d["probs"], dtype=np.float64)
        if counts.ndim != 1 or counts.shape != probs.shape or counts.size == 0:
            raise ValueError(f"node-count distribution needs equally long non-empty 'counts' and "
                             f"'probs', got {counts.shape} and {probs.shape}")
        if np.any(counts < 1) or np.any(probs < 0) or not np.isclose(probs.sum(), 1.0):
            raise ValueError("node-count distribution needs counts >= 1 and probs >= 0 "
                             f"summing to 1, got sum {probs.sum()}")
        return cls(counts=counts, probs=probs / probs.sum())


def node_count_distribution(graphs: Sequence[nx.Graph]) -> NodeCountDistribution:
    """Empirical node-count distribution of ``graphs`` (normally the training split)."""
    if not graphs:
        raise ValueError("node_count_distribution of an empty graph list")
    sizes = np.asarray([g.number_of_nodes() for g in graphs], dtype=np.int64)
    counts, freq = np.unique(sizes, return_counts=True)
    return NodeCountDistribution(counts=counts, probs=freq / freq.sum())


def sample_node_counts(dist: NodeCountDistribution, num: int,
                       seed_or_rng: int | np.random.Generator) -> np.ndarray:
    """Draw ``num`` node counts i.i.d. from ``dist``.

    Args:
      dist: the distribution.
      num: how many counts.
      seed_or_rng: an int seed or a ``numpy.random.Generator`` (used in place).
    Returns: ``int32[num]``.
    """
    rng = np.random.default_rng(seed_or_rng)
    return rng.choice(dist.counts, size=int(num), p=dist.probs).astype(np.int32)
