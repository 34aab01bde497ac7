"""Training: losses go down, resume equals a straight run, devices and hosts agree."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from ddgjax import diffusion, training
from ddgjax.datasets import generate_graphs
from ddgjax.graphs import graphs_to_batch

from conftest import REPO


def tiny_setup(model_name, loss, batch=8):
    cfg = test_config.get_config()
    cfg.model.name = model_name
    cfg.diffusion.loss = loss
    cfg.train.lr = 5e-3
    graphs = generate_graphs("community_small", batch, seed=3)
    data = graphs_to_batch(graphs, 20)
    model = training.model_from_config(cfg)
    schedule = training.schedule_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), 20)
    return cfg, model, schedule, tx, state, data


def fixed_loss(model, params, schedule, data, loss):
    """Average over 8 fixed keys: the same t and noise before and after training."""

    @jax.jit
    def losses(params):
        def one(k):
            return diffusion.training_loss(lambda a, m, t, b: model.apply(params, a, m, t, b),
                                           jax.random.key(k), jnp.asarray(data.adj),
                                           jnp.asarray(data.node_mask), schedule, loss).loss
        return jax.lax.map(one, jnp.arange(1000, 1008))

    return float(np.mean(losses(params)))


@pytest.mark.parametrize("model_name", ["ppgn", "edp"])
@pytest.mark.parametrize("loss", ["simple", "vb"])
def test_jitted_steps_lower_the_loss(model_name, loss):
    cfg, model, schedule, tx, state, data = tiny_setup(model_name, loss)
    mesh = training.make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, schedule, loss, mesh, jax.random.key(1))
    before = fixed_loss(model, state.params, schedule, data, loss)
    G = data.adj.shape[0]
    adj = np.concatenate([data.adj, np.zeros_like(data.adj[:1])])
    mask = np.concatenate([data.node_mask, np.zeros_like(data.node_mask[:1])])
    idx = np.tile(np.arange(G, dtype=np.int32), (40, 1))
    state, losses = chunk(state, adj, mask, idx)
    after = fixed_loss(model, state.params, schedule, data, loss)
    assert np.all(np.isfinite(losses))
    assert int(state.step) == 40
    assert after < 0.9 * before, (before, after)


def test_epoch_batches_cover_every_graph_once():
    idx = training.epoch_batches(10, 4, seed=0, epoch=3)
    assert idx.shape == (3, 4)
    flat = idx.ravel()
    assert sorted(flat[flat < 10].tolist()) == list(range(10))
    assert np.sum(flat == 10) == 2
    np.testing.assert_array_equal(idx, training.epoch_batches(10, 4, seed=0, epoch=3))
    assert not np.array_equal(idx, training.epoch_batches(10, 4, seed=0, epoch=4))


def _params_of(workdir):
    from ddgjax.sampling import load_run

    return load_run(str(workdir), "latest").params


def test_resume_equals_straight_run(tmp_path):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 4
    cfg.train.checkpoint_every_epochs = 1
    straight = training.train_and_evaluate(cfg, str(tmp_path / "a"), verbose=False)
    first = training.train_and_evaluate(cfg, str(tmp_path / "b"), stop_after_epochs=2,
                                        verbose=False)
    assert first["epochs"] == 2
    second = training.train_and_evaluate(cfg, str(tmp_path / "b"), verbose=False)
    assert second["epochs"] == 4 and second["steps"] == straight["steps"]
    a, b = _params_of(tmp_path / "a"), _params_of(tmp_path / "b")
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), a, b)
    losses_a = [r for r in map(json.loads, open(tmp_path / "a" / "metrics.jsonl")) if "loss" in r]
    losses_b = [r for r in map(json.loads, open(tmp_path / "b" / "metrics.jsonl")) if "loss" in r]
    assert [r["loss"] for r in losses_a] == [r["loss"] for r in losses_b]


def test_nan_loss_stops_and_keeps_checkpoint(tmp_path):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 2
    cfg.train.checkpoint_every_epochs = 1
    wd = str(tmp_path / "run")
    training.train_and_evaluate(cfg, wd, verbose=False)
    good = _params_of(wd)
    cfg.train.num_epochs = 4
    cfg.train.lr = 1e35  # parameters overflow: the loss of the next epochs is inf/NaN
    with pytest.raises(training.TrainingError, match="non-finite training loss"):
        training.train_and_evaluate(cfg, wd, verbose=False)
    after = _params_of(wd)
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), good, after)


MULTI_DEVICE_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, {repo!r})
    import jax, numpy as np, optax
    from configs import test as test_config
    from ddgjax import training
    from ddgjax.datasets import generate_graphs
    from ddgjax.graphs import graphs_to_batch
    assert len(jax.devices()) == 4, jax.devices()
    cfg = test_config.get_config()
    data = graphs_to_batch(generate_graphs("community_small", 12, seed=1), 20)
    adj = np.concatenate([data.adj, np.zeros_like(data.adj[:1])])
    mask = np.concatenate([data.node_mask, np.zeros_like(data.node_mask[:1])])
    idx = np.stack([training.epoch_batches(12, 8, 0, e)[0] for e in range(3)])
    out = {{}}
    for n in (1, 4):
        mesh = training.make_mesh(jax.devices()[:n])
        model = training.model_from_config(cfg)
        tx = optax.sgd(0.05)  # SGD: parameters compare the averaged gradients directly
        state = training.init_state(model, tx, jax.random.key(0), 20)
        chunk = training.make_train_chunk(model, tx, training.schedule_from_config(cfg), "vb",
                                          mesh, jax.random.key(7))
        state, losses = chunk(state, adj, mask, idx)
        out[n] = (jax.tree_util.tree_leaves(state.params), np.asarray(losses))
    np.testing.assert_allclose(out[1][1], out[4][1], rtol=2e-5)
    for a, b in zip(out[1][0], out[4][0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    print("MULTI_DEVICE_OK", out[4][1])
""")


