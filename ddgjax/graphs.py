"""Padded graph batches and conversions to and from networkx and JSON files.

Convention (the one every other module relies on):

* A batch holds ``B`` simple undirected graphs padded to ``N`` nodes.
* ``adj``: ``float32[B, N, N]``, 0/1, symmetric, zero diagonal, zero in every
  row and column of a padding node.
* ``node_mask``: ``bool[B, N]``; graph ``b`` with ``n_b`` nodes has real nodes
  ``0..n_b-1`` (a prefix) and padding after them.

Self-loops in input graphs are dropped with a warning (the method models only
the strict upper triangle, so a self-loop has no meaning for it).

JSON graph-list format (``../shared/data``)::

    {"name": str, "split": {"train": [...], "test": [...], ...},
     "graphs": [{"n": int, "edges": [[i, j], ...]}, ...]}

with nodes ``0..n-1`` and each edge listed once.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, NamedTuple, Sequence

import networkx as nx
import numpy as np


class GraphFormatError(ValueError):
    """Bad graph input. The message names the file, the graph and the problem."""


class GraphBatch(NamedTuple):
    """``B`` graphs padded to ``N`` nodes (see the module docstring).

    Attributes:
      adj: ``[B, N, N]`` float 0/1 adjacency, symmetric, zero diagonal.
      node_mask: ``[B, N]`` bool, True on real nodes (a prefix of each row).
    """

    adj: Any
    node_mask: Any

    @property
    def num_nodes(self):
        """``int32[B]`` node counts."""
        return self.node_mask.sum(-1).astype(np.int32)


def node_mask_from_counts(num_nodes, max_nodes: int):
    """``[B]`` int node counts -> ``[B, N]`` bool prefix mask (numpy or jax)."""
    xp = _array_module(num_nodes)
    return xp.arange(max_nodes)[None, :] < xp.asarray(num_nodes)[:, None]


def pair_mask(node_mask):
    """``[B, N]`` bool -> ``[B, N, N]`` bool, True on real strict upper pairs i<j."""
    xp = _array_module(node_mask)
    n = node_mask.shape[-1]
    upper = xp.triu(xp.ones((n, n), dtype=bool), k=1)
    return node_mask[..., :, None] & node_mask[..., None, :] & upper


def edge_mask(node_mask):
    """``[B, N]`` bool -> ``[B, N, N]`` bool, True on real off-diagonal pairs."""
    xp = _array_module(node_mask)
    n = node_mask.shape[-1]
    off_diag = ~xp.eye(n, dtype=bool)
    return node_mask[..., :, None] & node_mask[..., None, :] & off_diag


def _array_module(x):
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        return np
    import jax.numpy as jnp

    return jnp


# ----------------------------------------------------------------------------
# networkx <-> padded arrays


def _where(source: str | None, index: int | None) -> str:
    parts = []
    if source:
        parts.append(str(source))
    if index is not None:
        parts.append(f"graph {index}")
    return ": ".join(parts) + ": " if parts else ""


def clean_graph(g: nx.Graph, source: str | None = None, index: int | None = None) -> nx.Graph:
    """Check and normalise one networkx graph to nodes ``0..n-1``, no self-loops.

    Raises GraphFormatError for directed or multi-graphs and for labels that
    cannot be relabelled (mixed types that cannot be sorted). Integer labels
    ``0..n-1`` are kept; any other labels are relabelled in sorted order.
    """
    where = _where(source, index)
    if not isinstance(g, nx.Graph):
        raise GraphFormatError(f"{where}expected a networkx graph, got {type(g).__name__}")
    if g.is_directed():
        raise GraphFormatError(f"{where}graph is directed; ddgjax models undirected graphs "
                               "(convert with G.to_undirected() first)")
    if g.is_multigraph():
        raise GraphFormatError(f"{where}graph is a multigraph; ddgjax models simple graphs")
    nodes = list(g.nodes)
    n = len(nodes)
    if set(nodes) != set(range(n)):
        try:
            order = sorted(nodes)
        except TypeError as e:
            raise GraphFormatError(
                f"{where}node labels {nodes[:5]!r}... cannot be ordered for relabelling to 0..n-1") from e
        mapping = {v: i for i, v in enumerate(order)}
        g = nx.relabel_nodes(g, mapping)
    out = nx.Graph()
    out.add_nodes_from(range(n))
    loops = 0
    for u, v in g.edges():
        if u == v:
            loops += 1
            continue
        out.add_edge(int(u), int(v))
    if loops:
        warnings.warn(f"{where}dropped {loops} self-loop(s)", stacklevel=2)
    return out


def graphs_to_batch(graphs: Sequence[nx.Graph], max_nodes: int,
                    source: str | None = None) -> GraphBatch:
    """Pad networkx graphs (nodes ``0..n-1``) into a numpy GraphBatch.

    Raises GraphFormatError naming the graph index if a graph has more than
    ``max_nodes`` nodes.
    """
    b = len(graphs)
    adj = np.zeros((b, max_nodes, max_nodes), dtype=np.float32)
    counts = np.zeros((b,), dtype=np.int32)
    for i, g in enumerate(graphs):
        g = clean_graph(g, source, i)
        n = g.number_of_nodes()
        if n > max_nodes:
            raise GraphFormatError(
                f"{_where(source, i)}has {n} nodes, more than max_nodes={max_nodes}")
        counts[i] = n
        if g.number_of_edges():
            e = np.asarray(list(g.edges()), dtype=np.int64)
            adj[i, e[:, 0], e[:, 1]] = 1.0
            adj[i, e[:, 1], e[:, 0]] = 1.0
    return GraphBatch(adj=adj, node_mask=node_mask_from_counts(counts, max_nodes))


def batch_to_graphs(adj, num_nodes) -> list[nx.Graph]:
    """``[B, N, N]`` adjacency and ``[B]`` node counts -> list of networkx graphs.

    Only the strict upper triangle of each graph's real block is read.
    """
    adj = np.asarray(adj)
    num_nodes = np.asarray(num_nodes)
    out = []
    for a, n in zip(adj, num_nodes):
        n = int(n)
        g = nx.Graph()
        g.add_nodes_from(range(n))
        iu, ju = np.nonzero(np.triu(a[:n, :n] > 0.5, k=1))
        g.add_edges_from(zip(iu.tolist(), ju.tolist()))
        out.append(g)
    return out


# ----------------------------------------------------------------------------
# JSON graph-list files


class GraphListFile(NamedTuple):
    """Contents of one JSON graph-list file.

    Attributes:
      graphs: all graphs in file order.
      split: name -> list of graph indices (may be empty if the file has none).
      name: dataset name (file stem if absent).
      path: the file it came from.
    """

    graphs: list
    split: dict
    name: str
    path: str


def _graph_from_record(rec: Any, path: str, index: int) -> nx.Graph:
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
    g = nx.Graph()
    g.add_nodes_from(range(n))
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
    """Read a JSON graph-list file. Errors name the file, the graph and the field."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: file not found")
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"{path}: malformed JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{path}: not a text JSON file: {e}") from e
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
    name = data.get("name") or os.path.splitext(os.path.basename(path))[0]
    return GraphListFile(graphs=graphs, split=clean_split, name=str(name), path=path)


def select_split(f: GraphListFile, split: str | None) -> list:
    """Graphs of one named split of a file (all graphs for None)."""
    if split is None:
        return list(f.graphs)
    if split not in f.split:
        raise GraphFormatError(f"{f.path}: unknown split {split!r}; the file has "
                               f"{sorted(f.split) or 'no splits'}")
    return [f.graphs[i] for i in f.split[split]]


def graph_to_record(g: nx.Graph) -> dict:
    """networkx graph -> ``{"n": n, "edges": [[i, j], ...]}`` with i<j, sorted."""
    g = clean_graph(g)
    edges = sorted((min(u, v), max(u, v)) for u, v in g.edges())
    return {"n": g.number_of_nodes(), "edges": [[int(u), int(v)] for u, v in edges]}


def write_graph_list(path: str | os.PathLike, graphs: Sequence[nx.Graph], name: str = "",
                     split: dict | None = None, **extra) -> None:
    """Write graphs to a JSON graph-list file atomically (temp file + rename)."""
    path = os.fspath(path)
    data = {"name": name or os.path.splitext(os.path.basename(path))[0], **extra,
            "split": split or {}, "graphs": [graph_to_record(g) for g in graphs]}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
