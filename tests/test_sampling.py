"""Sampling driver: loading runs, batch invariance, one compile, sample directories."""
import json
import shutil

import chex
import jax
import jax.numpy as jnp
import ml_collections
import networkx as nx
import numpy as np
import pytest

from configs import test as test_config
from ddgjax import sampling, training
from ddgjax.data import read_graph_list
from ddgjax.processes import bitflip, gaussian
from ddgjax.sample_writer import write_sample_dir

from helpers import REPO

OLD_RUN = REPO / "tests" / "data" / "run_v0_1"


def tiny_config(kind):
    cfg = test_config.get_config()
    cfg.diffusion.kind = kind
    cfg.train.num_epochs = 2
    cfg.train.ema_decay = 0.5
    if kind == "gaussian":
        cfg.diffusion.num_timesteps = 12
    return cfg


@pytest.fixture(scope="module", params=["discrete", "gaussian"])
def workdir(request, tmp_path_factory):
    wd = tmp_path_factory.mktemp(request.param) / "run"
    training.train(tiny_config(request.param), str(wd), verbose=False)
    return wd


def test_load_run_restores_params_or_ema(workdir):
    raw = sampling.load_run(str(workdir), "latest", use_ema=False)
    ema = sampling.load_run(str(workdir), "latest", use_ema=True)
    assert raw.meta["epoch"] == 2 and raw.max_nodes == 20
    assert json.loads((workdir / "config.json").read_text())["diffusion"]["kind"] == \
        raw.process.name
    assert raw.process.num_timesteps == raw.config.diffusion.num_timesteps
    leaves = zip(jax.tree_util.tree_leaves(raw.params), jax.tree_util.tree_leaves(ema.params))
    assert any(not np.array_equal(a, b) for a, b in leaves)  # EMA 0.5 != raw parameters


def test_samples_do_not_depend_on_batch_size(workdir):
    run = sampling.load_run(str(workdir))
    a = sampling.generate(run, 10, seed=3, batch_size=4)
    b = sampling.generate(run, 10, seed=3, batch_size=12)
    np.testing.assert_array_equal(a["adj"], b["adj"])
    np.testing.assert_array_equal(a["num_nodes"], b["num_nodes"])
    assert a["adj"].shape == (10, 20, 20) and a["adj"].dtype == np.uint8
    for adj, n in zip(a["adj"], a["num_nodes"]):
        np.testing.assert_array_equal(adj, adj.T)
        assert not adj.diagonal().any() and not adj[n:].any()
    c = sampling.generate(run, 10, seed=4, batch_size=4)
    assert not np.array_equal(a["adj"], c["adj"])


def test_several_seeds_in_one_request_are_each_seeds_graphs(workdir):
    """``generate_seeds`` samples the seeds' graphs together (one request, shared
    batches), and each seed gets exactly ``generate``'s graphs for it: node counts and
    adjacency; bad seeds are refused by name."""
    run = sampling.load_run(str(workdir))
    both = sampling.generate_seeds(run, 5, [3, 8], batch_size=4, num_steps=4)
    assert [r["request"]["seeds"] for r in both] == [[3, 8], [3, 8]]
    assert both[0]["request"]["num_samples"] == 10
    for seed, got in zip((3, 8), both):
        want = sampling.generate(run, 5, seed=seed, batch_size=4, num_steps=4)
        np.testing.assert_array_equal(got["num_nodes"], want["num_nodes"])
        np.testing.assert_array_equal(got["adj"], want["adj"])
        assert len(got["graphs"]) == 5 and got["num_steps"] == want["num_steps"]
    assert not np.array_equal(both[0]["adj"], both[1]["adj"])
    for bad in ([], [1, 1], [-1]):
        with pytest.raises(sampling.SamplingError, match="seeds"):
            sampling.generate_seeds(run, 5, bad)


