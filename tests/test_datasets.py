"""Tests of ddgjax.datasets: loaders, splits, generators, node-count distribution."""
from __future__ import annotations

import json
import math
import pickle
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy.spatial import ConvexHull

from ddgjax import datasets as ds
from ddgjax.graphs import GraphFormatError, write_graph_list

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# file -> (train, val, test) sizes from shared/data/README.md
README_SPLITS = {
    "community_small.json": (80, 0, 20),
    "ego_small.json": (160, 0, 40),
    "sbm_27.json": (160, 0, 40),
    "planar_60.json": (160, 0, 40),
    "community_small_gdss.json": (80, 0, 20),
    "ego_small_gdss.json": (160, 0, 40),
    "spectre_comm20.json": (64, 16, 20),
    "spectre_planar_64.json": (128, 32, 40),
    "spectre_sbm.json": (128, 32, 40),
}
PAPER_FILES = ("community_small.json", "ego_small.json", "sbm_27.json", "planar_60.json")


def _same(g: nx.Graph, h: nx.Graph) -> bool:
    """Label-exact equality (same nodes, same edges)."""
    return set(g.nodes) == set(h.nodes) and {frozenset(e) for e in g.edges} == {
        frozenset(e) for e in h.edges}


def _random_graphs(num: int, seed: int = 0) -> list[nx.Graph]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(num):
        n = int(rng.integers(3, 12))
        g = nx.gnp_random_graph(n, 0.5, seed=int(rng.integers(1 << 30)))
        if g.number_of_edges() == 0:
            g.add_edge(0, 1)
        out.append(g)
    return out


def _needs_data(name: str) -> Path:
    path = DATA_DIR / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


# ----------------------------------------------------------------------------
# JSON files


@pytest.mark.parametrize("fname", sorted(README_SPLITS))
def test_shared_json_split_sizes(fname):
    d = ds.load_dataset(str(_needs_data(fname)))
    assert (len(d.train), len(d.val), len(d.test)) == README_SPLITS[fname]
    assert d.name == fname[:-5]
    for g in d.train + d.val + d.test:
        assert sorted(g.nodes) == list(range(g.number_of_nodes()))
        assert nx.number_of_selfloops(g) == 0


@pytest.mark.parametrize("fname", PAPER_FILES)
def test_shared_paper_files_test_is_first_20_percent(fname):
    path = _needs_data(fname)
    d = ds.load_dataset(str(path))
    records = json.loads(path.read_text())["graphs"]
    num_test = int(0.2 * len(records))
    for g, rec in zip(d.test + d.train, records):  # test = file[:20%], train = file[20%:]
        want = nx.empty_graph(rec["n"])
        want.add_edges_from(map(tuple, rec["edges"]))
        assert _same(g, want)
    assert len(d.test) == num_test


def test_json_without_split_uses_paper_rule(tmp_path):
    graphs = _random_graphs(23)
    path = tmp_path / "nosplit.json"
    write_graph_list(path, graphs)
    d = ds.load_dataset(str(path))
    assert d.name == "nosplit" and d.source == str(path)
    assert len(d.test) == int(0.2 * 23) == 4 and len(d.train) == 19 and d.val == []
    assert all(_same(a, b) for a, b in zip(d.test + d.train, graphs))


def test_json_carried_split_is_used(tmp_path):
    graphs = _random_graphs(6)
    path = tmp_path / "s.json"
    write_graph_list(path, graphs, split={"train": [5, 1, 2], "val": [3], "test": [0, 4]})
    d = ds.load_dataset(path)
    assert [len(d.train), len(d.val), len(d.test)] == [3, 1, 2]
    assert _same(d.train[0], graphs[5]) and _same(d.val[0], graphs[3])
    assert _same(d.test[1], graphs[4])


