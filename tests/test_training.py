"""Training: losses go down, resume equals a straight run, devices and hosts agree."""
import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import test as test_config
from ddgjax import buckets, checkpoints, input_pipeline, training
from ddgjax.data import generate_graphs
from ddgjax.graphs import graphs_to_batch
from ddgjax.models import model_from_config
from ddgjax.parallel import batch_sharded, make_mesh, put_global, replicate
from ddgjax.processes import process_from_config
from ddgjax.reporting import Progress
from ddgjax.training import chunks, loop, runs
from ddgjax.training import seeds as seeds_module


def tiny_setup(model_name, loss, batch=8, **ppgn_options):
    cfg = test_config.get_config()
    cfg.model.ppgn.update(ppgn_options)
    cfg.model.name = model_name
    cfg.diffusion.loss = loss
    cfg.train.lr = 5e-3
    data = graphs_to_batch(generate_graphs("community_small", batch, seed=3), 20)
    model = model_from_config(cfg)
    process = process_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), 20)
    return cfg, model, process, tx, state, data


def fixed_loss(model, params, process, data):
    """Average over 8 fixed keys: the same t and noise before and after training."""

    @jax.jit
    def losses(params):
        def one(k):
            keys = jax.random.split(jax.random.key(k), data.adj.shape[0])
            return process.loss(lambda a, m, t, s: model.apply(params, a, m, t, s), keys,
                                jnp.asarray(data.adj), jnp.asarray(data.node_mask)).loss
        return jax.lax.map(one, jnp.arange(1000, 1008))

    return float(np.mean(losses(params)))


def run_chunk(chunk, state, data, idx, mesh):
    """Run a train chunk on numpy data (padded with the empty graph) and indices."""
    dev = replicate(input_pipeline.device_copy(data), mesh)
    return chunk(replicate(state, mesh), dev, put_global(idx, batch_sharded(mesh, 1)))


@pytest.mark.parametrize("model_name,loss", [("ppgn", "simple"), ("ppgn", "vb"),
                                             ("edp", "simple")])
def test_jitted_steps_lower_the_loss(model_name, loss):
    cfg, model, process, tx, state, data = tiny_setup(model_name, loss)
    mesh = make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1))
    before = fixed_loss(model, state.params, process, data)
    idx = np.tile(np.arange(data.adj.shape[0], dtype=np.int32), (40, 1))
    state, losses = run_chunk(chunk, state, data, idx, mesh)
    after = fixed_loss(model, state.params, process, data)
    assert np.all(np.isfinite(losses))
    assert int(state.step) == 40
    assert after < 0.9 * before, (before, after)


BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@pytest.fixture
def compiles():
    """The durations of the XLA compiles while the test runs (JAX's public monitoring
    events: one ``BACKEND_COMPILE_EVENT`` per compile)."""
    seen = []

    def on_duration(event, duration, **_):
        if event == BACKEND_COMPILE_EVENT:
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    yield seen
    jax.monitoring.unregister_event_duration_listener(on_duration)


def test_train_step_compiles_once(compiles):
    """Three chunks of the same shape compile the chunk once."""
    cfg, model, process, tx, state, data = tiny_setup("ppgn", "simple")
    mesh = make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1))
    idx = np.tile(np.arange(8, dtype=np.int32), (2, 1))
    counts = []
    for _ in range(3):
        state, _ = run_chunk(chunk, state, data, idx, mesh)
        counts.append(len(compiles))
    assert int(state.step) == 6
    assert counts[0] >= 1 and counts[1] == counts[2] == counts[0], counts


def test_ema_update():
    p = {"w": jnp.ones(3)}
    e = {"w": jnp.zeros(3)}
    np.testing.assert_allclose(training.ema_update(e, p, 0.9)["w"], 0.1)
    assert training.ema_update(e, p, 0.0) is p


