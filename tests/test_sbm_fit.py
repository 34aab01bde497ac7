"""Tests of ddgjax.metrics.sbm_fit: the description length and the block-model fit."""
import networkx as nx
import numpy as np

from ddgjax.metrics.sbm_fit import fit_sbm, sbm_description_length, sbm_partition
from ddgjax.metrics.validity import sbm_block_counts
from helpers import planted_sbm


def same_partition(a, b) -> bool:
    """Whether two label arrays group the nodes the same way (labels may differ)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_fit_recovers_planted_blocks_and_dl_prefers_them():
    g, truth = planted_sbm([25, 35, 30], seed=11)
    blocks = fit_sbm(g)
    assert same_partition(blocks, truth)
    rng = np.random.default_rng(0)
    assert sbm_description_length(nx.to_numpy_array(g), truth) < sbm_description_length(
        nx.to_numpy_array(g), rng.integers(0, 3, size=len(truth)))
    sizes, e = sbm_block_counts(g, blocks)
    assert sorted(sizes.tolist()) == [25, 30, 35]
    assert e.sum() == 2 * g.number_of_edges()


def test_fit_is_deterministic_and_handles_trivial_graphs():
    g, _ = planted_sbm([20, 22], seed=1)
    np.testing.assert_array_equal(fit_sbm(g, seed=3), fit_sbm(g, seed=3))
    np.testing.assert_array_equal(sbm_partition(g, seed=3, fit="ddgjax"),
                                  fit_sbm(g, seed=3))
    assert fit_sbm(nx.empty_graph(0)).shape == (0,)
    assert fit_sbm(nx.complete_graph(6)).tolist() == [0] * 6         # one block is cheapest


def test_description_length_ignores_label_names():
    g, truth = planted_sbm([20, 25], seed=2)
    adj = nx.to_numpy_array(g)
    assert sbm_description_length(adj, truth) == sbm_description_length(adj, 7 - 3 * truth)