def test_json_overlapping_split_is_an_error(tmp_path):
    path = tmp_path / "bad.json"
    write_graph_list(path, _random_graphs(5), split={"train": [0, 1, 2], "test": [2, 3]})
    with pytest.raises(GraphFormatError, match=r"bad\.json.*\[2\].*'train' and 'test'"):
        ds.load_dataset(path)


def test_json_self_loops_dropped_with_warning(tmp_path):
    path = tmp_path / "loops.json"
    path.write_text(json.dumps({"graphs": [{"n": 3, "edges": [[0, 1], [1, 1], [1, 2]]}] * 5}))
    with pytest.warns(UserWarning, match="self-loop"):
        d = ds.load_dataset(path)
    assert all(nx.number_of_selfloops(g) == 0 and g.number_of_edges() == 2 for g in d.train)


# ----------------------------------------------------------------------------
# edge lists, GraphML, pickles


def test_edge_list_dir_round_trip(tmp_path):
    graphs = _random_graphs(10, seed=1)
    for k, g in enumerate(graphs):
        nx.write_edgelist(g, tmp_path / f"g{k:02d}.edgelist", data=False)
    (tmp_path / "notes.md").write_text("not a graph")
    with pytest.warns(UserWarning, match="ignoring 1 file"):
        d = ds.load_dataset(str(tmp_path))
    assert d.name == tmp_path.name
    assert len(d.test) == 2 and len(d.train) == 8
    for got, want in zip(d.test + d.train, graphs):
        # nodes without edges cannot be expressed; compare after dropping them
        want = nx.convert_node_labels_to_integers(
            want.subgraph([v for v in sorted(want.nodes) if want.degree[v] > 0]))
        assert _same(got, want)


def test_edge_list_comments_and_default_data_column(tmp_path):
    (tmp_path / "a.txt").write_text("# header\n\n10 2  # trailing\n2 3 {}\n3 10\n")
    g = ds.read_edge_list(str(tmp_path / "a.txt"))
    assert {frozenset(e) for e in g.edges} == {frozenset(e) for e in [(2, 3), (2, 10), (3, 10)]}


def test_edge_list_malformed_names_file_and_line(tmp_path):
    (tmp_path / "g0.txt").write_text("0 1\n1 x\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: line 2: node ids must be integers"):
        ds.load_dataset(str(tmp_path))
    (tmp_path / "g0.txt").write_text("0 1\n7\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: line 2: expected two node ids"):
        ds.load_dataset(str(tmp_path))
    (tmp_path / "g0.txt").write_text("# nothing\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: no edges"):
        ds.load_dataset(str(tmp_path))


def test_graphml_file_and_dir_round_trip(tmp_path):
    graphs = _random_graphs(5, seed=2)
    for g in graphs:
        g.add_node(g.number_of_nodes())  # an isolated node: GraphML keeps it
    # >10 nodes so that string ids "10" vs "2" would sort wrongly if not converted
    big = nx.path_graph(13)
    graphs.append(big)
    for k, g in enumerate(graphs):
        nx.write_graphml(g, tmp_path / f"g{k}.graphml")
    with pytest.warns(UserWarning, match="test split is empty"):
        one = ds.load_dataset(str(tmp_path / "g5.graphml"))
    assert one.name == "g5" and _same(one.train[0], big) and one.test == []
    d = ds.load_dataset(str(tmp_path))
    assert len(d.test) == 1 and len(d.train) == 5
    for got, want in zip(d.test + d.train, graphs):
        assert _same(got, want)


def test_graphml_directed_is_an_error(tmp_path):
    nx.write_graphml(nx.DiGraph([(0, 1)]), tmp_path / "d.graphml")
    with pytest.raises(GraphFormatError, match=r"d\.graphml.*directed"):
        ds.load_dataset(str(tmp_path / "d.graphml"))


