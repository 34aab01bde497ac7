"""Tests of ddgjax.metrics.sbm_fit: the description length and the block-model fit."""
import networkx as nx
import numpy as np
import pytest

from ddgjax.metrics.sbm_fit import (benchmark_vertex_count, dc_description_length, fit_sbm,
                                    own_fit_on_benchmark_vertices, sbm_description_length,
                                    sbm_partition)
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


def test_dc_description_length_prefers_planted_blocks_and_pins_values():
    g, truth = planted_sbm([25, 30], seed=7)
    adj = nx.to_numpy_array(g)
    rng = np.random.default_rng(1)
    assert dc_description_length(adj, truth) < dc_description_length(adj, np.zeros(55, int))
    assert dc_description_length(adj, truth) < dc_description_length(
        adj, rng.integers(0, 2, size=55))
    # Two 5-cliques joined by one edge; graph-tool 2.45's state.entropy() gives 73.13 and
    # 77.07 nats for the two partitions; ours agrees within about 1.5 nats (ln q details).
    two_k5 = nx.disjoint_union(nx.complete_graph(5), nx.complete_graph(5))
    two_k5.add_edge(4, 5)
    a = nx.to_numpy_array(two_k5)
    split, whole = np.repeat([0, 1], 5), np.zeros(10, int)
    assert dc_description_length(a, split) == pytest.approx(74.4704, abs=1e-3)
    assert dc_description_length(a, whole) == pytest.approx(77.7196, abs=1e-3)


def test_fit_models_and_benchmark_vertices():
    g, truth = planted_sbm([22, 28], seed=3)
    for model in ("dc", "ndc"):
        assert same_partition(fit_sbm(g, model=model), truth)
    assert same_partition(fit_sbm(g, split_moves=True), truth)
    with pytest.raises(ValueError, match="unknown SBM model"):
        fit_sbm(g, model="nested")
    # Nodes after the last one with an edge are not part of the benchmark's fit.
    h = g.copy()
    h.add_nodes_from([50, 51])
    assert benchmark_vertex_count(h) == 50
    blocks = own_fit_on_benchmark_vertices(h)
    assert blocks[-2:].tolist() == [-1, -1] and same_partition(blocks[:50], truth)
    assert own_fit_on_benchmark_vertices(nx.empty_graph(3)).tolist() == [-1, -1, -1]


def _labelled_sbm_graphs(count: int) -> list:
    """Planted SBM graphs with string node labels, some with trailing isolated nodes."""
    graphs = []
    for k in range(count):
        g, _ = planted_sbm([20 + k % 3, 22, 21 + k % 2][: 2 + k % 2], seed=100 + k)
        g = nx.relabel_nodes(g, {v: f"v{v}" for v in g.nodes})
        if k % 2:
            g.add_nodes_from(["iso_a", "iso_b"])   # left out by the benchmark's fit
        graphs.append(g)
    return graphs


def test_our_fit_in_worker_processes_equals_the_fit_here():
    import warnings

    from ddgjax.metrics import sbm_fit_pool
    graphs = _labelled_sbm_graphs(8)
    fit = own_fit_on_benchmark_vertices
    here = sbm_fit_pool.labels_in_workers(fit, graphs, seed=2, workers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a worker failure would warn and fall back
        pooled = sbm_fit_pool.labels_in_workers(fit, graphs, seed=2, workers=2)
    assert len(pooled) == len(graphs)
    for g, a, b in zip(graphs, here, pooled):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, own_fit_on_benchmark_vertices(g, seed=2))
    assert (here[1][-2:] == -1).all()
    rec = sbm_fit_pool.graph_record(graphs[0])
    back = sbm_fit_pool.graph_from_record(rec)
    assert list(back.nodes) == list(range(graphs[0].number_of_nodes()))
    assert back.number_of_edges() == graphs[0].number_of_edges()


def test_our_fit_falls_back_when_a_worker_fails(monkeypatch):
    import sys

    from ddgjax.metrics import sbm_fit_pool
    graphs = _labelled_sbm_graphs(8)
    monkeypatch.setattr(sbm_fit_pool, "WORKER_COMMAND", (sys.executable, "-c",
                                                         "import sys; sys.exit(3)"))
    with pytest.warns(RuntimeWarning, match="status 3.*fitting in this process"):
        got = sbm_fit_pool.labels_in_workers(own_fit_on_benchmark_vertices, graphs, seed=0,
                                             workers=2)
    for g, b in zip(graphs, got):
        np.testing.assert_array_equal(b, own_fit_on_benchmark_vertices(g, seed=0))


def test_fit_workers_reads_its_variable(monkeypatch):
    from ddgjax.metrics import sbm_fit_pool
    monkeypatch.setenv("DDGJAX_SBM_FIT_WORKERS", "3")
    assert sbm_fit_pool.fit_workers() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("DDGJAX_SBM_FIT_WORKERS", bad)
        with pytest.raises(ValueError, match=r"\$DDGJAX_SBM_FIT_WORKERS: expected a whole"):
            sbm_fit_pool.fit_workers()
    monkeypatch.delenv("DDGJAX_SBM_FIT_WORKERS")
    assert 1 <= sbm_fit_pool.fit_workers() <= sbm_fit_pool.MAX_DEFAULT_WORKERS
