"""Tests of ddgjax.data.formats: JSON graph lists, edge lists, GraphML, pickles.

Some go through :func:`ddgjax.data.load_dataset`, the way users reach the readers.
"""
from __future__ import annotations

import json
import pickle

import networkx as nx
import pytest

from ddgjax.data import formats, load_dataset
from ddgjax.data.formats import (GraphListFile, graph_to_record, read_graph_list, select_split,
                                 write_graph_list)
from ddgjax.graphs import GraphFormatError
from helpers import data_file, random_graphs, same_graph

# ----------------------------------------------------------------------------
# JSON graph lists


def test_graph_list_round_trip(tmp_path):
    graphs = random_graphs(7) + [nx.empty_graph(3)]
    path = tmp_path / "gs.json"
    write_graph_list(path, graphs, split={"train": [0, 1, 2, 3, 4], "test": [5, 6, 7]},
                     note="written by a test")
    f = read_graph_list(path)
    assert isinstance(f, GraphListFile)
    assert (f.name, f.path) == ("gs", str(path))
    assert f.split == {"train": [0, 1, 2, 3, 4], "test": [5, 6, 7]}
    assert all(same_graph(a, b) for a, b in zip(f.graphs, graphs)) and len(f.graphs) == 8
    assert json.loads(path.read_text())["note"] == "written by a test"
    assert not list(tmp_path.glob("*.tmp*"))               # the temp file was renamed away


def test_graph_to_record_relabels_and_sorts():
    g = nx.Graph([("b", "a"), ("c", "b")])
    assert graph_to_record(g) == {"n": 3, "edges": [[0, 1], [1, 2]]}


def test_select_split(tmp_path):
    path = tmp_path / "s.json"
    graphs = random_graphs(4)
    write_graph_list(path, graphs, split={"train": [3, 0], "test": [1]})
    f = read_graph_list(path)
    assert len(select_split(f, None)) == 4
    assert [same_graph(g, graphs[i]) for g, i in zip(select_split(f, "train"), (3, 0))] == [
        True, True]
    assert select_split(f, "val") == []                 # a split without val: val empty
    with pytest.raises(GraphFormatError, match=r"s\.json: unknown split 'valid'.*test, train, val"):
        select_split(f, "valid")


def test_one_split_rule_for_files_without_a_split(tmp_path):
    """select_split (evaluation, completion, likelihood) takes the same graphs as
    load_dataset (training, sampling's eval.json): test = the first int(0.2 N)."""
    path = tmp_path / "plain.json"
    graphs = random_graphs(11)
    write_graph_list(path, graphs)
    f, ds = read_graph_list(path), load_dataset(str(path))
    for name in ("train", "test", "val"):
        picked = select_split(f, name)
        assert len(picked) == len(getattr(ds, name)) == {"train": 9, "test": 2, "val": 0}[name]
        assert all(same_graph(g, h) for g, h in zip(picked, getattr(ds, name)))
    assert ds.index["test"] == [0, 1]


def test_bare_list_and_non_list_split_entries(tmp_path):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([{"n": 2, "edges": [[0, 1]]}, {"n": 1}]))
    f = read_graph_list(path)
    assert [g.number_of_nodes() for g in f.graphs] == [2, 1] and f.split == {}
    path.write_text(json.dumps({"split": {"rule": "first 20%", "test": [0]},
                                "graphs": [{"n": 2, "edges": []}]}))
    assert read_graph_list(path).split == {"test": [0]}


@pytest.mark.parametrize("record,match", [
    ([0, 1], r"graph 1: expected an object with fields 'n' and 'edges'"),
    ({"edges": []}, r"graph 1: missing field 'n'"),
    ({"n": -1}, r"graph 1: field 'n' must be a non-negative integer"),
    ({"n": True}, r"graph 1: field 'n' must be a non-negative integer"),
    ({"n": 3, "edges": {"0": 1}}, r"graph 1: field 'edges' must be a list"),
    ({"n": 3, "edges": [[0, 1], [0, 1, 2]]}, r"graph 1: field 'edges'\[1\] must be a pair"),
    ({"n": 3, "edges": [[0, 3]]}, r"graph 1: field 'edges'\[0\] = \[0, 3\] points outside"),
])
def test_graph_list_field_errors_name_file_graph_and_field(tmp_path, record, match):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"graphs": [{"n": 2, "edges": [[0, 1]]}, record]}))
    with pytest.raises(GraphFormatError, match=r"bad\.json: " + match):
        read_graph_list(path)


