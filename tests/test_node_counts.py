"""Tests of ddgjax.data.node_counts: max_num_nodes and the node-count distribution."""
from __future__ import annotations

import json
import warnings

import networkx as nx
import numpy as np
import pytest

from ddgjax.data import load_dataset
from ddgjax.data import node_counts as nc
from helpers import data_file, random_graphs


def test_max_num_nodes():
    assert nc.max_num_nodes([nx.path_graph(3), nx.path_graph(9), nx.empty_graph(4)]) == 9
    with pytest.raises(ValueError):
        nc.max_num_nodes([])


def test_node_count_distribution_and_sampling():
    graphs = [nx.empty_graph(n) for n in [5] * 6 + [9] * 3 + [12] * 1]
    dist = nc.node_count_distribution(graphs)
    np.testing.assert_array_equal(dist.counts, [5, 9, 12])
    np.testing.assert_allclose(dist.probs, [0.6, 0.3, 0.1])
    assert np.isclose(dist.probs.sum(), 1.0)
    num = 20000
    s = nc.sample_node_counts(dist, num, 0)
    assert s.dtype == np.int32 and s.shape == (num,)
    assert set(np.unique(s).tolist()) <= {5, 9, 12}
    for c, p in zip(dist.counts, dist.probs):
        assert abs((s == c).mean() - p) < 5 * np.sqrt(p * (1 - p) / num)
    np.testing.assert_array_equal(s, nc.sample_node_counts(dist, num, 0))
    rng = np.random.default_rng(1)
    a = nc.sample_node_counts(dist, 10, rng)
    b = nc.sample_node_counts(dist, 10, rng)  # the generator advances in place
    assert not np.array_equal(a, b)


def test_node_count_distribution_json_round_trip(tmp_path):
    dist = nc.node_count_distribution(random_graphs(30))
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(dist.to_dict()))
    back = nc.NodeCountDistribution.from_dict(json.loads(path.read_text()))
    np.testing.assert_array_equal(back.counts, dist.counts)
    np.testing.assert_allclose(back.probs, dist.probs)
    with pytest.raises(ValueError):
        nc.NodeCountDistribution.from_dict({"counts": [3, 4], "probs": [0.5]})


def test_from_dict_rejects_bad_values():
    with pytest.raises(ValueError, match="counts >= 1 and probs >= 0 summing to 1"):
        nc.NodeCountDistribution.from_dict({"counts": [0, 4], "probs": [0.5, 0.5]})
    with pytest.raises(ValueError, match="summing to 1, got sum 0.9"):
        nc.NodeCountDistribution.from_dict({"counts": [3, 4], "probs": [0.5, 0.4]})
    with pytest.raises(ValueError, match="empty graph list"):
        nc.node_count_distribution([])


def test_node_count_distribution_of_shared_train_split():
    d = load_dataset(str(data_file("community_small.json")))
    dist = nc.node_count_distribution(d.train)
    assert set(dist.counts.tolist()) <= {12, 14, 16, 18, 20}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        json.dumps(dist.to_dict())
