"""Graph file formats: JSON graph lists (read and write), edge lists, GraphML, pickles.

Every reader returns raw ``networkx.Graph`` objects; cleaning (node labels to
``0..n-1``, self-loops dropped) happens where a dataset is built
(:func:`ddgjax.graphs.clean_graph`). Errors are
:class:`~ddgjax.graphs.GraphFormatError` and name the file, the graph index or
line, and the field or problem.

JSON graph-list format (the format of the bundled datasets and of sampled graphs)::

    {"name": str, "split": {"train": [...], "test": [...], ...},
     "graphs": [{"n": int, "edges": [[i, j], ...],
                 "label": str | int,                        # optional
                 "properties": {"NAME": number, ...}}, ...]} # optional

with nodes ``0..n-1`` and each edge listed once; a bare list of graph records
is read too. Non-list ``split`` entries (such as a ``rule`` description string)
are ignored. The optional graph-level fields: ``label``, the graph's class (a
non-empty string or an integer, not a boolean), and ``properties``, named
numeric graph-level properties (an object of non-empty names to finite
numbers, not booleans; an empty object counts as absent). They are read into
``g.graph["label"]`` and ``g.graph["properties"]`` (a plain dict), checked by
:func:`ddgjax.graphs.check_graph_labels`, and written back by
:func:`graph_to_record`, so files round-trip.

Edge-list files (``*.txt``, ``*.edgelist``, ``*.edges``): one ``i j`` pair of
integer node ids per line, ``#`` comments. GraphML files (``*.graphml``): one
graph each. Pickles (``*.pkl``, ``*.pickle``): a list of networkx graphs or a
``{"train", "test"[, "val"]}`` dict of lists; read only on request, since
unpickling runs code.

:func:`read_graphs` picks the reader for a path (file or directory) by its
type and suffix.
"""
from __future__ import annotations

import gzip
import json
import os
import pickle
import warnings
from typing import Any, NamedTuple, Sequence

import networkx as nx

from ddgjax.graphs import GraphFormatError, _where, check_graph_labels, clean_graph

EDGE_LIST_SUFFIXES = (".txt", ".edgelist", ".edges")
GRAPHML_SUFFIXES = (".graphml",)
PICKLE_SUFFIXES = (".pkl", ".pickle")
JSON_SUFFIXES = (".json", ".json.gz")


class GraphListFile(NamedTuple):
    """Graphs read from one JSON graph-list file (or another source, see :func:`read_graphs`).

    Attributes:
      graphs: all graphs in file order.
      split: name -> list of graph indices (empty if the file has none).
      name: dataset name (file stem if absent).
      path: the file it came from.
    """

    graphs: list
    split: dict
    name: str
    path: str


# ----------------------------------------------------------------------------
# JSON graph lists


