"""Tests of ddgjax.data.datasets: load_dataset, carried splits, the paper and SPECTRE splits."""
from __future__ import annotations

import json

import networkx as nx
import pytest

from ddgjax.data import datasets as ds
from ddgjax.data import generate_graphs, write_graph_list
from ddgjax.graphs import GraphFormatError
from helpers import SHARED_DIR, data_file, needs_shared, random_graphs, same_graph

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


# ----------------------------------------------------------------------------
# JSON files and their splits


@pytest.mark.parametrize("fname", sorted(README_SPLITS))
def test_shared_json_split_sizes(fname):
    d = ds.load_dataset(str(data_file(fname)))
    assert (len(d.train), len(d.val), len(d.test)) == README_SPLITS[fname]
    assert d.name == fname[:-5]
    for g in d.train + d.val + d.test:
        assert sorted(g.nodes) == list(range(g.number_of_nodes()))
        assert nx.number_of_selfloops(g) == 0


@pytest.mark.parametrize("fname", PAPER_FILES)
def test_shared_paper_files_test_is_first_20_percent(fname):
    path = data_file(fname)
    d = ds.load_dataset(str(path))
    records = json.loads(path.read_text())["graphs"]
    num_test = int(0.2 * len(records))
    for g, rec in zip(d.test + d.train, records):  # test = file[:20%], train = file[20%:]
        want = nx.empty_graph(rec["n"])
        want.add_edges_from(map(tuple, rec["edges"]))
        assert same_graph(g, want)
    assert len(d.test) == num_test


def test_json_without_split_uses_paper_rule(tmp_path):
    graphs = random_graphs(23)
    path = tmp_path / "nosplit.json"
    write_graph_list(path, graphs)
    d = ds.load_dataset(str(path))
    assert d.name == "nosplit" and d.source == str(path)
    assert len(d.test) == int(0.2 * 23) == 4 and len(d.train) == 19 and d.val == []
    assert all(same_graph(a, b) for a, b in zip(d.test + d.train, graphs))


def test_json_carried_split_is_used(tmp_path):
    graphs = random_graphs(6)
    path = tmp_path / "s.json"
    write_graph_list(path, graphs, split={"train": [5, 1, 2], "val": [3], "test": [0, 4]})
    d = ds.load_dataset(path)
    assert [len(d.train), len(d.val), len(d.test)] == [3, 1, 2]
    assert same_graph(d.train[0], graphs[5]) and same_graph(d.val[0], graphs[3])
    assert same_graph(d.test[1], graphs[4])


def test_json_overlapping_split_is_an_error(tmp_path):
    path = tmp_path / "bad.json"
    write_graph_list(path, random_graphs(5), split={"train": [0, 1, 2], "test": [2, 3]})
    with pytest.raises(GraphFormatError, match=r"bad\.json.*\[2\].*'train' and 'test'"):
        ds.load_dataset(path)


def test_carried_split_without_test_is_an_error(tmp_path):
    path = tmp_path / "half.json"
    write_graph_list(path, random_graphs(5), split={"train": [0, 1, 2]})
    with pytest.raises(GraphFormatError, match=r"half\.json: split lacks \['test'\]"):
        ds.load_dataset(path)


# ----------------------------------------------------------------------------
# errors


def test_empty_graph_list_is_an_error(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"graphs": []}))
    with pytest.raises(GraphFormatError, match=r"empty\.json: contains no graphs"):
        ds.load_dataset(str(path))


def test_graph_without_nodes_is_an_error(tmp_path):
    path = tmp_path / "z.json"
    path.write_text(json.dumps({"graphs": [{"n": 2, "edges": [[0, 1]]}, {"n": 0}]}))
    with pytest.raises(GraphFormatError, match=r"z\.json: graph 1: has no nodes"):
        ds.load_dataset(str(path))


def test_unknown_builtin_lists_valid_names():
    with pytest.raises(ValueError,
                       match="unknown builtin dataset 'ego'.*community_small.*spectre_sbm"):
        ds.load_dataset("builtin:ego")


def test_num_graphs_with_a_path_is_an_error(tmp_path):
    path = tmp_path / "a.json"
    write_graph_list(path, random_graphs(5))
    with pytest.raises(ValueError, match="num_graphs applies only to builtin"):
        ds.load_dataset(str(path), num_graphs=3)


# ----------------------------------------------------------------------------
# builtin datasets and the splits


def test_builtin_dataset_splits():
    d = ds.load_dataset("builtin:community_small")
    assert (d.name, d.source) == ("community_small", "builtin:community_small")
    assert (len(d.train), len(d.val), len(d.test)) == (80, 0, 20)
    gen = generate_graphs("community_small", seed=0)
    assert same_graph(d.test[0], gen[0]) and same_graph(d.train[0], gen[20])
    s = ds.load_dataset("builtin:spectre_sbm", seed=3)
    assert (len(s.train), len(s.val), len(s.test)) == (128, 32, 40)
    split = ds.spectre_split(200, seed=3)
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(200))
    assert split != ds.spectre_split(200, seed=4)
    small = ds.load_dataset("builtin:planar_60", num_graphs=10, seed=1)
    assert (len(small.train), len(small.test)) == (8, 2)


def test_paper_split():
    assert ds.paper_split(10) == {"train": list(range(2, 10)), "test": [0, 1], "val": []}
    assert ds.paper_split(4) == {"train": [0, 1, 2, 3], "test": [], "val": []}


def test_builtin_graphs_are_cleaned():
    d = ds.load_dataset("builtin:sbm_27", num_graphs=5)
    assert all(g.graph == {} for g in d.train + d.test)


# ----------------------------------------------------------------------------
# bundled datasets


@needs_shared
@pytest.mark.parametrize("name", ds.BUNDLED_NAMES)
def test_bundled_copy_is_identical_to_the_source_file(name):
    import gzip

    source = SHARED_DIR / f"{name}.json"  # the source itself, never the bundled copy
    with gzip.open(ds.bundled_path(name), "rb") as f:
        assert f.read() == source.read_bytes()


@pytest.mark.parametrize("name", ds.BUNDLED_NAMES)
def test_bundled_names_load_from_any_directory(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = ds.load_dataset(name)
    assert d.name == name and d.source == name
    assert (len(d.train), len(d.val), len(d.test)) == README_SPLITS[f"{name}.json"]


def test_unknown_name_lists_the_bundled_datasets():
    with pytest.raises(GraphFormatError, match="not a bundled dataset.*planar_60"):
        ds.load_dataset("planar_6")
