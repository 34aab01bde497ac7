"""Tests of ddgjax.graphs: the padded-batch convention, its masks, padding and unpadding."""
from __future__ import annotations

import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from ddgjax.graphs import (GraphFormatError, batch_to_graphs, clean_graph, edge_mask,
                           graphs_to_batch, node_mask_from_counts, pair_mask)
from helpers import random_graphs, same_graph

N = 12  # random_graphs have at most 11 nodes


def _graphs():
    """Random graphs, an empty (no-node) graph, an edgeless one and one of exactly N nodes."""
    return random_graphs(4, seed=5)[:2] + [nx.empty_graph(0), nx.empty_graph(3),
                                           nx.cycle_graph(N)]


def test_round_trip_keeps_edges_and_node_counts():
    graphs = _graphs()
    batch = graphs_to_batch(graphs, N)
    back = batch_to_graphs(batch.adj, batch.num_nodes)
    assert len(back) == len(graphs)
    for got, want in zip(back, graphs):
        assert got.number_of_nodes() == want.number_of_nodes()
        assert same_graph(got, want)


def test_batch_follows_the_convention():
    graphs = _graphs()
    batch = graphs_to_batch(graphs, N)
    adj, mask = batch.adj, batch.node_mask
    assert adj.shape == (len(graphs), N, N) and adj.dtype == np.float32
    assert mask.shape == (len(graphs), N) and mask.dtype == bool
    np.testing.assert_array_equal(batch.num_nodes, [g.number_of_nodes() for g in graphs])
    assert batch.num_nodes.dtype == np.int32
    assert set(np.unique(adj).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(adj, np.swapaxes(adj, 1, 2))
    assert not np.diagonal(adj, axis1=1, axis2=2).any()
    assert not (adj * ~(mask[:, :, None] & mask[:, None, :])).any()   # padding rows/cols zero
    np.testing.assert_array_equal(mask, node_mask_from_counts(batch.num_nodes, N))


def test_unpadding_reads_only_the_real_upper_triangle():
    adj = np.zeros((1, 4, 4), np.float32)
    adj[0, 0, 1] = 1.0            # real upper pair: an edge
    adj[0, 2, 0] = 1.0            # lower triangle only: ignored
    adj[0, 1, 3] = 1.0            # touches padding node 3: ignored
    adj[0, 2, 2] = 1.0            # diagonal: ignored
    (g,) = batch_to_graphs(adj, [3])
    assert g.number_of_nodes() == 3 and sorted(g.edges) == [(0, 1)]


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_masks(xp):
    counts = xp.asarray([0, 3, 5])
    node = node_mask_from_counts(counts, 5)
    np.testing.assert_array_equal(np.asarray(node), [[0] * 5, [1, 1, 1, 0, 0], [1] * 5])
    pairs = np.asarray(pair_mask(node))
    edges = np.asarray(edge_mask(node))
    assert pairs.shape == edges.shape == (3, 5, 5) and pairs.dtype == edges.dtype == bool
    real = np.asarray(node)[:, :, None] & np.asarray(node)[:, None, :]
    np.testing.assert_array_equal(pairs, real & np.triu(np.ones((5, 5), bool), 1))
    np.testing.assert_array_equal(edges, np.swapaxes(edges, 1, 2))
    np.testing.assert_array_equal(edges, pairs | np.swapaxes(pairs, 1, 2))
    assert not np.diagonal(edges, axis1=1, axis2=2).any()
    assert pairs.sum(axis=(1, 2)).tolist() == [0, 3, 10]


def test_too_many_nodes_names_the_graph():
    graphs = [nx.path_graph(3), nx.path_graph(N + 1)]
    with pytest.raises(GraphFormatError, match=rf"gs\.json: graph 1: has {N + 1} nodes, more "
                                               rf"than max_nodes={N}"):
        graphs_to_batch(graphs, N, source="gs.json")
    with pytest.raises(GraphFormatError, match=r"^graph 1: has"):
        graphs_to_batch(graphs, N)


def test_self_loops_dropped_with_warning():
    g = nx.path_graph(4)
    g.add_edge(2, 2)
    with pytest.warns(UserWarning, match=r"graph 0: dropped 1 self-loop"):
        batch = graphs_to_batch([g], N)
    assert not np.diagonal(batch.adj[0]).any() and batch.adj[0].sum() == 2 * 3


def test_directed_and_multigraphs_are_errors():
    with pytest.raises(GraphFormatError, match=r"graph 1: graph is directed"):
        graphs_to_batch([nx.path_graph(2), nx.DiGraph([(0, 1)])], N)
    with pytest.raises(GraphFormatError, match="multigraph"):
        clean_graph(nx.MultiGraph([(0, 1), (0, 1)]))
    with pytest.raises(GraphFormatError, match="expected a networkx graph, got list"):
        clean_graph([(0, 1)])


def test_clean_graph_relabels_in_sorted_order():
    g = clean_graph(nx.Graph([(10, 2), (2, 5)]))
    assert sorted(g.nodes) == [0, 1, 2] and sorted(g.edges) == [(0, 1), (0, 2)]
    with pytest.raises(GraphFormatError, match="cannot be ordered"):
        clean_graph(nx.Graph([(1, "a")]))
