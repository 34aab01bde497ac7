"""The graph-tool bridge: request/reply helpers, fit selection and fallback, and (where
graph-tool is found) its fit on a few graphs. Nothing here needs graph-tool to pass."""
import networkx as nx
import numpy as np
import pytest

from ddgjax.metrics import graph_tool_bridge as bridge
from ddgjax.metrics import sbm_fit
from ddgjax.metrics._graph_tool_worker import directed_edge_array, first_appearance_labels
from ddgjax.metrics.validity import sbm_block_counts, sbm_blocks_pass, sbm_validity
from helpers import planted_sbm

needs_graph_tool = pytest.mark.skipif(bridge.find_graph_tool() is None,
                                      reason="graph-tool not found (python3-graph-tool)")


def test_request_and_reply_helpers():
    g = nx.Graph()
    g.add_nodes_from([3, 1, 2, 0])                      # g.nodes order numbers the nodes
    g.add_edges_from([(3, 1), (2, 0), (2, 2)])
    assert bridge.graph_to_request(g) == {"n": 4, "edges": [[0, 1], [2, 3]]}
    np.testing.assert_array_equal(directed_edge_array(4, [[0, 1], [2, 3]]),
                                  [[0, 1], [1, 0], [2, 3], [3, 2]])
    assert bridge.blocks_from_reply({"blocks": [1, 0]}, 4).tolist() == [1, 0, -1, -1]
    assert bridge.blocks_from_reply({"error": "x"}, 2).tolist() == [-1, -1]
    assert first_appearance_labels([7, 7, 2, 9, 2]).tolist() == [0, 0, 1, 2, 1]


def test_fit_selection(monkeypatch):
    monkeypatch.setattr(bridge, "find_graph_tool", lambda: None)
    monkeypatch.setattr(sbm_fit, "find_graph_tool", lambda: None)
    assert sbm_fit.resolve_sbm_fit("auto") == (None, "ddgjax")
    assert sbm_fit.resolve_sbm_fit("ddgjax") == (None, "ddgjax")
    with pytest.raises(RuntimeError, match="graph-tool was not found"):
        sbm_fit.resolve_sbm_fit("graph-tool")
    with pytest.raises(ValueError, match="unknown SBM fit"):
        sbm_fit.resolve_sbm_fit("louvain")
    monkeypatch.setenv(sbm_fit.FIT_ENV_VAR, "ddgjax")
    assert sbm_fit.resolve_sbm_fit(None)[1] == "ddgjax"


def test_env_var_none_turns_graph_tool_off(monkeypatch):
    monkeypatch.setenv(bridge.ENV_VAR, "none")
    bridge.reset_graph_tool_cache()
    try:
        assert bridge.find_graph_tool() is None
    finally:
        monkeypatch.delenv(bridge.ENV_VAR)
        bridge.reset_graph_tool_cache()


def test_failing_interpreter_falls_back_with_a_warning(monkeypatch):
    broken = bridge.GraphToolRuntime("/bin/false", "0.0")
    monkeypatch.setattr(sbm_fit, "find_graph_tool", lambda: broken)
    g, _ = planted_sbm([25, 30], seed=5)
    with pytest.warns(RuntimeWarning, match="failed"):
        mask, label = sbm_validity([g], fit="auto")
    assert mask.tolist() == [True] and label == "ddgjax"
    with pytest.raises(bridge.GraphToolError, match="failed"):
        sbm_validity([g], fit="graph-tool")


@needs_graph_tool
def test_graph_tool_fit_on_a_few_graphs():
    planted, truth = planted_sbm([25, 35, 30], seed=11)
    trailing = planted.copy()
    trailing.add_node(90)                                # isolated, last: not in the fit
    graphs = [planted, trailing, nx.gnp_random_graph(60, 0.1, seed=2), nx.empty_graph(4),
              planted]
    blocks, label = sbm_fit.sbm_partitions(graphs, fit="graph-tool", refinement_steps=10)
    assert label == bridge.find_graph_tool().label and label.startswith("graph-tool ")
    assert len(set(zip(blocks[0].tolist(), truth.tolist()))) == 3   # the planted blocks
    assert blocks[1][-1] == -1 and (blocks[1][:-1] >= 0).all()
    assert (blocks[3] == -1).all()                       # no edges: the fit fails
    np.testing.assert_array_equal(blocks[4], blocks[0])  # seeded per graph: reproducible
    valid = [sbm_blocks_pass(*sbm_block_counts(g, b)) for g, b in zip(graphs, blocks)]
    assert valid == [True, True, False, False, True]


def test_worker_pool_fits_each_graph_in_a_fresh_process(monkeypatch):
    """graph-tool keeps state between fits in one process, so verdicts depended on which
    graphs a pool worker had fitted before (on timing): each graph gets its own process."""
    from ddgjax.metrics import _graph_tool_worker as worker
    seen = {}

    class FakePool:
        def __init__(self, processes, **kwargs):
            seen.update(kwargs, processes=processes)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def map(self, fn, jobs, chunksize=1):
            return [{"job": job[0]} for job in jobs]

    class FakeContext:
        Pool = FakePool

    monkeypatch.setattr(worker.multiprocessing, "get_context", lambda kind: FakeContext())
    out = worker.fit_batch([{"n": 1}, {"n": 2}, {"n": 3}], workers=2)
    assert out == [{"job": {"n": 1}}, {"job": {"n": 2}}, {"job": {"n": 3}}]
    assert seen == {"processes": 2, "maxtasksperchild": 1}
