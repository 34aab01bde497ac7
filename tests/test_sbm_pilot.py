"""benchmarks/sbm_grid_pilot.py: the sampler arms it parses and the refit of saved graphs."""
import gzip
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import sbm_grid_pilot  # noqa: E402
from sbm_failures import describe  # noqa: E402

from ddgjax.metrics.sbm_fit import sbm_partitions  # noqa: E402


def test_arms_parse_steps_options_and_types():
    arms = sbm_grid_pilot.parse_arms("a:steps=64,grid=power:3; b: algorithm=1, logit_scale=0.9;")
    assert arms == {"a": {"steps": 64, "grid": "power:3"},
                    "b": {"algorithm": 1, "logit_scale": 0.9}}
    assert isinstance(arms["a"]["steps"], int) and isinstance(arms["b"]["logit_scale"], float)
    assert sbm_grid_pilot.parse_arms("c:final_pass=false,argmax_last=true") == {
        "c": {"final_pass": False, "argmax_last": True}}


@pytest.mark.parametrize("text", ["a:steps", "a:steps=1;a:steps=2", ":steps=1", "a:=3"])
def test_bad_arms_exit_with_the_option_named(text):
    with pytest.raises(SystemExit, match="--arms"):
        sbm_grid_pilot.parse_arms(text)


def test_refit_reads_saved_graphs_and_matches_a_direct_fit(tmp_path):
    graphs = [nx.stochastic_block_model([22, 24], [[0.3, 0.005], [0.005, 0.3]], seed=s)
              for s in range(2)]
    graphs.append(nx.empty_graph(30))
    arm = {"options": {"logit_scale": 0.9}, "num_steps": 64, "sample_seconds": 1.0,
           "num_nodes": [g.number_of_nodes() for g in graphs],
           "edges": [sorted(map(list, g.edges())) for g in graphs]}
    saved = {"workdir": "W", "checkpoint": "best_val", "checkpoint_epoch": 1500, "seeds": [0],
             "num": 3, "nodes": "22-30", "num_steps": 64, "device": "cpu",
             "compute_dtype": "float32", "fit": "x", "arms": {"ls09": arm}}
    src = tmp_path / "pilot.json.gz"
    with gzip.open(src, "wt") as f:
        json.dump(saved, f)
    out = tmp_path / "refit"
    subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "sbm_grid_pilot.py"),
                    "--refit", str(src), "--fit", "ddgjax", "--out", str(out)],
                   check=True, capture_output=True, text=True)
    result = json.loads((tmp_path / "refit.json").read_text())
    blocks, label = sbm_partitions(graphs, fit="ddgjax")
    expected = [describe(g, b) for g, b in zip(graphs, blocks)]
    assert result["fit"] == label
    assert [r["fails"] for r in result["arms"]["ls09"]["graphs"]] == [r["fails"] for r in expected]
    assert result["arms"]["ls09"]["summary"]["graphs"] == 3
    assert expected[2]["fails"] == "blocks"  # the empty graph
    assert "| ls09 | 64 | logit_scale=0.9 |" in (tmp_path / "refit.md").read_text()


def test_refit_reads_outputs_saved_before_num_nodes_was(tmp_path):
    """Early outputs (the grid pilot) have no per-graph num_nodes: every seed drew the
    run's node_counts, in order."""
    counts = [30, 25]
    graphs = [nx.gnp_random_graph(n, 0.2, seed=k) for k, n in enumerate(counts * 2)]
    saved = {"workdir": "W", "checkpoint": "best_val", "checkpoint_epoch": 1, "seeds": [0, 1],
             "num_steps": 64, "device": "cpu", "compute_dtype": "float32", "fit": "x",
             "node_counts": counts,
             "arms": {"power:3": {"summary": {}, "sample_seconds": 1.0, "graphs": [],
                                  "edges": [sorted(map(list, g.edges())) for g in graphs]}}}
    src = tmp_path / "old.json"
    src.write_text(json.dumps(saved))
    graphs_back = sbm_grid_pilot.graphs_of(saved["arms"]["power:3"], saved["node_counts"])
    assert [g.number_of_nodes() for g in graphs_back] == counts * 2
    subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "sbm_grid_pilot.py"),
                    "--refit", str(src), "--fit", "ddgjax", "--out", str(tmp_path / "new")],
                   check=True, capture_output=True, text=True)
    assert "| power:3 | 64 | grid=power:3 |" in (tmp_path / "new.md").read_text()