def test_pickle_refused_without_option_and_accepted_with_it(tmp_path):
    graphs = _random_graphs(10, seed=3)
    graphs[0].add_edge(1, 1)
    path = tmp_path / "gs.pkl"
    path.write_bytes(pickle.dumps(graphs))
    with pytest.raises(GraphFormatError, match="allow_pickle=True"):
        ds.load_dataset(str(path))
    with pytest.warns(UserWarning) as record:
        d = ds.load_dataset(str(path), allow_pickle=True)
    messages = " | ".join(str(w.message) for w in record)
    assert "arbitrary code" in messages and "self-loop" in messages
    assert len(d.test) == 2 and len(d.train) == 8
    graphs[0].remove_edge(1, 1)
    assert all(_same(a, b) for a, b in zip(d.test + d.train, graphs))


def test_pickle_of_split_dict(tmp_path):
    graphs = _random_graphs(7, seed=4)
    path = tmp_path / "split.pickle"
    path.write_bytes(pickle.dumps({"train": graphs[:4], "val": graphs[4:5], "test": graphs[5:]}))
    with pytest.warns(UserWarning, match="arbitrary code"):
        d = ds.load_dataset(str(path), allow_pickle=True)
    assert [len(d.train), len(d.val), len(d.test)] == [4, 1, 2]
    assert _same(d.val[0], graphs[4])


def test_raw_pickle_matches_json():
    pkl = _needs_data("raw/discrete_DPPM_Graphs/community_20_small.pkl")
    with pytest.warns(UserWarning, match="arbitrary code"):
        a = ds.load_dataset(str(pkl), allow_pickle=True)
    b = ds.load_dataset(str(_needs_data("community_small.json")))
    for x, y in zip(a.train + a.test, b.train + b.test):
        assert _same(x, y)


# ----------------------------------------------------------------------------
# errors


def test_missing_path(tmp_path):
    with pytest.raises(GraphFormatError, match=r"nope\.json: file or directory not found"):
        ds.load_dataset(str(tmp_path / "nope.json"))


def test_malformed_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"graphs": [{"n": 3, "edges": [[0, 1]')
    with pytest.raises(GraphFormatError, match=r"broken\.json: malformed JSON"):
        ds.load_dataset(str(path))
    records = [{"n": 3, "edges": [[0, 1]]}, {"n": 2, "edges": [[0, 5]]}]
    path.write_text(json.dumps({"graphs": records}))
    with pytest.raises(GraphFormatError, match=r"broken\.json: graph 1: .*outside"):
        ds.load_dataset(str(path))


def test_empty_list_and_unknown_format(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"graphs": []}))
    with pytest.raises(GraphFormatError, match=r"empty\.json: contains no graphs"):
        ds.load_dataset(str(path))
    (tmp_path / "x.csv").write_text("0,1\n")
    with pytest.raises(GraphFormatError, match=r"x\.csv: unknown format '\.csv'"):
        ds.load_dataset(str(tmp_path / "x.csv"))
    sub = tmp_path / "nographs"
    sub.mkdir()
    with pytest.raises(GraphFormatError, match="no graph files found"):
        ds.load_dataset(str(sub))


def test_unknown_builtin_lists_valid_names():
    with pytest.raises(ValueError,
                       match="unknown builtin dataset 'ego'.*community_small.*spectre_sbm"):
        ds.load_dataset("builtin:ego")


def test_num_graphs_with_a_path_is_an_error(tmp_path):
    path = tmp_path / "a.json"
    write_graph_list(path, _random_graphs(5))
    with pytest.raises(ValueError, match="num_graphs applies only to builtin"):
        ds.load_dataset(str(path), num_graphs=3)


# ----------------------------------------------------------------------------
# generators


def _edge_key(graphs):
    return [tuple(sorted(g.edges)) for g in graphs]


@pytest.mark.parametrize("name", ds.BUILTIN_NAMES)
def test_generator_determinism(name):
    a = ds.generate_graphs(name, num_graphs=6, seed=7)
    b = ds.generate_graphs(name, num_graphs=6, seed=7)
    c = ds.generate_graphs(name, num_graphs=6, seed=8)
    assert _edge_key(a) == _edge_key(b)
    assert _edge_key(a) != _edge_key(c)
    assert _edge_key(ds.generate_graphs(name, num_graphs=3, seed=7)) == _edge_key(a)[:3]


def test_builtin_dataset_splits():
    d = ds.load_dataset("builtin:community_small")
    assert (d.name, d.source) == ("community_small", "builtin:community_small")
    assert (len(d.train), len(d.val), len(d.test)) == (80, 0, 20)
    gen = ds.generate_graphs("community_small", seed=0)
    assert _same(d.test[0], gen[0]) and _same(d.train[0], gen[20])
    s = ds.load_dataset("builtin:spectre_sbm", seed=3)
    assert (len(s.train), len(s.val), len(s.test)) == (128, 32, 40)
    split = ds.spectre_split(200, seed=3)
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(200))
    assert split != ds.spectre_split(200, seed=4)
    small = ds.load_dataset("builtin:planar_60", num_graphs=10, seed=1)
    assert (len(small.train), len(small.test)) == (8, 2)