def _graph_from_record(rec: Any, path: str, index: int) -> nx.Graph:
    """One ``{"n": int, "edges": [[i, j], ...]}`` record (optional ``label`` and
    ``properties``) -> graph with nodes ``0..n-1``, its label and properties in
    ``g.graph`` where the record has them."""
    where = _where(path, index)
    if not isinstance(rec, dict):
        raise GraphFormatError(f"{where}expected an object with fields 'n' and 'edges', "
                               f"got {type(rec).__name__}")
    if "n" not in rec:
        raise GraphFormatError(f"{where}missing field 'n' (number of nodes)")
    n = rec["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise GraphFormatError(f"{where}field 'n' must be a non-negative integer, got {n!r}")
    edges = rec.get("edges", [])
    if not isinstance(edges, list):
        raise GraphFormatError(f"{where}field 'edges' must be a list of [i, j] pairs")
    label, properties = check_graph_labels(rec.get("label"), rec.get("properties"), where)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    if label is not None:
        g.graph["label"] = label
    if properties is not None:
        g.graph["properties"] = properties
    loops = 0
    for k, e in enumerate(edges):
        if (not isinstance(e, (list, tuple)) or len(e) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
            raise GraphFormatError(
                f"{where}field 'edges'[{k}] must be a pair of integer node ids, got {e!r}")
        i, j = e
        if not (0 <= i < n and 0 <= j < n):
            raise GraphFormatError(
                f"{where}field 'edges'[{k}] = {e!r} points outside nodes 0..{n - 1}")
        if i == j:
            loops += 1
            continue
        g.add_edge(i, j)
    if loops:
        warnings.warn(f"{where}dropped {loops} self-loop(s)", stacklevel=3)
    return g


def read_graph_list(path: str | os.PathLike) -> GraphListFile:
    """Read a JSON graph-list file (gzip-compressed if its name ends in ``.gz``).

    Errors name the file, the graph and the field.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: file not found")
    try:
        opener = gzip.open if path.lower().endswith(".gz") else open
        with opener(path, "rt") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"{path}: malformed JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{path}: not a text JSON file: {e}") from e
    except (OSError, EOFError) as e:  # a damaged or non-gzip .gz file
        raise GraphFormatError(f"{path}: cannot read: {e}") from e
    if isinstance(data, list):  # a bare list of graph records is accepted too
        data = {"graphs": data}
    if not isinstance(data, dict) or "graphs" not in data:
        raise GraphFormatError(f"{path}: expected an object with a field 'graphs'")
    if not isinstance(data["graphs"], list):
        raise GraphFormatError(f"{path}: field 'graphs' must be a list")
    graphs = [_graph_from_record(r, path, i) for i, r in enumerate(data["graphs"])]
    split = data.get("split") or {}
    if not isinstance(split, dict):
        raise GraphFormatError(f"{path}: field 'split' must be an object of index lists")
    clean_split = {}
    for k, v in split.items():
        if not isinstance(v, list):
            continue  # e.g. the 'rule' description string
        if not all(isinstance(x, int) and 0 <= x < len(graphs) for x in v):
            raise GraphFormatError(
                f"{path}: field 'split'.{k} must list graph indices in 0..{len(graphs) - 1}")
        clean_split[k] = list(v)
    name = data.get("name") or _stem(path)
    return GraphListFile(graphs=graphs, split=clean_split, name=str(name), path=path)


def paper_split(num_graphs: int) -> dict[str, list[int]]:
    """The paper's split: test = indices ``0..int(0.2 N)-1``, train = the rest, no val."""
    num_test = int(0.2 * num_graphs)
    return {"train": list(range(num_test, num_graphs)), "test": list(range(num_test)), "val": []}


def file_splits(num_graphs: int, split: dict | None) -> dict[str, list[int]]:
    """The one split rule of every entry point (training, sampling, evaluation, completion,
    likelihood): a file's own ``split`` (``val`` empty where it has none), else
    :func:`paper_split` (test = the first 20 %)."""
    if not split:
        return paper_split(num_graphs)
    return {"val": [], **{k: list(v) for k, v in split.items()}}


def select_split(f: GraphListFile, split: str | None) -> list:
    """Graphs of one named split of a file (all graphs for None), by :func:`file_splits`."""
    if split is None:
        return list(f.graphs)
    parts = file_splits(len(f.graphs), f.split)
    if split not in parts:
        raise GraphFormatError(f"{f.path}: unknown split {split!r}; the file has "
                               f"{', '.join(sorted(parts))}")
    return [f.graphs[i] for i in parts[split]]


def graph_to_record(g: nx.Graph) -> dict:
    """networkx graph -> ``{"n": n, "edges": [[i, j], ...]}`` with i<j, sorted, plus
    ``"label"`` and ``"properties"`` where the graph carries them (``g.graph``)."""
    g = clean_graph(g)
    edges = sorted((min(u, v), max(u, v)) for u, v in g.edges())
    rec = {"n": g.number_of_nodes(), "edges": [[int(u), int(v)] for u, v in edges]}
    for key in ("label", "properties"):
        if key in g.graph:
            rec[key] = g.graph[key]
    return rec


def write_graph_list(path: str | os.PathLike, graphs: Sequence[nx.Graph], name: str = "",
                     split: dict | None = None, **extra) -> None:
    """Write graphs to a JSON graph-list file atomically (temp file + rename), gzip-compressed
    where ``path`` ends in ``.gz``.

    ``name`` defaults to the file stem; ``extra`` keyword fields are written
    beside ``name`` (e.g. provenance of sampled graphs).
    """
    path = os.fspath(path)
    data = {"name": name or _stem(path), **extra,
            "split": split or {}, "graphs": [graph_to_record(g) for g in graphs]}
    tmp = f"{path}.tmp{os.getpid()}"
    opener = gzip.open if path.lower().endswith(".gz") else open   # as read_graph_list reads
    with opener(tmp, "wt") as f:
        json.dump(data, f)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------
# edge lists and GraphML


def _suffix(path: str) -> str:
    """Lower-case suffix; ``.json.gz`` counts as one."""
    if path.lower().endswith(".json.gz"):
        return ".json.gz"
    return os.path.splitext(path)[1].lower()


def _stem(path: str) -> str:
    name = os.path.basename(os.path.normpath(path))
    return name[:-len(_suffix(name))] if _suffix(name) else name


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


# ----------------------------------------------------------------------------
# pickles


def read_graph_pickle(path: str) -> tuple[list, dict | None]:
    """Unpickle a list of networkx graphs, or a dict ``{"train", "test"[, "val"]}`` of lists.

    Unpickling runs whatever code the file names: call only on trusted files.
    Returns ``(graphs, split)``, split None for a plain list; for a dict the
    graphs are concatenated train, val, test and the split indexes them.
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


# ----------------------------------------------------------------------------
# dispatch on a path


def read_graphs(path: str, allow_pickle: bool = False) -> GraphListFile:
    """Read the graphs of any supported file or directory, chosen by type and suffix.

    Returns a :class:`GraphListFile`: ``name`` is the JSON ``name`` field or
    the file/directory stem; ``split`` is the split the source carries (a JSON
    file's index lists, a pickled split dict's) and empty otherwise. Graphs are
    not cleaned yet. Pickles are refused unless ``allow_pickle``.
    """
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: file or directory not found")
    if os.path.isdir(path):
        return GraphListFile(read_graph_dir(path), {}, _stem(path), path)
    suffix = _suffix(path)
    if suffix in JSON_SUFFIXES:
        return read_graph_list(path)
    if suffix in GRAPHML_SUFFIXES:
        return GraphListFile([read_graphml(path)], {}, _stem(path), path)
    if suffix in EDGE_LIST_SUFFIXES:
        return GraphListFile([read_edge_list(path)], {}, _stem(path), path)
    if suffix in PICKLE_SUFFIXES:
        if not allow_pickle:
            raise GraphFormatError(
                f"{path}: refusing to load a pickle, which can run arbitrary code; pass "
                "allow_pickle=True if you trust the file, or convert it to the JSON graph-list "
                "format (ddgjax.data.write_graph_list)")
        graphs, split = read_graph_pickle(path)
        return GraphListFile(graphs, split or {}, _stem(path), path)
    raise GraphFormatError(
        f"{path}: unknown format {suffix or '(no suffix)'!r}; supported: JSON (.json, .json.gz), GraphML "
        f"(.graphml), edge lists ({', '.join(EDGE_LIST_SUFFIXES)}), a directory of those, "
        f"pickles ({', '.join(PICKLE_SUFFIXES)}, with allow_pickle=True), or builtin:NAME")
