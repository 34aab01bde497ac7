"""Graph-level labels and properties: the JSON fields, clean_graph, ``mix:`` sources and the
SBM-L community counts replayed for caches written without them."""
from __future__ import annotations

import gzip
import json

import networkx as nx
import numpy as np
import pytest

from ddgjax.data import large_sets, load_dataset
from ddgjax.data.formats import graph_to_record, read_graph_list, write_graph_list
from ddgjax.graphs import GraphFormatError, check_graph_labels, clean_graph
from ddgjax.input_pipeline import data_path, dataset_record, graphs_digest

# ----------------------------------------------------------------------------
# JSON graph lists


def test_labels_and_properties_round_trip(tmp_path):
    a = nx.path_graph(3)
    a.graph.update(label="planar", properties={"communities": 2, "density": 0.25},
                   points=[[0, 0]])                               # dropped: not a label
    b = nx.cycle_graph(4)
    b.graph["label"] = 7
    c = nx.empty_graph(2)                                         # neither
    path = tmp_path / "labelled.json.gz"
    write_graph_list(path, [a, b, c])
    f = read_graph_list(path)
    assert [g.graph for g in f.graphs] == [
        {"label": "planar", "properties": {"communities": 2, "density": 0.25}},
        {"label": 7}, {}]
    assert isinstance(f.graphs[0].graph["properties"]["communities"], int)
    assert graph_to_record(f.graphs[2]) == {"n": 2, "edges": []}  # no empty fields written
    assert [graph_to_record(g) for g in f.graphs] == [graph_to_record(g) for g in (a, b, c)]


@pytest.mark.parametrize("fields, match", [
    ({"label": [1]}, r"field 'label' must be a string or an integer, got \[1\]"),
    ({"label": True}, r"field 'label' must be a string or an integer, got True"),
    ({"label": 1.5}, r"field 'label' must be a string or an integer, got 1\.5"),
    ({"label": ""}, r"field 'label' must be a non-empty string"),
    ({"properties": [1, 2]}, r"field 'properties' must be an object mapping names to numbers"),
    ({"properties": {"k": "3"}}, r"field 'properties'\.k must be a finite number .*got '3'"),
    ({"properties": {"k": False}}, r"field 'properties'\.k must be a finite number"),
    ({"properties": {"k": None}}, r"field 'properties'\.k must be a finite number"),
    ({"properties": {"": 1}}, r"field 'properties' must have non-empty string names"),
])
def test_bad_labels_name_file_graph_and_field(tmp_path, fields, match):
    path = tmp_path / "bad.json"
    records = [{"n": 2, "edges": [[0, 1]], "label": "ok"}, {"n": 2, "edges": [], **fields}]
    path.write_text(json.dumps({"graphs": records}))
    with pytest.raises(GraphFormatError, match=r"^.*bad\.json: graph 1: " + match):
        read_graph_list(path)