def test_samples_do_not_depend_on_the_device_count(workdir):
    """Over several devices each samples its slice of the batch (a shard_map, so kernels
    XLA cannot partition see only their device's graphs); the graphs equal one device's."""
    run = sampling.load_run(str(workdir))
    assert len(jax.devices()) >= 2
    one = sampling.generate(run, 10, seed=5, batch_size=4, devices=jax.devices()[:1])
    many = sampling.generate(run, 10, seed=5, batch_size=4)
    np.testing.assert_array_equal(one["adj"], many["adj"])
    mesh = sampling.make_mesh(jax.devices())
    sampler = run.process.sampler(None, False)
    fn = sampling.compiled_sampler(run.model, sampler, mesh)
    keys = jax.device_put(sampling.graph_keys(5, 0, 4), sampling.batch_sharded(mesh))
    mask = sampling.put_global(np.ones((4, run.max_nodes), bool), sampling.batch_sharded(mesh))
    params = sampling.replicate(run.params, mesh)
    assert "shard_map" in str(jax.make_jaxpr(fn)(params, keys, mask))
    assert sampling._batch_mesh(keys) == mesh
    assert sampling._batch_mesh(jnp.zeros(4)) is None


def test_the_compiled_sampler_is_kept_per_model_and_sampler(workdir, monkeypatch):
    """compiled_sampler returns the jitted function it made for the same model and sampler,
    and makes another for another sampler or a model that computes otherwise (the model
    holds its kernel choice: no environment variable keys the cache)."""
    run = sampling.load_run(str(workdir))
    monkeypatch.setattr(sampling, "_COMPILED", {})
    sampler = run.process.sampler(None, False)
    fn = sampling.compiled_sampler(run.model, sampler)
    assert sampling.compiled_sampler(run.model, run.process.sampler(None, False)) is fn
    assert sampling.compiled_sampler(run.model, run.process.sampler(2, False)) is not fn
    assert sampling.compiled_sampler(run.model.clone(kernels="pallas"), sampler) is not fn


def test_bad_requests_are_sampling_errors(workdir):
    run = sampling.load_run(str(workdir))
    with pytest.raises(sampling.SamplingError, match="trained with max_nodes=20"):
        sampling.generate(run, 2, node_counts=np.array([5, 21]))
    with pytest.raises(sampling.SamplingError, match="positive"):
        sampling.generate(run, 0)
    with pytest.raises(sampling.SamplingError, match="no option.*'temperature'.*valid options"):
        sampling.generate(run, 2, temperature=0.5)
    with pytest.raises(sampling.SamplingError, match="num_steps must be in"):
        sampling.generate(run, 2, num_steps=run.process.num_timesteps + 1)


def test_sample_directory(workdir, tmp_path):
    run = sampling.load_run(str(workdir))
    out = write_sample_dir(run, str(tmp_path / "s"), num_samples=6, seed=0, batch_size=4,
                           num_steps=4, graphml=True, chain_png=2, protocol="paper",
                           record={"workdir": str(workdir)})
    graphs = read_graph_list(tmp_path / "s" / "samples.json").graphs
    assert len(graphs) == 6 and out["info"]["num_steps"] == 4
    assert [g.number_of_edges() for g in graphs] == [g.number_of_edges() for g in out["graphs"]]
    assert len(list((tmp_path / "s" / "graphml").glob("*.graphml"))) == 6
    assert nx.is_isomorphic(nx.read_graphml(tmp_path / "s" / "graphml" / "sample_00000.graphml"),
                            graphs[0])
    for png in ("grid.png", "chain.png"):
        assert (tmp_path / "s" / png).stat().st_size > 1000
    ev = json.loads((tmp_path / "s" / "eval.json").read_text())
    assert {"degree", "clustering", "orbit", "workdir", "num_steps"} <= set(ev)


@pytest.mark.parametrize("module,fn", [(bitflip.sampler, "sample_graphs"),
                                       (gaussian, "sample_graphs")])
