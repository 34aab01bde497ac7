"""Tests of ddgjax.data.generators: determinism and the statistics of each builtin."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from scipy.spatial import ConvexHull

from ddgjax.data import generators as gen
from ddgjax.data.formats import read_graph_list
from helpers import data_file


def _edge_key(graphs):
    return [tuple(sorted(g.edges)) for g in graphs]


@pytest.mark.parametrize("name", gen.BUILTIN_NAMES)
def test_generator_determinism(name):
    a = gen.generate_graphs(name, num_graphs=6, seed=7)
    b = gen.generate_graphs(name, num_graphs=6, seed=7)
    c = gen.generate_graphs(name, num_graphs=6, seed=8)
    assert _edge_key(a) == _edge_key(b)
    assert _edge_key(a) != _edge_key(c)
    assert _edge_key(gen.generate_graphs(name, num_graphs=3, seed=7)) == _edge_key(a)[:3]


def test_registry_sizes_and_bad_arguments():
    assert {n: len(gen.generate_graphs(n)) for n in ("community_small", "sbm_27")} == {
        "community_small": 100, "sbm_27": 200}
    assert {n: gen.builtin_spec(n).split for n in gen.BUILTIN_NAMES} == {
        "community_small": "paper", "sbm_27": "paper", "planar_60": "paper",
        "spectre_planar_64": "spectre", "spectre_sbm": "spectre"}
    with pytest.raises(ValueError, match="unknown builtin dataset 'ego'.*community_small"):
        gen.generate_graphs("ego")
    with pytest.raises(ValueError, match="num_graphs must be at least 1, got 0"):
        gen.generate_graphs("sbm_27", num_graphs=0)


def test_community_graph_always_bridged():
    rng = np.random.default_rng(0)
    for _ in range(20):
        g = gen.community_graph(rng, 5, 0.7, 0.0)               # no random bridges at all
        assert sum((u < 5) != (v < 5) for u, v in g.edges) == 1
    assert gen.edp_bridge_probability(8) == pytest.approx(0.1 / 8)


@pytest.mark.parametrize("name,n", [("planar_60", 60), ("spectre_planar_64", 64)])
def test_planar_generator(name, n):
    graphs = gen.generate_graphs(name, num_graphs=50, seed=0)
    for g in graphs:
        assert g.number_of_nodes() == n
        assert nx.is_connected(g) and nx.check_planarity(g)[0]
        points = g.graph["points"]
        assert points.shape == (n, 2) and points.min() >= 0 and points.max() < 1
        h = len(ConvexHull(points).vertices)
        assert g.number_of_edges() == 3 * n - 3 - h


def _sbm_counts(graphs):
    """Pooled (edges, pairs) inside blocks and across blocks."""
    e_in = p_in = e_out = p_out = 0
    for g in graphs:
        sizes = g.graph["block_sizes"]
        labels = np.repeat(np.arange(len(sizes)), sizes)
        assert g.number_of_nodes() == len(labels)
        same = sum(labels[u] == labels[v] for u, v in g.edges)
        e_in += same
        e_out += g.number_of_edges() - same
        pairs_in = sum(s * (s - 1) // 2 for s in sizes)
        p_in += pairs_in
        p_out += len(labels) * (len(labels) - 1) // 2 - pairs_in
    return e_in, p_in, e_out, p_out


def _close(edges, pairs, p, sigmas=5.0):
    """Binomial proportion within ``sigmas`` standard errors of p."""
    return abs(edges / pairs - p) <= sigmas * np.sqrt(p * (1 - p) / pairs)


@pytest.mark.parametrize("name,blocks,sizes,p_in,p_out", [
    ("spectre_sbm", (2, 5), (20, 40), 0.3, 0.005),
    ("sbm_27", (3, 3), (7, 9), 0.85, 0.046875),
])
def test_sbm_generator_statistics(name, blocks, sizes, p_in, p_out):
    graphs = gen.generate_graphs(name, seed=0)
    seen_blocks = set()
    for g in graphs:
        b = g.graph["block_sizes"]
        seen_blocks.add(len(b))
        assert blocks[0] <= len(b) <= blocks[1]
        assert all(sizes[0] <= s <= sizes[1] for s in b)
    assert seen_blocks == set(range(blocks[0], blocks[1] + 1))
    e_in, pairs_in, e_out, pairs_out = _sbm_counts(graphs)
    assert _close(e_in, pairs_in, p_in), e_in / pairs_in
    assert _close(e_out, pairs_out, p_out), e_out / pairs_out


def test_community_small_generator_statistics():
    graphs = gen.generate_graphs("community_small", seed=0)
    assert len(graphs) == 100
    sizes = np.array([g.number_of_nodes() for g in graphs])
    assert sizes.min() >= 12 and sizes.max() <= 20 and np.all(sizes % 2 == 0)
    assert set(sizes.tolist()) == {12, 14, 16, 18, 20}
    bridges, densities, expect, var = [], [], 0.0, 0.0
    for g in graphs:
        k = g.number_of_nodes() // 2
        assert g.graph["block_sizes"] == (k, k)
        densities += [nx.density(g.subgraph(part)) for part in (range(k), range(k, 2 * k))]
        bridges.append(sum((u < k) != (v < k) for u, v in g.edges))
        # bridges = max(Binomial(k^2, q), 1) with q = 0.1 / k (EDP-GNN's p_inter = 0.05)
        q, m = 0.1 / k, k * k
        pmf = [math.comb(m, c) * q**c * (1 - q) ** (m - c) for c in range(m + 1)]
        values = np.maximum(np.arange(m + 1), 1)
        mean = float(np.dot(pmf, values))
        expect += mean
        var += float(np.dot(pmf, (values - mean) ** 2))
    # both communities dense: ER(0.7) communities; P(density < 0.4) < 1e-2 even for k = 6
    # (seed 0 happens to draw one community with 2 of 15 edges, a 1e-5 event, so no hard min)
    assert np.mean(np.array(densities) > 0.4) > 0.97 and np.median(densities) > 0.6
    assert min(bridges) >= 1
    assert abs(sum(bridges) - expect) <= 5 * np.sqrt(var), (sum(bridges), expect)
    e_in, pairs_in, _, _ = _sbm_counts(graphs)
    assert _close(e_in, pairs_in, 0.7)


def test_community_small_generator_resembles_shared_file():
    shared = read_graph_list(data_file("community_small.json")).graphs
    for graphs in (shared, gen.generate_graphs("community_small", seed=0)):
        one_bridge = np.mean([sum((u < g.number_of_nodes() // 2) != (v < g.number_of_nodes() // 2)
                                  for u, v in g.edges) == 1 for g in graphs])
        assert 0.65 < one_bridge < 0.95