def test_non_finite_property_in_json(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('{"graphs": [{"n": 1, "properties": {"x": NaN}}]}')   # Python's json reads it
    with pytest.raises(GraphFormatError, match=r"nan\.json: graph 0: field 'properties'\.x "
                                               r"must be a finite number .*got nan"):
        read_graph_list(path)


# ----------------------------------------------------------------------------
# clean_graph (the Python API)


def test_clean_graph_keeps_only_label_and_properties():
    g = nx.Graph([("b", "a")], label=np.int64(3), properties={"x": np.float32(0.5), "k": 2},
                 name="dropped")
    out = clean_graph(g)
    assert out.graph == {"label": 3, "properties": {"x": 0.5, "k": 2}}
    assert type(out.graph["label"]) is int and type(out.graph["properties"]["x"]) is float
    assert clean_graph(nx.Graph(properties={})).graph == {}        # empty properties: none
    out.graph["properties"]["k"] = 5
    assert g.graph["properties"]["k"] == 2                         # a copy, not shared


@pytest.mark.parametrize("attrs, match", [
    ({"label": (1,)}, r"field 'label' must be a string or an integer, got \(1,\)"),
    ({"properties": {"x": float("inf")}}, r"field 'properties'\.x must be a finite number"),
    ({"properties": {1: 2}}, r"field 'properties' must have non-empty string names, got 1"),
    ({"properties": 3}, r"field 'properties' must be an object"),
])
def test_clean_graph_rejects_bad_labels(attrs, match):
    with pytest.raises(GraphFormatError, match=r"^src: graph 4: " + match):
        clean_graph(nx.Graph(**attrs), "src", 4)


def test_check_graph_labels_absent():
    assert check_graph_labels(None, None, "") == (None, None)


# ----------------------------------------------------------------------------
# mix: sources


def test_mix_labels_each_graph_with_its_dataset_and_concatenates_splits():
    names = ("spectre_planar_64", "spectre_sbm", "community_small")
    parts = [load_dataset(n) for n in names]
    mix = load_dataset("mix:" + ",".join(names))
    assert mix.name == mix.source == "mix:spectre_planar_64,spectre_sbm,community_small"
    for key in ("train", "test", "val"):
        graphs = getattr(mix, key)
        assert [g.graph["label"] for g in graphs] == \
            [n for n, ds in zip(names, parts) for _ in getattr(ds, key)]
        assert graphs_digest(graphs) == graphs_digest(sum((getattr(ds, key) for ds in parts), []))
        # index: component c's graph i at the summed sizes of the components before it + i
        assert mix.index[key] == [200 * c + i for c, ds in enumerate(parts)
                                  for i in ds.index[key]]
    assert (len(mix.train), len(mix.test), len(mix.val)) == (128 + 128 + 80, 40 + 40 + 20, 64)
    assert data_path(mix.source) is None
    assert dataset_record(mix.source, mix, 200)["path"] is None


def test_evaluation_takes_a_mix_reference_and_its_splits():
    from ddgjax.evaluate import load_graphs, parse_graph_spec

    assert parse_graph_spec("mix:ego_small,builtin:sbm_27") == ("mix:ego_small,builtin:sbm_27",
                                                                None)
    assert parse_graph_spec("mix:ego_small,builtin:sbm_27:test") == (
        "mix:ego_small,builtin:sbm_27", "test")
    mix = load_dataset("mix:spectre_planar_64,spectre_sbm")
    for split in ("train", "val", "test"):
        graphs, f, got = load_graphs(f"mix:spectre_planar_64,spectre_sbm:{split}", "--reference")
        assert got == split and graphs_digest(graphs) == graphs_digest(getattr(mix, split))
        assert [g.graph["label"] for g in graphs] == [g.graph["label"] for g in getattr(mix, split)]
    assert len(load_graphs("mix:spectre_planar_64,spectre_sbm", "--reference")[0]) == 400


def test_mix_replaces_labels_and_keeps_properties(tmp_path):
    path = tmp_path / "own.json"
    records = [{"n": 3, "edges": [[0, 1]], "label": "theirs", "properties": {"p": 1.5}}] * 5
    path.write_text(json.dumps({"graphs": records}))
    mix = load_dataset(f"mix:{path}, builtin:sbm_27")               # spaces around names go
    assert {g.graph["label"] for g in mix.train} == {str(path), "builtin:sbm_27"}
    own = [g for g in mix.train + mix.test if g.graph["label"] == str(path)]
    assert len(own) == 5 and all(g.graph["properties"] == {"p": 1.5} for g in own)


@pytest.mark.parametrize("source, match", [
    ("mix:", r"^mix:: names no datasets"),
    ("mix:spectre_sbm,,community_small", r"^mix:spectre_sbm,,community_small: an empty"),
    ("mix:spectre_sbm,spectre_sbm", r"^mix:spectre_sbm,spectre_sbm: names spectre_sbm more than"),
    ("mix:spectre_sbm,no_such_set", r"^mix:spectre_sbm,no_such_set: unknown dataset 'no_such_"),
    ("mix:builtin:nope", r"^mix:builtin:nope: .*nope"),
    ("mix:mix:spectre_sbm", r"^mix:mix:spectre_sbm: a mix cannot contain another mix"),
])
def test_mix_errors_name_the_source(source, match):
    with pytest.raises(ValueError, match=match):
        load_dataset(source)


# ----------------------------------------------------------------------------
# SBM-L community counts


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_sbm_l_replay_recovers_the_generators_block_counts(split):
    graphs = large_sets.generate_split("sbm_l", split, num_graphs=5)
    replayed = large_sets.replay_split("sbm_l", split, num_graphs=5)
    assert [g.graph["properties"] for g in graphs] == [p for p, _ in replayed] == \
        large_sets.split_properties("sbm_l", split, 5)
    for g, (props, n) in zip(graphs, replayed):
        assert 2 <= props["communities"] <= 5 and n == g.number_of_nodes()
    assert large_sets.replay_split("planar_l", split, 2) is None


def test_sbm_l_replay_draws_what_the_generator_draws():
    """k, the k sizes (their sum is the node count), then one [n, n] uniform matrix: the
    replay leaves the generator where drawing them would, also after 32-bit draws."""
    rng = large_sets._split_rng("sbm_l", "train")
    k = int(rng.integers(2, 6))
    sizes = rng.integers(20, 41, size=k)
    rng.random((sizes.sum(),) * 2)
    after = rng.integers(2, 6, size=8)
    rng = large_sets._split_rng("sbm_l", "train")
    props, n = large_sets.sbm_l_replay(rng)
    assert (props, n) == ({"communities": k}, int(sizes.sum()))
    assert (rng.integers(2, 6, size=8) == after).all()


def test_cached_sbm_l_without_properties_gets_them(tmp_path, monkeypatch):
    """A cache written before graphs carried properties: read_cached replays them; a cache
    of other graphs (node counts differ) is made again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(large_sets, "SPLIT_SIZES", {"train": 4, "val": 2, "test": 3})
    graphs, split = [], {}
    for part in ("train", "val", "test"):
        made = large_sets.generate_split("sbm_l", part)
        split[part] = list(range(len(graphs), len(graphs) + len(made)))
        graphs += made
    expected = [dict(g.graph["properties"]) for g in graphs]
    for g in graphs:
        del g.graph["properties"]
    (tmp_path / "ddgjax").mkdir()
    path = tmp_path / "ddgjax" / "sbm_l.json.gz"
    write_graph_list(path, graphs, name="sbm_l", split=split)
    assert "properties" not in json.dumps(read_graph_list(path).graphs[0].graph)
    f = large_sets.read_cached("sbm_l")
    assert [g.graph["properties"] for g in f.graphs] == expected
    assert "properties" not in gzip.open(path, "rt").read()          # replayed, not made again
    ds = load_dataset("sbm_l")
    assert [g.graph["properties"] for g in ds.test] == expected[6:]
    write_graph_list(path, [nx.path_graph(3)] * 9, name="sbm_l", split=split)   # other graphs
    f = large_sets.read_cached("sbm_l")
    assert [g.graph["properties"] for g in f.graphs] == expected
    assert "communities" in gzip.open(path, "rt").read()             # made again, with them
    assert graphs_digest(f.graphs) == graphs_digest(graphs)
