"""Padded graph batches: the array convention, masks, and conversions to and from networkx.

Convention (the one every other module relies on):

* A batch holds ``B`` simple undirected graphs padded to ``N`` nodes.
* ``adj``: ``float32[B, N, N]``, 0/1, symmetric, zero diagonal, zero in every
  row and column of a padding node.
* ``node_mask``: ``bool[B, N]``; graph ``b`` with ``n_b`` nodes has real nodes
  ``0..n_b-1`` (a prefix) and padding after them.

:func:`graphs_to_batch` pads networkx graphs into this form and
:func:`batch_to_graphs` undoes it. Self-loops in input graphs are dropped with
a warning (the method models only the strict upper triangle, so a self-loop
has no meaning for it). Graph files are read and written by
:mod:`ddgjax.data.formats`.

Graph-level labels: a graph may carry a class label ``g.graph["label"]`` (a string
or an integer) and named numeric properties ``g.graph["properties"]`` (a dict
``str -> int | float``); :func:`clean_graph` keeps these two keys (checked by
:func:`check_graph_labels`) and drops every other graph attribute.
"""
from __future__ import annotations

import math
import numbers
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
      cond: ``float32[B, D]`` the graphs' condition vectors (``ddgjax.conditioning``), or
        None for unconditional training.
    """

    adj: Any
    node_mask: Any
    cond: Any = None

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


def check_graph_labels(label: Any, properties: Any, where: str = "") -> tuple[Any, Any]:
    """Check a graph's class label and properties; return them normalised.

    Args:
      label: None (no label), a non-empty string or an integer (Python or numpy; not a
        bool).
      properties: None (none), or a dict mapping non-empty string names to finite numbers
        (int or float, Python or numpy; not bools).
      where: the error prefix naming file and graph (``_where(path, index)``).

    Returns: ``(label, properties)``: label a ``str``, an ``int`` or None; properties a
      new plain ``dict`` of ``int``/``float`` values, or None where absent or empty.

    Raises: GraphFormatError ``"{where}field 'label' must be ..., got ..."`` (or
      ``field 'properties'...``), naming the field and what was expected.
    """
    if label is not None:
        if isinstance(label, str):
            if not label:
                raise GraphFormatError(f"{where}field 'label' must be a non-empty string or an "
                                       "integer, got ''")
        elif isinstance(label, numbers.Integral) and not isinstance(label, (bool, np.bool_)):
            label = int(label)
        else:
            raise GraphFormatError(f"{where}field 'label' must be a string or an integer, "
                                   f"got {label!r}")
    if properties is None:
        return label, None
    if not isinstance(properties, dict):
        raise GraphFormatError(f"{where}field 'properties' must be an object mapping names to "
                               f"numbers, got {properties!r}")
    out = {}
    for name, value in properties.items():
        if not isinstance(name, str) or not name:
            raise GraphFormatError(f"{where}field 'properties' must have non-empty string "
                                   f"names, got {name!r}")
        if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
                or not math.isfinite(value)):
            raise GraphFormatError(f"{where}field 'properties'.{name} must be a finite number "
                                   f"(int or float), got {value!r}")
        out[name] = int(value) if isinstance(value, numbers.Integral) else float(value)
    return label, out or None


def clean_graph(g: nx.Graph, source: str | None = None, index: int | None = None) -> nx.Graph:
    """Check and normalise one networkx graph to nodes ``0..n-1``, no self-loops.

    Raises GraphFormatError for directed or multi-graphs and for labels that
    cannot be relabelled (mixed types that cannot be sorted). Integer labels
    ``0..n-1`` are kept; any other labels are relabelled in sorted order.
    Of the graph attributes only ``g.graph["label"]`` and ``g.graph["properties"]``
    are kept, checked by :func:`check_graph_labels` (a bad one is a GraphFormatError
    naming the graph and the field).
    """
    where = _where(source, index)
    if not isinstance(g, nx.Graph):
        raise GraphFormatError(f"{where}expected a networkx graph, got {type(g).__name__}")
    if g.is_directed():
        raise GraphFormatError(f"{where}graph is directed; ddgjax models undirected graphs "
                               "(convert with G.to_undirected() first)")
    if g.is_multigraph():
        raise GraphFormatError(f"{where}graph is a multigraph; ddgjax models simple graphs")
    label, properties = check_graph_labels(g.graph.get("label"), g.graph.get("properties"),
                                           where)
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
    if label is not None:
        out.graph["label"] = label
    if properties is not None:
        out.graph["properties"] = properties
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