def test_sampler_compiles_once_per_shape(module, fn, monkeypatch, tmp_path):
    """Several seeds and batches of one shape trace the reverse chain once."""
    kind = "discrete" if module is bitflip.sampler else "gaussian"
    wd = OLD_RUN if kind == "discrete" else None
    if wd is None:
        wd = tmp_path / "g"
        cfg = tiny_config("gaussian")
        cfg.train.num_epochs = 1
        training.train(cfg, str(wd), verbose=False)
    run = sampling.load_run(str(wd))
    monkeypatch.setattr(module, fn, chex.assert_max_traces(getattr(module, fn), n=1))
    monkeypatch.setattr(sampling, "_COMPILED", {})
    monkeypatch.setattr(sampling, "_EXECUTABLES", {})
    for seed in range(3):
        sampling.generate(run, 8, seed=seed, batch_size=4, num_steps=3)


def test_each_batch_is_sampled_once_and_compiling_is_timed_apart(monkeypatch):
    """generate compiles a batch shape ahead of its first batch (compile_seconds), runs
    every batch exactly once (seconds), a later call of the same shape compiles nothing,
    and after ``clear_compiled`` the next call compiles again (the same graphs)."""
    run = sampling.load_run(str(OLD_RUN))
    monkeypatch.setattr(sampling, "_EXECUTABLES", {})
    monkeypatch.setattr(sampling, "_COMPILED", {})
    calls = []
    real = sampling.sampler_executable

    def counting(*args):
        exe, dt = real(*args)
        return (lambda *a: calls.append(1) or exe(*a)), dt

    monkeypatch.setattr(sampling, "sampler_executable", counting)
    first = sampling.generate(run, 10, seed=0, batch_size=4, num_steps=3)
    assert len(calls) == 3 and first["compile_seconds"] > 0 and first["seconds"] > 0
    again = sampling.generate(run, 10, seed=0, batch_size=4, num_steps=3)
    assert len(calls) == 6 and again["compile_seconds"] == 0.0
    np.testing.assert_array_equal(first["adj"], again["adj"])
    sampling.clear_compiled()                             # then it compiles afresh
    assert not sampling._EXECUTABLES and not sampling._COMPILED
    fresh = sampling.generate(run, 10, seed=0, batch_size=4, num_steps=3)
    assert fresh["compile_seconds"] > 0
    np.testing.assert_array_equal(first["adj"], fresh["adj"])


def test_running_out_of_device_memory_names_the_batch_size(monkeypatch):
    """The device's RESOURCE_EXHAUSTED (at compile or at run time) becomes a SamplingError
    naming the batch, the setting to lower and its value; other runtime errors pass."""
    run = sampling.load_run(str(OLD_RUN))
    oom = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to "
                                     "allocate 88.12GiB\nmore detail")

    def failing_at(stage, error):
        def executable(*args):
            if stage == "compile":
                raise error
            return (lambda *a: (_ for _ in ()).throw(error)), 0.0
        return executable

    for stage in ("compile", "run"):
        monkeypatch.setattr(sampling, "sampler_executable", failing_at(stage, oom))
        with pytest.raises(sampling.SamplingError,
                           match=r"a batch of 4 graphs of 20 nodes ran out of device memory "
                                 r"\(RESOURCE_EXHAUSTED.*88.12GiB\); lower the batch size "
                                 r"\(--batch_size, config.sample.batch_size.*now 4\)"):
            sampling.generate(run, 10, seed=0, batch_size=4, num_steps=3)
    other = jax.errors.JaxRuntimeError("INTERNAL: something else")
    monkeypatch.setattr(sampling, "sampler_executable", failing_at("run", other))
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):
        sampling.generate(run, 10, seed=0, batch_size=4, num_steps=3)


