"""Orbit counts: closed forms against brute-force enumeration of induced subgraphs."""
import itertools

import jax
import networkx as nx
import numpy as np
import pytest

from ddgjax.graphs import graphs_to_batch
from ddgjax.metrics.orbits import (INDUCED_FROM_NONINDUCED, NONINDUCED_FROM_INDUCED,
                                   NUM_ORBITS, max_degree_bucket, orbit_counts)

# ORCA node orbits of connected 4-node graphlets, by (sorted degree signature of the
# induced subgraph, degree of the node inside it).
ORBIT4 = {
    ((1, 1, 2, 2), 1): 4, ((1, 1, 2, 2), 2): 5,            # path P4: end, middle
    ((1, 1, 1, 3), 1): 6, ((1, 1, 1, 3), 3): 7,            # star: leaf, centre
    ((2, 2, 2, 2), 2): 8,                                  # cycle C4
    ((1, 2, 2, 3), 1): 9, ((1, 2, 2, 3), 2): 10, ((1, 2, 2, 3), 3): 11,   # paw
    ((2, 2, 3, 3), 2): 12, ((2, 2, 3, 3), 3): 13,          # diamond
    ((3, 3, 3, 3), 3): 14,                                 # K4
}


def orbit4(sub: np.ndarray, i: int):
    """Orbit of node i in a 4-node 0/1 adjacency, or None if not connected."""
    deg = sub.sum(1)
    if deg.min() == 0 or deg.sum() < 6:    # isolated node, or only 2 edges (disconnected)
        return None
    return ORBIT4[(tuple(sorted(int(d) for d in deg)), int(deg[i]))]


def brute_force_orbits(g: nx.Graph) -> np.ndarray:
    """``int[n, 15]`` by enumerating every node 3- and 4-subset."""
    n = g.number_of_nodes()
    a = nx.to_numpy_array(g, nodelist=range(n), dtype=np.int64) if n else np.zeros((0, 0), int)
    out = np.zeros((n, NUM_ORBITS), np.int64)
    out[:, 0] = a.sum(1)
    for s in itertools.combinations(range(n), 3):
        sub = a[np.ix_(s, s)]
        deg = sub.sum(1)
        if deg.sum() == 6:
            out[list(s), 3] += 1
        elif deg.sum() == 4:
            for v, d in zip(s, deg):
                out[v, 1 if d == 1 else 2] += 1
    for s in itertools.combinations(range(n), 4):
        sub = a[np.ix_(s, s)]
        for k, v in enumerate(s):
            o = orbit4(sub, k)
            if o is not None:
                out[v, o] += 1
    return out


def run_orbits(graphs, max_nodes=None, **kw):
    max_nodes = max_nodes or max(max(g.number_of_nodes() for g in graphs), 1)
    b = graphs_to_batch(graphs, max_nodes)
    return np.asarray(orbit_counts(b.adj, b.node_mask, **kw))


def test_noninduced_matrix_matches_enumeration():
    """Re-derive M[o, o'] = copies of pattern o inside graphlet o' by edge subsets."""
    pairs = list(itertools.combinations(range(4), 2))
    reps = {}
    for r in range(7):
        for edges in itertools.combinations(pairs, r):
            sub = np.zeros((4, 4), int)
            for i, j in edges:
                sub[i, j] = sub[j, i] = 1
            o = orbit4(sub, 0)
            if o is not None and o not in reps:
                reps[o] = edges
    assert sorted(reps) == list(range(4, 15))
    m = np.zeros((11, 11), int)
    for o_big, edges in reps.items():
        for r in range(len(edges) + 1):
            for sub_edges in itertools.combinations(edges, r):
                sub = np.zeros((4, 4), int)
                for i, j in sub_edges:
                    sub[i, j] = sub[j, i] = 1
                o = orbit4(sub, 0)
                if o is not None:
                    m[o - 4, o_big - 4] += 1
    np.testing.assert_array_equal(m, NONINDUCED_FROM_INDUCED)
    np.testing.assert_array_equal(INDUCED_FROM_NONINDUCED @ m, np.eye(11, dtype=int))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.6, 0.9])
def test_random_graphs_match_brute_force(p):
    rng = np.random.default_rng(int(p * 100))
    graphs = [nx.gnp_random_graph(int(n), p, seed=int(rng.integers(1 << 30)))
              for n in rng.integers(4, 13, size=6)]
    got = run_orbits(graphs, max_nodes=16)
    for i, g in enumerate(graphs):
        n = g.number_of_nodes()
        np.testing.assert_array_equal(got[i, :n], brute_force_orbits(g), err_msg=f"graph {i}")
        assert (got[i, n:] == 0).all()