def test_partial_reverse_levels_and_an_oracle_chain_returns_the_graph():
    """benchmarks/sbm_partial_reverse.py: a chain starts at the given level, visits the
    grid's levels below it down to 0, and with a denoiser that knows A_0 (large logits
    towards it) ends at A_0 from any start level, the prior's included."""
    import types

    import jax.numpy as jnp
    import numpy as np

    import sbm_partial_reverse as pr
    from ddgjax.graphs import graphs_to_batch
    from ddgjax.processes.bitflip import SamplerLevers, make_schedule, sampling_grid

    _, grid = sampling_grid(make_schedule("linear", 32), 64, "power:3")
    for start in (0.05, 0.25, 0.5):
        lv = pr.levels_from(start, grid)
        assert lv[0] == start and lv[-1] == 0.0 and np.all(np.diff(lv) < 0)
        assert set(lv[1:]) == {b for b in grid if b < start}
    assert len(pr.levels_from(0.5, grid)) == 65  # the whole grid: plain sampling

    graphs = [nx.stochastic_block_model([12, 14], [[0.3, 0.005], [0.005, 0.3]], seed=s)
              for s in range(3)]
    batch = graphs_to_batch(graphs, 30)
    adj0 = jnp.asarray(batch.adj, jnp.float32)
    oracle = types.SimpleNamespace(apply=lambda params, a, m, t, s: 30.0 * (2.0 * adj0 - 1.0))
    run = types.SimpleNamespace(model=oracle, params=None, process=types.SimpleNamespace(
        prior_density=0.1, num_timesteps=32))
    import jax
    for start in (0.05, 0.5):
        out, steps = pr.partial_reverse(run, jax.random.key(0), batch.adj, batch.node_mask,
                                        start, grid, SamplerLevers(logit_scale=0.9))
        assert steps == len(pr.levels_from(start, grid)) - 1
        np.testing.assert_array_equal(out, np.asarray(batch.adj))


def fake_run(source="spectre_sbm", self_condition=False):
    """A ``sampling.Run`` with just what ``prepare_arm`` and ``guided_run`` read."""
    import dataclasses as dc

    from ml_collections import ConfigDict

    from ddgjax.processes import BitFlipProcess
    from ddgjax.sampling import Run

    process = dc.replace(BitFlipProcess(), self_condition=self_condition)
    return Run(ConfigDict({"data": {"source": source}}), "model", process, {}, 187, None,
               {"epoch": 1})


def test_prepare_arm_records_guides_and_the_zero_estimate_apart():
    run, guides = fake_run(), {"weak": ("W", fake_run())}
    arm_run, steps, options, sampler_options, zero = sbm_grid_pilot.prepare_arm(
        "g", {"guide": "weak", "guidance": 1.0, "guidance_above": 0.1, "logit_scale": 0.9},
        run, guides, 64)
    assert not zero and steps == 64 and arm_run.params["weight"] == 1.0
    assert options == {"logit_scale": 0.9, "guide": "weak", "guidance": 1.0,
                       "guidance_above": 0.1}
    assert sampler_options == {"logit_scale": 0.9}
    sc = fake_run(self_condition=True)
    arm_run, steps, options, sampler_options, zero = sbm_grid_pilot.prepare_arm(
        "z", {"zero_estimate": True, "steps": 32}, sc, guides, 64)
    assert zero and steps == 32 and not arm_run.process.self_condition and options == {}


@pytest.mark.parametrize("options, expected", [
    ({"guide": "weak"}, "together"),
    ({"guidance": 1.0}, "together"),
    ({"guidance_above": 0.1}, "together"),
    ({"guide": "nope", "guidance": 1.0}, "is not a --guide"),
    ({"guide": "weak", "guidance": 1.0, "zero_estimate": True}, "do not go together"),
    ({"guide": "other", "guidance": 1.0}, "data.source"),
])
def test_prepare_arm_refuses_bad_arms_by_name(options, expected):
    guides = {"weak": ("W", fake_run()), "other": ("O", fake_run(source="planar_60"))}
    with pytest.raises(SystemExit, match=expected):
        sbm_grid_pilot.prepare_arm("bad", options, fake_run(), guides, 64)