def test_epoch_batches_cover_every_graph_once():
    idx = input_pipeline.epoch_batches(10, 4, seed=0, epoch=3)
    assert idx.shape == (3, 4)
    flat = idx.ravel()
    assert sorted(flat[flat < 10].tolist()) == list(range(10))
    assert np.sum(flat == 10) == 2
    np.testing.assert_array_equal(idx, input_pipeline.epoch_batches(10, 4, seed=0, epoch=3))
    assert not np.array_equal(idx, input_pipeline.epoch_batches(10, 4, seed=0, epoch=4))
    both = input_pipeline.batches_for_epochs(10, 4, 0, 3, 5)
    np.testing.assert_array_equal(both[:3], idx)


def test_chunk_calls_draw_each_runs_batches_as_alone():
    """A chunk's calls (``chunks.chunk_calls``): without buckets one call holding the
    epochs' batches of each run's seed (stacked runs side by side); with buckets one call
    per step, in the epoch's interleaved bucket order, with its weight."""
    setup = SimpleNamespace(buckets=None, num_graphs=10, batch_size=4, steps_per_epoch=3)
    (call,), weights = chunks.chunk_calls(setup, [5], 2, 4, stacked=False, pieces=False)
    assert weights is None and call.weight is None and call.data == 0
    np.testing.assert_array_equal(call.idx, input_pipeline.batches_for_epochs(10, 4, 5, 2, 4))
    (both,), _ = chunks.chunk_calls(setup, [5, 7], 2, 4, stacked=True, pieces=False)
    assert both.idx.shape == (6, 2, 4)
    np.testing.assert_array_equal(both.idx[:, 0], call.idx)
    np.testing.assert_array_equal(both.idx[:, 1], input_pipeline.batches_for_epochs(10, 4, 7, 2, 4))
    plan = buckets.plan_buckets(np.array([5, 9, 12, 20, 7, 14, 20, 3]), (8, 20), 2, 20)
    setup = SimpleNamespace(buckets=plan, steps_per_epoch=plan.steps_per_epoch)
    calls, weights = chunks.chunk_calls(setup, [1], 0, 2, stacked=False, pieces=True)
    order, batches, step_weights = buckets.bucket_batches_for_epochs(plan, 1, 0, 2)
    assert [c.data for c in calls] == order.tolist()
    for c, idx, w in zip(calls, batches, step_weights, strict=True):
        np.testing.assert_array_equal(c.idx, idx[None])
        np.testing.assert_array_equal(c.weight, [w])
    np.testing.assert_array_equal(weights, step_weights.reshape(2, plan.steps_per_epoch))


def test_check_finite_and_the_interrupt_message():
    losses = np.ones((3, 2))
    training.check_finite(losses, 10, "wd")
    losses[1, 0] = np.nan
    with pytest.raises(training.TrainingError, match="non-finite training loss at epoch 12"):
        training.check_finite(losses, 10, "wd")
    say = lambda epoch, saved: training.interrupted_message({"epoch": epoch,
                                                             "saved_epoch": saved})
    assert say(None, None).startswith("interrupted before training began")
    assert say(6, 6) == "interrupted at epoch 6; resume with the same command"
    assert say(7, 6).endswith("(it continues from the checkpoint of epoch 6)")
    assert say(3, None).endswith("(no checkpoint was saved yet: it starts at epoch 0)")


def _params_of(workdir):
    from ddgjax.sampling import load_run

    return load_run(str(workdir), "latest").params