EDGE_CASES = {
    "single node": nx.empty_graph(1),
    "no edges": nx.empty_graph(6),
    "one edge": nx.path_graph(2),
    "isolated nodes": nx.disjoint_union(nx.cycle_graph(5), nx.empty_graph(3)),
    "K4": nx.complete_graph(4),
    "K7": nx.complete_graph(7),
    "star": nx.star_graph(6),
    "path": nx.path_graph(8),
    "cycle4": nx.cycle_graph(4),
    "cycle7": nx.cycle_graph(7),
    "two components": nx.disjoint_union(nx.complete_graph(4), nx.star_graph(3)),
    "wheel": nx.wheel_graph(7),
    "bipartite": nx.complete_bipartite_graph(3, 4),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_match_brute_force(name):
    g = EDGE_CASES[name]
    got = run_orbits([g], max_nodes=10)[0]
    np.testing.assert_array_equal(got[:g.number_of_nodes()], brute_force_orbits(g))


def test_hand_counted_graphlets():
    """Pin the ORCA numbering on the graphlets themselves (node by node)."""
    paw = nx.Graph([(0, 1), (1, 2), (0, 2), (0, 3)])       # 3 is the pendant, 0 the centre
    diamond = nx.Graph([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)])   # 0, 1 of degree 3
    got = run_orbits([nx.path_graph(4), nx.star_graph(3), nx.cycle_graph(4), paw, diamond,
                      nx.complete_graph(4)], max_nodes=4)
    four = got[..., 4:]

    def only(row, orbit):
        e = np.zeros(11, int)
        e[orbit - 4] = 1
        return e.tolist() == row.tolist()

    assert only(four[0, 0], 4) and only(four[0, 1], 5)           # P4 end, middle
    assert only(four[1, 1], 6) and only(four[1, 0], 7)           # star leaf, centre
    assert all(only(four[2, v], 8) for v in range(4))            # C4
    assert only(four[3, 3], 9) and only(four[3, 1], 10) and only(four[3, 0], 11)   # paw
    assert only(four[4, 2], 12) and only(four[4, 0], 13)         # diamond
    assert all(only(four[5, v], 14) for v in range(4))           # K4
    # 2- and 3-node orbits of the paw: degree, path end/middle, triangle.
    np.testing.assert_array_equal(got[3, :, :4], [[3, 0, 2, 1], [2, 1, 0, 1],
                                                   [2, 1, 0, 1], [1, 2, 0, 0]])


def test_input_cleaning_and_padding():
    """Upper-triangle-only input, a set diagonal and junk in padding change nothing."""
    g = nx.gnp_random_graph(9, 0.5, seed=3)
    b = graphs_to_batch([g], 12)
    ref = np.asarray(orbit_counts(b.adj, b.node_mask))
    adj = np.triu(b.adj, 1)
    adj[0, 0, 0] = 1.0
    adj[0, 10, :] = 1.0                          # padding row: must be ignored
    adj[0, :, 11] = 1.0
    got = np.asarray(orbit_counts(adj, b.node_mask, max_degree=12))
    np.testing.assert_array_equal(got, ref)


def test_int32_path_for_large_padding():
    """N > 256 takes the int32 matmul path; counts must not change."""
    g = nx.gnp_random_graph(12, 0.4, seed=5)
    got = run_orbits([g], max_nodes=264, max_degree=8)
    np.testing.assert_array_equal(got[0, :12], brute_force_orbits(g))


def test_jit_and_batch_of_mixed_sizes():
    graphs = [nx.gnp_random_graph(n, 0.4, seed=n) for n in (3, 7, 11)]
    b = graphs_to_batch(graphs, 11)
    f = jax.jit(lambda a, m: orbit_counts(a, m))     # traced: max_degree defaults to N
    got = np.asarray(f(b.adj, b.node_mask))
    assert got.shape == (3, 11, 15) and got.dtype == np.int32
    for i, g in enumerate(graphs):
        np.testing.assert_array_equal(got[i, :g.number_of_nodes()], brute_force_orbits(g))
    assert max_degree_bucket(b.adj) >= max(max(d for _, d in g.degree()) for g in graphs)