def test_graph_list_file_level_errors(tmp_path):
    path = tmp_path / "f.json"
    with pytest.raises(GraphFormatError, match=r"f\.json: file not found"):
        read_graph_list(path)
    path.write_text(json.dumps({"graphs": {}}))
    with pytest.raises(GraphFormatError, match=r"f\.json: field 'graphs' must be a list"):
        read_graph_list(path)
    path.write_text(json.dumps({"name": "x"}))
    with pytest.raises(GraphFormatError, match=r"f\.json: expected an object with a field"):
        read_graph_list(path)
    path.write_text(json.dumps({"split": {"test": [2]}, "graphs": [{"n": 1}]}))
    with pytest.raises(GraphFormatError, match=r"f\.json: field 'split'\.test must list"):
        read_graph_list(path)


def test_json_self_loops_dropped_with_warning(tmp_path):
    path = tmp_path / "loops.json"
    path.write_text(json.dumps({"graphs": [{"n": 3, "edges": [[0, 1], [1, 1], [1, 2]]}] * 5}))
    with pytest.warns(UserWarning, match="self-loop"):
        d = load_dataset(path)
    assert all(nx.number_of_selfloops(g) == 0 and g.number_of_edges() == 2 for g in d.train)


def test_malformed_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"graphs": [{"n": 3, "edges": [[0, 1]')
    with pytest.raises(GraphFormatError, match=r"broken\.json: malformed JSON"):
        load_dataset(str(path))
    records = [{"n": 3, "edges": [[0, 1]]}, {"n": 2, "edges": [[0, 5]]}]
    path.write_text(json.dumps({"graphs": records}))
    with pytest.raises(GraphFormatError, match=r"broken\.json: graph 1: .*outside"):
        load_dataset(str(path))


# ----------------------------------------------------------------------------
# edge lists, GraphML, pickles


def test_edge_list_dir_round_trip(tmp_path):
    graphs = random_graphs(10, seed=1)
    for k, g in enumerate(graphs):
        nx.write_edgelist(g, tmp_path / f"g{k:02d}.edgelist", data=False)
    (tmp_path / "notes.md").write_text("not a graph")
    with pytest.warns(UserWarning, match="ignoring 1 file"):
        d = load_dataset(str(tmp_path))
    assert d.name == tmp_path.name
    assert len(d.test) == 2 and len(d.train) == 8
    for got, want in zip(d.test + d.train, graphs):
        # nodes without edges cannot be expressed; compare after dropping them
        want = nx.convert_node_labels_to_integers(
            want.subgraph([v for v in sorted(want.nodes) if want.degree[v] > 0]))
        assert same_graph(got, want)


def test_edge_list_comments_and_default_data_column(tmp_path):
    (tmp_path / "a.txt").write_text("# header\n\n10 2  # trailing\n2 3 {}\n3 10\n")
    g = formats.read_edge_list(str(tmp_path / "a.txt"))
    assert {frozenset(e) for e in g.edges} == {frozenset(e) for e in [(2, 3), (2, 10), (3, 10)]}


def test_edge_list_malformed_names_file_and_line(tmp_path):
    (tmp_path / "g0.txt").write_text("0 1\n1 x\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: line 2: node ids must be integers"):
        load_dataset(str(tmp_path))
    (tmp_path / "g0.txt").write_text("0 1\n7\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: line 2: expected two node ids"):
        load_dataset(str(tmp_path))
    (tmp_path / "g0.txt").write_text("# nothing\n")
    with pytest.raises(GraphFormatError, match=r"g0\.txt: no edges"):
        load_dataset(str(tmp_path))


def test_graphml_file_and_dir_round_trip(tmp_path):
    graphs = random_graphs(5, seed=2)
    for g in graphs:
        g.add_node(g.number_of_nodes())  # an isolated node: GraphML keeps it
    # >10 nodes so that string ids "10" vs "2" would sort wrongly if not converted
    big = nx.path_graph(13)
    graphs.append(big)
    for k, g in enumerate(graphs):
        nx.write_graphml(g, tmp_path / f"g{k}.graphml")
    with pytest.warns(UserWarning, match="test split is empty"):
        one = load_dataset(str(tmp_path / "g5.graphml"))
    assert one.name == "g5" and same_graph(one.train[0], big) and one.test == []
    d = load_dataset(str(tmp_path))
    assert len(d.test) == 1 and len(d.train) == 5
    for got, want in zip(d.test + d.train, graphs):
        assert same_graph(got, want)


def test_graph_dir_mixing_formats_is_an_error(tmp_path):
    nx.write_edgelist(nx.path_graph(3), tmp_path / "a.edges", data=False)
    nx.write_graphml(nx.path_graph(3), tmp_path / "b.graphml")
    with pytest.raises(GraphFormatError, match=r"mixes edge-list files \(a\.edges"):
        formats.read_graph_dir(str(tmp_path))


def test_graphml_directed_is_an_error(tmp_path):
    nx.write_graphml(nx.DiGraph([(0, 1)]), tmp_path / "d.graphml")
    with pytest.raises(GraphFormatError, match=r"d\.graphml.*directed"):
        load_dataset(str(tmp_path / "d.graphml"))


def test_pickle_refused_without_option_and_accepted_with_it(tmp_path):
    graphs = random_graphs(10, seed=3)
    graphs[0].add_edge(1, 1)
    path = tmp_path / "gs.pkl"
    path.write_bytes(pickle.dumps(graphs))
    with pytest.raises(GraphFormatError, match="allow_pickle=True"):
        load_dataset(str(path))
    with pytest.warns(UserWarning) as record:
        d = load_dataset(str(path), allow_pickle=True)
    messages = " | ".join(str(w.message) for w in record)
    assert "arbitrary code" in messages and "self-loop" in messages
    assert len(d.test) == 2 and len(d.train) == 8
    graphs[0].remove_edge(1, 1)
    assert all(same_graph(a, b) for a, b in zip(d.test + d.train, graphs))


def test_pickle_of_split_dict(tmp_path):
    graphs = random_graphs(7, seed=4)
    path = tmp_path / "split.pickle"
    path.write_bytes(pickle.dumps({"train": graphs[:4], "val": graphs[4:5], "test": graphs[5:]}))
    with pytest.warns(UserWarning, match="arbitrary code"):
        d = load_dataset(str(path), allow_pickle=True)
    assert [len(d.train), len(d.val), len(d.test)] == [4, 1, 2]
    assert same_graph(d.val[0], graphs[4])


def test_raw_pickle_matches_json():
    pkl = data_file("raw/discrete_DPPM_Graphs/community_20_small.pkl")
    with pytest.warns(UserWarning, match="arbitrary code"):
        a = load_dataset(str(pkl), allow_pickle=True)
    b = load_dataset(str(data_file("community_small.json")))
    for x, y in zip(a.train + a.test, b.train + b.test):
        assert same_graph(x, y)


# ----------------------------------------------------------------------------
# dispatch on a path


def test_missing_path(tmp_path):
    with pytest.raises(GraphFormatError, match=r"nope\.json: file or directory not found"):
        load_dataset(str(tmp_path / "nope.json"))


def test_unknown_format_and_directory_without_graphs(tmp_path):
    (tmp_path / "x.csv").write_text("0,1\n")
    with pytest.raises(GraphFormatError, match=r"x\.csv: unknown format '\.csv'"):
        load_dataset(str(tmp_path / "x.csv"))
    sub = tmp_path / "nographs"
    sub.mkdir()
    with pytest.raises(GraphFormatError, match="no graph files found"):
        load_dataset(str(sub))


def test_read_graphs_names_and_carried_splits(tmp_path):
    nx.write_edgelist(nx.path_graph(4), tmp_path / "p4.edges", data=False)
    f = formats.read_graphs(str(tmp_path / "p4.edges"))
    assert (f.name, f.split, len(f.graphs)) == ("p4", {}, 1)
    path = tmp_path / "s.pkl"
    path.write_bytes(pickle.dumps({"train": random_graphs(2), "test": random_graphs(1)}))
    with pytest.warns(UserWarning, match="arbitrary code"):
        f = formats.read_graphs(str(path), allow_pickle=True)
    assert f.split == {"train": [0, 1], "val": [], "test": [2]}


def test_a_gz_path_is_written_gzipped_and_reads_back(tmp_path):
    import gzip

    path = tmp_path / "g.json.gz"
    graphs = random_graphs(3)
    write_graph_list(path, graphs, name="g")
    with gzip.open(path, "rt") as f:
        assert json.load(f)["name"] == "g"
    assert all(same_graph(g, h) for g, h in zip(read_graph_list(path).graphs, graphs))