def test_resume_equals_straight_run(tmp_path):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 4
    cfg.train.checkpoint_every_epochs = 1
    straight = training.train(cfg, str(tmp_path / "a"), verbose=False)
    first = training.train(cfg, str(tmp_path / "b"), stop_after_epochs=2, verbose=False)
    assert first["epochs"] == 2
    second = training.train(cfg, str(tmp_path / "b"), verbose=False)
    assert second["epochs"] == 4 and second["steps"] == straight["steps"]
    # A workdir with checkpoints resumes at an epoch only its restore knows: no
    # background compile (the first call compiles as before); a fresh run has one.
    assert straight["precompiled"] and not second["precompiled"]
    a, b = _params_of(tmp_path / "a"), _params_of(tmp_path / "b")
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), a, b)
    losses_a = [r for r in map(json.loads, open(tmp_path / "a" / "metrics.jsonl")) if "loss" in r]
    losses_b = [r for r in map(json.loads, open(tmp_path / "b" / "metrics.jsonl")) if "loss" in r]
    assert [r["loss"] for r in losses_a] == [r["loss"] for r in losses_b]


def test_stop_between_boundaries_keeps_the_best_of_a_straight_run(tmp_path):
    """A stop between two checkpoint boundaries saves ``latest`` with its open selection
    window and no ``best``; the resumed run's next boundary selects over the same epochs,
    so ``best`` is the straight run's (it used to select over the epochs after the stop
    only, and differed for this seed)."""
    cfg = test_config.get_config()
    cfg.train.num_epochs = 6
    cfg.train.checkpoint_every_epochs = 3
    training.train(cfg, str(tmp_path / "a"), verbose=False)
    training.train(cfg, str(tmp_path / "b"), stop_after_epochs=2, verbose=False)
    stop = checkpoints.restore_meta(str(tmp_path / "b"), "latest")
    assert stop["epoch"] == 2 and len(stop["open_window"]) == 2
    assert checkpoints.latest_step(str(tmp_path / "b"), "best") is None
    training.train(cfg, str(tmp_path / "b"), verbose=False)
    best_a, best_b = (checkpoints.restore_meta(str(tmp_path / d), "best") for d in "ab")
    assert (best_b["epoch"], best_b["loss"]) == (best_a["epoch"], best_a["loss"])
    assert "open_window" not in checkpoints.restore_meta(str(tmp_path / "b"), "latest")


def test_nan_loss_stops_and_keeps_checkpoint(tmp_path):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 2
    cfg.train.checkpoint_every_epochs = 1
    wd = str(tmp_path / "run")
    training.train(cfg, wd, verbose=False)
    good = _params_of(wd)
    cfg.train.num_epochs = 4
    cfg.train.lr = 1e35  # parameters overflow: the loss of the next epochs is inf/NaN
    with pytest.raises(training.TrainingError, match="non-finite training loss"):
        training.train(cfg, wd, verbose=False)
    after = _params_of(wd)
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), good, after)


def test_batch_size_must_divide_over_devices(tmp_path):
    cfg = test_config.get_config()
    cfg.train.batch_size = 6
    with pytest.raises(training.TrainingError, match="divisible by the number of devices"):
        training.train(cfg, str(tmp_path / "x"), verbose=False, devices=jax.devices()[:4])