def test_a_run_trained_before_the_restructure_samples_as_it_did(tmp_path):
    """tests/data/run_v0_1: a test-config run trained by ddgjax 0.1.0, with the samples
    that version drew from it. The current code restores it and draws the same graphs."""
    wd = tmp_path / "run"
    shutil.copytree(OLD_RUN, wd)
    run = sampling.load_run(str(wd))
    res = sampling.generate(run, 8, seed=0, batch_size=1024)
    expected = json.loads((OLD_RUN / "expected_samples.json").read_text())["graphs"]
    got = [{"n": g.number_of_nodes(), "edges": sorted([min(e), max(e)] for e in g.edges())}
           for g in res["graphs"]]
    assert got == [{"n": g["n"], "edges": sorted(g["edges"])} for g in expected]
    assert run.checkpoint == "best"            # recorded without config.sample.checkpoint
    with pytest.raises(sampling.SamplingError, match="no 'latest' checkpoint"):
        sampling.load_run(str(wd), "latest")


def test_the_checkpoint_defaults_to_the_runs_config(tmp_path):
    """load_run(checkpoint=None) loads config.sample.checkpoint (the recipe's), a given one
    overrides it, and a name that is no checkpoint is refused by field."""
    wd = tmp_path / "run"
    shutil.copytree(OLD_RUN, wd)
    config = json.loads((wd / "config.json").read_text())
    config["sample"]["checkpoint"] = "latest"        # the fixture has only 'best'
    (wd / "config.json").write_text(json.dumps(config))
    with pytest.raises(sampling.SamplingError, match="no 'latest' checkpoint"):
        sampling.load_run(str(wd))
    assert sampling.load_run(str(wd), "best").checkpoint == "best"
    with pytest.raises(sampling.SamplingError, match="checkpoint: expected one of"):
        sampling.load_run(str(wd), "worst")
    cfg = ml_collections.ConfigDict({"sample": {"checkpoint": "best_val"}})
    assert sampling.configured_checkpoint(cfg) == "best_val"
    assert sampling.configured_checkpoint(cfg, "latest") == "latest"
    cfg.sample.checkpoint = "worst"
    with pytest.raises(sampling.SamplingError, match="config.sample.checkpoint: expected"):
        sampling.configured_checkpoint(cfg)


def test_fast_sampling_path_keeps_the_parameters_and_nearly_all_pairs(workdir):
    """load_run(compute_dtype="bfloat16", kernels="pallas"): the same parameters, the
    Pallas kernels chosen, and samples that differ from the float32 ones only where
    bfloat16 rounding moves a draw (a small fraction of pairs); Pallas kernels for a
    non-PPGN model, an unknown kernel choice or a bad dtype is a SamplingError."""
    import ml_collections

    plain = sampling.load_run(str(workdir))
    if plain.config.model.name != "ppgn" or plain.config.diffusion.kind != "discrete":
        pytest.skip("the fast path is the bit-flip PPGN's")
    fast = sampling.load_run(str(workdir), compute_dtype="bfloat16", kernels="pallas")
    chex.assert_trees_all_equal(plain.params, fast.params)
    assert fast.config.model.ppgn.kernels == "pallas"
    assert fast.config.model.compute_dtype == "bfloat16"
    assert plain.config.model.ppgn.get("kernels", "xla") == "xla"
    a = sampling.generate(plain, 16, seed=5, batch_size=16)["adj"]
    b = sampling.generate(fast, 16, seed=5, batch_size=16)["adj"]
    assert np.mean(a != b) < 0.1
    with pytest.raises(sampling.SamplingError, match="compute_dtype"):
        sampling.load_run(str(workdir), compute_dtype="float16")
    with pytest.raises(sampling.SamplingError, match="kernels: expected one of"):
        sampling.load_run(str(workdir), kernels="triton")
    edp = ml_collections.ConfigDict({"model": {"name": "edp"}})
    with pytest.raises(sampling.SamplingError, match="kernels: .* PPGN only.*'edp'"):
        sampling.sampling_config(edp, kernels="pallas")