def test_four_fake_devices_match_one_device():
    script = MULTI_DEVICE_SCRIPT.format(repo=str(REPO))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "MULTI_DEVICE_OK" in res.stdout


MULTI_HOST_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, {repo!r})
    import jax, numpy as np, optax
    pid, nproc, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if nproc > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address="127.0.0.1:" + port,
                                   num_processes=nproc, process_id=pid)
    from configs import test as test_config
    from ddgjax import training
    from ddgjax.datasets import generate_graphs
    from ddgjax.graphs import graphs_to_batch
    from jax.sharding import NamedSharding, PartitionSpec as P
    cfg = test_config.get_config()
    data = graphs_to_batch(generate_graphs("community_small", 12, seed=1), 20)
    adj = np.concatenate([data.adj, np.zeros_like(data.adj[:1])])
    mask = np.concatenate([data.node_mask, np.zeros_like(data.node_mask[:1])])
    idx = np.stack([training.epoch_batches(12, 8, 0, e)[0] for e in range(3)])
    mesh = training.make_mesh()
    repl = NamedSharding(mesh, P())
    model = training.model_from_config(cfg)
    tx = optax.sgd(0.05)  # SGD: parameters compare the averaged gradients directly
    state = training.init_state(model, tx, jax.random.key(0), 20)
    state = jax.device_put(state, repl)
    chunk = training.make_train_chunk(model, tx, training.schedule_from_config(cfg), "simple",
                                      mesh, jax.random.key(7))
    state, losses = chunk(state, training.put_global(adj, repl), training.put_global(mask, repl),
                          training.put_global(idx, NamedSharding(mesh, P(None, "data"))))
    leaves = [np.asarray(x.addressable_data(0)) for x in jax.tree_util.tree_leaves(state.params)]
    np.savez(sys.argv[4], losses=np.asarray(losses.addressable_data(0)), *leaves)
    print("HOST_OK", pid, jax.process_count(), len(jax.devices()))
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_one_process(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(MULTI_HOST_SCRIPT.format(repo=str(REPO)))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    ref = subprocess.run([sys.executable, str(script), "0", "1", "0", str(tmp_path / "ref.npz")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert ref.returncode == 0, ref.stderr[-3000:]
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(i), "2", port,
                               str(tmp_path / f"host{i}.npz")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "HOST_OK" in out and " 2 2" in out, out
    r = np.load(tmp_path / "ref.npz")
    for i in range(2):
        h = np.load(tmp_path / f"host{i}.npz")
        np.testing.assert_allclose(h["losses"], r["losses"], rtol=2e-5)
        for k in r.files:
            np.testing.assert_allclose(h[k], r[k], rtol=1e-4, atol=1e-6)