def test_four_devices_match_one_device():
    """The pmap pattern: the gradient is summed over devices exactly once.

    SGD makes the parameters a direct readout of the averaged gradients, so a
    missing or doubled psum (or a per-device mean of per-device means) shows up.
    The batches end with padding (12 graphs in batches of 8).
    """
    assert len(jax.devices()) >= 4, "conftest fakes 4 CPU devices"
    cfg = test_config.get_config()
    data = graphs_to_batch(generate_graphs("community_small", 12, seed=1), 20)
    idx = np.stack([input_pipeline.epoch_batches(12, 8, 0, e)[-1] for e in range(3)])
    assert np.any(idx == 12)  # padding slots in every batch
    model, process = model_from_config(cfg), process_from_config(cfg)
    out = {}
    for n in (1, 4):
        mesh = make_mesh(jax.devices()[:n])
        tx = optax.sgd(0.05)
        state = training.init_state(model, tx, jax.random.key(0), 20)
        chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(7))
        state, losses = run_chunk(chunk, state, data, idx, mesh)
        out[n] = (jax.tree_util.tree_leaves(state.params), np.asarray(losses))
    np.testing.assert_allclose(out[1][1], out[4][1], rtol=2e-5)
    for a, b in zip(out[1][0], out[4][0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_marginal_prior_density_is_fitted_and_recorded(tmp_path):
    from ddgjax.sampling import load_run

    cfg = test_config.get_config()
    cfg.train.num_epochs = 1
    cfg.diffusion.prior = "marginal"
    training.train(cfg, str(tmp_path / "m"), verbose=False)
    saved = json.loads((tmp_path / "m" / "config.json").read_text())["diffusion"]
    assert 0.05 < saved["prior_density"] < 0.6  # Community-small's edge density
    assert cfg.diffusion.prior_density == 0.0
    assert load_run(str(tmp_path / "m")).process.prior_density == saved["prior_density"]


def test_several_seeds_in_one_program_equal_separate_runs():
    """make_train_chunk_seeds: run r of the stacked program is make_train_chunk with its
    own initial state, key and batches, data-parallel over four devices (on one device:
    test_train_seeds_equals_runs_alone_resumes_and_catches_up, whole runs)."""
    cfg, model, process, tx, _, data = tiny_setup("ppgn", "simple")
    mesh = make_mesh(jax.devices()[:4])
    keys = [jax.random.key(11), jax.random.key(12)]
    states = [training.init_state(model, tx, jax.random.key(k), 20) for k in (3, 4)]
    rng = np.random.default_rng(0)
    idx = np.stack([rng.permutation(8)[None].repeat(3, 0) for _ in keys], axis=1)  # [3, 2, 8]
    single = [run_chunk(training.make_train_chunk(model, tx, process, mesh, k, 0.9), st, data,
                        idx[:, r].astype(np.int32), mesh)
              for r, (k, st) in enumerate(zip(keys, states))]
    stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *states)
    chunk = training.make_train_chunk_seeds(model, tx, process, mesh, jnp.stack(keys), 0.9)
    dev = replicate(input_pipeline.device_copy(data), mesh)
    out, losses = chunk(replicate(stacked, mesh), dev,
                        put_global(idx.astype(np.int32), batch_sharded(mesh, 2)))
    assert np.asarray(losses).shape == (3, 2)
    # Compare what the parameters compute, not the leaves: biases in front of an instance
    # norm have gradients that are zero up to rounding, which Adam turns into lr-sized
    # steps of either sign, so those leaves differ between any two summation orders
    # while the outputs do not depend on them.
    adj, mask = jnp.asarray(data.adj), jnp.asarray(data.node_mask)
    t, lv = jnp.full((8,), 3, jnp.int32), jnp.full((8,), 0.2, jnp.float32)
    logits = lambda p: np.asarray(model.apply(p, adj, mask, t, lv))
    for r, (st, loss) in enumerate(single):
        np.testing.assert_allclose(np.asarray(losses)[:, r], loss, rtol=1e-5)
        for ours, theirs in ((out.params, st.params), (out.ema_params, st.ema_params)):
            mine = jax.tree_util.tree_map(lambda a: np.asarray(a)[r], ours)
            np.testing.assert_allclose(logits(mine), logits(theirs), rtol=1e-3, atol=1e-3)
    assert not np.allclose(np.asarray(losses)[:, 0], np.asarray(losses)[:, 1])


# ----------------------------------------------------------------------------
# train_seeds: several seeds in one program, each run as if trained alone


ONE = jax.devices()[:1]  # (four devices: test_several_seeds_in_one_program_equal_separate_runs)


def _records(workdir):
    return [json.loads(line) for line in open(workdir / "metrics.jsonl")]


def _assert_same_run(mine, alone, ignore_train=()):
    """``mine`` (a run of train_seeds) is the run ``alone`` (training.train of that seed):
    the same record (but the ``ignore_train`` fields of its ``train`` config), checkpoints,
    logged losses and (up to rounding) parameters."""
    from ddgjax import checkpoints
    from ddgjax.sampling import load_run

    for name in ("config.json", "dataset.json"):
        records = [json.loads((d / name).read_text()) for d in (mine, alone)]
        for r in records:
            for key in ignore_train:
                r.get("train", {}).pop(key, None)
        assert records[0] == records[1]
    assert checkpoints.available(str(mine)) == checkpoints.available(str(alone))
    for kind in checkpoints.available(str(alone)):
        m, a = checkpoints.restore_meta(str(mine), kind), checkpoints.restore_meta(str(alone), kind)
        assert m.keys() == a.keys() and (m["epoch"], m["step"]) == (a["epoch"], a["step"])
        np.testing.assert_allclose(m["loss"], a["loss"], rtol=1e-5)
    # (a resumed run also holds the end record of its first invocation)
    rec_m, rec_a = _records(mine), _records(alone)
    assert [sorted(r) for r in rec_m if "event" not in r] == [
        sorted(r) for r in rec_a if "event" not in r]
    assert sorted(rec_m[-1]) == sorted(rec_a[-1]) and rec_m[-1]["event"] == "end"
    losses = lambda recs: [(r["epoch"], r["step"], r["loss"]) for r in recs if "loss" in r]
    for (e, s, l), (e2, s2, l2) in zip(losses(rec_m), losses(rec_a), strict=True):
        assert (e, s) == (e2, s2)
        np.testing.assert_allclose(l, l2, rtol=1e-5)
    # What the parameters compute (see test_several_seeds_in_one_program_equal_separate_runs).
    run_m, run_a = load_run(str(mine), "latest"), load_run(str(alone), "latest")
    data = graphs_to_batch(generate_graphs("community_small", 4, seed=5), run_a.max_nodes)
    adj, mask = jnp.asarray(data.adj), jnp.asarray(data.node_mask)
    t, lv = jnp.full((4,), 3, jnp.int32), jnp.full((4,), 0.2, jnp.float32)
    out = lambda p: np.asarray(run_a.model.apply(p, adj, mask, t, lv))
    np.testing.assert_allclose(out(run_m.params), out(run_a.params), rtol=1e-3, atol=1e-3)


def test_train_seeds_equals_runs_alone_resumes_and_catches_up(tmp_path, capsys):
    """Seeds 0 and 3 in one program equal each seed trained alone (4 epochs, checkpoints
    every 2): straight after a stop at epoch 2 (both resume), and with seed 3 ahead of
    seed 0 (here: trained alone to epoch 2 first; seed 0 is then trained alone up to
    it, and both go on together)."""
    cfg = test_config.get_config()
    alone = tmp_path / "alone"
    for seed in (0, 3):
        cfg.train.seed = seed
        training.train(cfg, str(alone / f"seed_{seed}"), verbose=False, devices=ONE)

    together = str(tmp_path / "together")
    first = training.train_seeds(cfg, together, [0, 3], stop_after_epochs=2, verbose=False,
                                 devices=ONE)
    assert first["epochs"] == 2 and [r["epochs"] for r in first["runs"]] == [2, 2]
    out = training.train_seeds(cfg, together, [0, 3], verbose=False, devices=ONE)  # resumes
    assert out["seeds"] == [0, 3] and out["epochs"] == 4
    assert out["workdirs"] == [f"{together}/seed_0", f"{together}/seed_3"]
    for seed in (0, 3):
        _assert_same_run(tmp_path / "together" / f"seed_{seed}", alone / f"seed_{seed}")
    a, b = ([r["loss"] for r in _records(alone / f"seed_{s}") if "loss" in r] for s in (0, 3))
    assert a != b

    lagging = str(tmp_path / "lagging")
    cfg.train.seed = 3
    training.train(cfg, f"{lagging}/seed_3", stop_after_epochs=2, verbose=False, devices=ONE)
    capsys.readouterr()
    training.train_seeds(cfg, lagging, [0, 3], verbose=False, devices=ONE)
    assert "seed 0: at epoch 0, the furthest run at 2" in capsys.readouterr().err
    for seed in (0, 3):
        _assert_same_run(tmp_path / "lagging" / f"seed_{seed}", alone / f"seed_{seed}")


def test_train_seeds_validates_per_run_and_interrupts_between_boundaries(tmp_path, monkeypatch):
    """Model selection by samples runs for each seed (its own best_val); Ctrl-C during a
    checkpoint boundary's saves: every run's saves finish first (deferred), the
    validations still scoring in the background are applied (each seed's best_val)
    before the interrupt propagates, and the message says where all of them resume."""
    import os
    import signal

    from ddgjax import checkpoints

    cfg = test_config.get_config()
    cfg.validation.every_epochs = 2
    cfg.validation.num_samples = 4
    cfg.sample.num_steps = 4
    real_start = checkpoints.CheckpointWriter.save
    kinds = []

    def start_and_signal(self, kind, *args, **kwargs):  # every kind: the run's writer
        real_start(self, kind, *args, **kwargs)
        kinds.append(kind)
        if kind == "best" and kinds.count("best") == 1:  # seed 0's first 'best' save
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(checkpoints.CheckpointWriter, "save", start_and_signal)
    with pytest.raises(training.TrainingInterrupted,
                       match=r"^interrupted at epoch 2; resume with the same command$"):
        training.train_seeds(cfg, str(tmp_path), [0, 3], verbose=False, devices=ONE)
    assert kinds == ["best", "latest", "best", "latest", "best_val", "best_val"]
    for seed in (0, 3):
        wd = str(tmp_path / f"seed_{seed}")
        assert checkpoints.restore_meta(wd, "latest")["epoch"] == 2
        assert checkpoints.restore_meta(wd, "best_val")["epoch"] == 2
        val = [r for r in _records(tmp_path / f"seed_{seed}") if "validation" in r]
        assert [r["epoch"] for r in val] == [2]
        assert json.loads((tmp_path / f"seed_{seed}" / "config.json").read_text())[
            "train"]["seed"] == seed


def test_train_seeds_refuses_repeated_seeds_and_a_run_of_another_seed(tmp_path):
    from ddgjax.workdir import write_run_record

    with pytest.raises(training.TrainingError, match="repeated seeds"):
        training.train_seeds(test_config.get_config(), str(tmp_path), [1, 1], verbose=False,
                             devices=ONE)
    cfg = test_config.get_config()
    cfg.train.seed = 5
    (tmp_path / "seed_2").mkdir()
    write_run_record(str(tmp_path / "seed_2"), cfg, {})
    with pytest.raises(training.TrainingError, match=r"seed_2 holds a run of train.seed=5"):
        training.train_seeds(test_config.get_config(), str(tmp_path), [2], verbose=False,
                             devices=ONE)


@pytest.mark.parametrize("total,size", [(300, 30), (400, 40), (16, 8), (1000, 100), (7, 7),
                                        (3, 3), (97, 97), (24, 8)])
def test_progress_piece_steps(total, size):
    assert training.progress_piece_steps(total) == size
    assert total % size == 0


def _spy_chunks(monkeypatch, wrap):
    """Replace the chunk builders the runs' setup calls with ``wrap(real chunk)``."""
    for name in ("make_train_chunk", "make_train_chunk_seeds"):
        real = getattr(runs, name)
        monkeypatch.setattr(runs, name,
                            lambda *args, real=real, **kwargs: wrap(real(*args, **kwargs)))


def test_progress_bar_runs_chunks_in_pieces_that_train_the_same_steps(tmp_path, monkeypatch):
    """With the bar (``verbose``), a chunk runs as equal pieces, with no host callback in
    the steps, and the bar moves after each piece; the runs (one and two seeds) equal the
    quiet ones, which call once per chunk."""
    cfg = test_config.get_config()
    cfg.train.num_epochs = cfg.train.checkpoint_every_epochs = 8
    calls, shown = [], []

    def counting(fn):
        def counted(state, data, idx, *rest):
            calls.append(idx.shape[0])
            return fn(state, data, idx, *rest)
        return counted

    _spy_chunks(monkeypatch, counting)
    real_update = Progress.update

    def update(bar, done, force=False, **info):
        shown.append(done)
        return real_update(bar, done, force, **info)

    monkeypatch.setattr(Progress, "update", update)
    quiet = training.train(cfg, str(tmp_path / "quiet"), verbose=False, devices=ONE)
    steps, spe = quiet["steps"], quiet["steps_per_epoch"]
    assert calls == [steps] and steps >= 16
    size = training.progress_piece_steps(steps)
    for which in ("one", "seeds"):
        calls.clear(), shown.clear()
        if which == "one":
            training.train(cfg, str(tmp_path / "bar"), verbose=True, devices=ONE)
            _assert_same_run(tmp_path / "bar", tmp_path / "quiet")
        else:
            training.train_seeds(cfg, str(tmp_path / "bar_seeds"), [0, 1], verbose=True,
                                 devices=ONE)
            _assert_same_run(tmp_path / "bar_seeds" / "seed_0", tmp_path / "quiet")
        assert 1 < len(calls) and calls == [size] * (steps // size)
        within = [d for d in shown if 0 < d < cfg.train.num_epochs]
        assert within == [k * size / spe for k in range(1, steps // size)]


def test_boundary_work_runs_while_the_next_chunk_is_queued(tmp_path, monkeypatch):
    """A chunk's host work (losses, logging, saves) runs once the next chunk's calls are
    queued (all its pieces with the progress bar), so the device does not wait for it; a
    run interrupted in that window still gets the previous chunk's boundary (its
    checkpoint) and resumes from it to the uninterrupted run."""
    cfg = test_config.get_config()
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 6, 2
    events = []
    real_save = runs.TrainRun.save

    def counting(fn):
        def counted(state, *rest):
            events.append(("call", int(np.asarray(jax.device_get(state.step)))))
            if events.count("interrupt") and len([e for e in events if e[0] == "call"]) == 3:
                raise KeyboardInterrupt
            return fn(state, *rest)
        return counted

    def spy_save(run, state, step, meta):
        events.append(("save", meta["epoch"]))
        return real_save(run, state, step, meta)

    _spy_chunks(monkeypatch, counting)
    monkeypatch.setattr(runs.TrainRun, "save", spy_save)
    full = training.train(cfg, str(tmp_path / "full"), verbose=False, devices=ONE)
    spe = full["steps_per_epoch"]
    assert events == [("call", 0), ("call", 2 * spe), ("save", 2), ("call", 4 * spe),
                      ("save", 4), ("save", 6)]
    # interrupted while queueing the third chunk, before the second chunk's boundary work
    events[:] = ["interrupt"]
    with pytest.raises(KeyboardInterrupt):
        training.train(cfg, str(tmp_path / "cut"), verbose=False, devices=ONE)
    assert events[1:] == [("call", 0), ("call", 2 * spe), ("save", 2), ("call", 4 * spe),
                          ("save", 4)]
    assert checkpoints.latest_step(str(tmp_path / "cut"), "latest") == 4 * spe
    events.clear()
    training.train(cfg, str(tmp_path / "cut"), verbose=False, devices=ONE)
    assert events == [("call", 4 * spe), ("save", 6)]
    _assert_same_run(tmp_path / "cut", tmp_path / "full")
    # with the progress bar a chunk is several calls: all of them are queued before the
    # previous chunk's boundary work
    events.clear()
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 8, 4
    training.train(cfg, str(tmp_path / "bar"), verbose=True, devices=ONE)
    piece = training.progress_piece_steps(4 * spe)
    assert 1 < 4 * spe // piece <= training.CALLS_IN_FLIGHT
    calls = lambda e: [("call", e * spe + k * piece) for k in range(4 * spe // piece)]
    assert events == calls(0) + calls(4) + [("save", 4), ("save", 8)]


def test_an_interrupt_during_boundary_work_waits_for_its_checkpoint(tmp_path, monkeypatch):
    """A SIGINT that arrives while a boundary logs its chunk (before its saves) is held
    until the boundary's checkpoint is written, then ends the run; the resume equals the
    uninterrupted run."""
    import os
    import signal

    cfg = test_config.get_config()
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 4, 2
    training.train(cfg, str(tmp_path / "full"), verbose=False, devices=ONE)
    real_log = runs.TrainRun.log_chunk

    def log_then_signal(run, losses, epoch, *rest):
        if epoch == 2:
            os.kill(os.getpid(), signal.SIGINT)   # held until the boundary is saved
        return real_log(run, losses, epoch, *rest)

    monkeypatch.setattr(runs.TrainRun, "log_chunk", log_then_signal)
    cut = str(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt, match="^interrupted at epoch 2; resume"):
        training.train(cfg, cut, verbose=False, devices=ONE)
    assert checkpoints.restore_meta(cut, "latest")["epoch"] == 2
    monkeypatch.undo()
    training.train(cfg, cut, verbose=False, devices=ONE)
    _assert_same_run(tmp_path / "cut", tmp_path / "full")


# (No background compile when resuming: test_resume_equals_straight_run.)
@pytest.mark.parametrize("kind", ["bar", "buckets", "seeds"])
def test_precompiled_first_chunk_is_the_program_the_calls_run(tmp_path, monkeypatch, kind,
                                                              compiles):
    """A fresh run compiles its first chunk in the background from abstract arguments
    (``chunks.first_chunk_specs``) while it initialises; its chunk calls then compile
    nothing (the executable is in JAX's compilation cache), which fails if any shape,
    dtype or sharding of the specs differs from the calls'. Without it (here: switched
    off) the calls compile; the two runs are the same run. ``bar``: pieces of a chunk;
    ``buckets``: one program per bucket; ``seeds``: several runs in one program."""
    cfg = test_config.get_config()
    if kind == "buckets":
        cfg.data.buckets = "15,"        # two programs: buckets 15 and 20 (max_nodes)
        cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 2, 1
    if kind == "bar":                   # chunks of 40 steps, run in pieces of 8
        cfg.train.num_epochs = cfg.train.checkpoint_every_epochs = 8
    misses = []                          # compilation-cache misses inside the chunk calls

    def counting(fn):
        def counted(*call_args):
            before = len(compiles)
            out = fn(*call_args)
            misses.append(len(compiles) - before)
            return out
        counted.lower = fn.lower
        return counted

    _spy_chunks(monkeypatch, counting)
    real_start = chunks.start_precompile

    def run(precompile, workdir):
        start = real_start if precompile else (lambda *args, **kwargs: None)
        monkeypatch.setattr(loop, "start_precompile", start)
        monkeypatch.setattr(seeds_module, "start_precompile", start)
        misses.clear()
        if kind == "seeds":
            out = training.train_seeds(cfg, str(workdir), [0, 1], verbose=False, devices=ONE)
            return out["runs"][0], list(misses)
        return (training.train(cfg, str(workdir), verbose=kind == "bar", devices=ONE),
                list(misses))

    plain, plain_misses = run(False, tmp_path / "plain")
    pre, pre_misses = run(True, tmp_path / "pre")
    assert not plain["precompiled"] and sum(plain_misses) >= 1
    assert pre["precompiled"] and len(pre_misses) == len(plain_misses) >= 2
    assert sum(pre_misses) == 0, pre_misses
    if kind == "bar":
        assert len(pre_misses) == 5
    if kind == "seeds":
        for s in (0, 1):
            _assert_same_run(tmp_path / "pre" / f"seed_{s}", tmp_path / "plain" / f"seed_{s}")
    else:
        _assert_same_run(tmp_path / "pre", tmp_path / "plain")