def test_pad_multiple_at_sampling_keeps_the_function_and_the_draws(workdir):
    """load_run(pad_multiple=m): the same parameters, the PPGN padding its node axis to a
    multiple of m inside the call (20 -> 24 here), and the same samples up to float
    rounding; a bad value, or padding for another model, is a SamplingError naming it."""
    plain = sampling.load_run(str(workdir))
    if plain.config.model.name != "ppgn":
        pytest.skip("the padding is the PPGN's")
    padded = sampling.load_run(str(workdir), pad_multiple=8)
    chex.assert_trees_all_equal(plain.params, padded.params)
    assert padded.config.model.ppgn.pad_multiple == 8
    assert plain.config.model.ppgn.get("pad_multiple", 1) == 1
    assert padded.model.pad_multiple == 8 and plain.model.pad_multiple == 1
    import ddgjax
    assert ddgjax.load(str(workdir), pad_multiple=8).run.model.pad_multiple == 8
    a = sampling.generate(plain, 16, seed=5, batch_size=16)["adj"]
    b = sampling.generate(padded, 16, seed=5, batch_size=16)["adj"]
    assert np.mean(a != b) < 0.005
    for bad in (0, -2, 2.5, True, "8"):
        with pytest.raises(sampling.SamplingError, match="pad_multiple: expected an integer"):
            sampling.load_run(str(workdir), pad_multiple=bad)
    edp = ml_collections.ConfigDict({"model": {"name": "edp"}})
    with pytest.raises(sampling.SamplingError, match="pad_multiple: .* PPGN only.*'edp'"):
        sampling.sampling_config(edp, pad_multiple=4)
    assert sampling.sampling_config(edp, pad_multiple=1) is not edp


def test_sample_graphs_key_forms():
    """One shared key (typed or legacy raw), or per-graph keys ([B] typed, [B, 2] raw);
    a per-graph key count that does not match the batch is a clear error."""
    sched = bitflip.make_schedule("linear", 4)
    mask = jnp.ones((2, 5), bool)
    denoise = lambda a, m, t, s: jnp.zeros(a.shape)
    for key in (jax.random.key(0), jax.random.PRNGKey(0), jax.random.split(jax.random.key(0), 2),
                jax.random.split(jax.random.PRNGKey(0), 2)):
        out = bitflip.sample_graphs(denoise, key, mask, sched, 2)
        assert out.shape == (2, 5, 5)
    with pytest.raises(ValueError, match="3 per-graph keys for 2 graphs"):
        bitflip.sample_graphs(denoise, jax.random.split(jax.random.key(0), 3), mask, sched, 2)


def test_configured_num_steps_prefers_the_request_then_the_config():
    from ddgjax.sampling import configured_num_steps
    cfg = ml_collections.ConfigDict({"sample": {"num_steps": 64}})
    assert configured_num_steps(cfg, 32) == 32
    assert configured_num_steps(cfg, 0) == 64 and configured_num_steps(cfg, None) == 64
    cfg.sample.num_steps = 0
    assert configured_num_steps(cfg) is None
    assert configured_num_steps(ml_collections.ConfigDict({"sample": {}}), 0) is None
    with pytest.raises(ValueError, match="num_steps: expected 0 .* got -3"):
        configured_num_steps(cfg, -3)


def test_node_counts_are_checked_by_name(workdir):
    run = sampling.load_run(str(workdir))
    cases = [([5, 6], r"shape \(4,\)"), ([5, 6, 7, 8, 9], r"shape \(4,\)"),
             ([5, 0, 6, 7], "1..20"), ([5, -3, 6, 7], "1..20"), ([5, 6, 7, 21], "trained with max_nodes=20"),
             ([5.0, 7.9, 6.0, 7.0], "whole numbers")]
    for counts, expected in cases:
        with pytest.raises(sampling.SamplingError, match=expected):
            sampling.generate(run, 4, seed=0, batch_size=4, node_counts=counts)
    res = sampling.generate(run, 4, seed=0, batch_size=4, node_counts=[5.0, 6, 7, 8])
    assert list(res["num_nodes"]) == [5, 6, 7, 8]