@pytest.mark.parametrize("name,n", [("planar_60", 60), ("spectre_planar_64", 64)])
def test_planar_generator(name, n):
    graphs = ds.generate_graphs(name, num_graphs=50, seed=0)
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
    graphs = ds.generate_graphs(name, seed=0)
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
    graphs = ds.generate_graphs("community_small", seed=0)
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
    d = ds.load_dataset(str(_needs_data("community_small.json")))
    for graphs in (d.train + d.test, ds.generate_graphs("community_small", seed=0)):
        one_bridge = np.mean([sum((u < g.number_of_nodes() // 2) != (v < g.number_of_nodes() // 2)
                                  for u, v in g.edges) == 1 for g in graphs])
        assert 0.65 < one_bridge < 0.95


# ----------------------------------------------------------------------------
# node counts


def test_max_num_nodes():
    assert ds.max_num_nodes([nx.path_graph(3), nx.path_graph(9), nx.empty_graph(4)]) == 9
    with pytest.raises(ValueError):
        ds.max_num_nodes([])


def test_node_count_distribution_and_sampling():
    graphs = [nx.empty_graph(n) for n in [5] * 6 + [9] * 3 + [12] * 1]
    dist = ds.node_count_distribution(graphs)
    np.testing.assert_array_equal(dist.counts, [5, 9, 12])
    np.testing.assert_allclose(dist.probs, [0.6, 0.3, 0.1])
    assert np.isclose(dist.probs.sum(), 1.0)
    num = 20000
    s = ds.sample_node_counts(dist, num, 0)
    assert s.dtype == np.int32 and s.shape == (num,)
    assert set(np.unique(s).tolist()) <= {5, 9, 12}
    for c, p in zip(dist.counts, dist.probs):
        assert abs((s == c).mean() - p) < 5 * np.sqrt(p * (1 - p) / num)
    np.testing.assert_array_equal(s, ds.sample_node_counts(dist, num, 0))
    rng = np.random.default_rng(1)
    a = ds.sample_node_counts(dist, 10, rng)
    b = ds.sample_node_counts(dist, 10, rng)  # the generator advances in place
    assert not np.array_equal(a, b)


def test_node_count_distribution_json_round_trip(tmp_path):
    dist = ds.node_count_distribution(_random_graphs(30))
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(dist.to_dict()))
    back = ds.NodeCountDistribution.from_dict(json.loads(path.read_text()))
    np.testing.assert_array_equal(back.counts, dist.counts)
    np.testing.assert_allclose(back.probs, dist.probs)
    with pytest.raises(ValueError):
        ds.NodeCountDistribution.from_dict({"counts": [3, 4], "probs": [0.5]})


def test_node_count_distribution_of_shared_train_split():
    d = ds.load_dataset(str(_needs_data("community_small.json")))
    dist = ds.node_count_distribution(d.train)
    assert set(dist.counts.tolist()) <= {12, 14, 16, 18, 20}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        json.dumps(dist.to_dict())
