"""The noise-process interface and the per-graph plumbing the processes share
(ddgjax.processes.base), and the registry (ddgjax.processes.process_from_config)."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from ddgjax.graphs import pair_mask
from ddgjax.processes import (REGISTRY, BitFlipProcess, GaussianProcess, base,
                              process_from_config)
from ddgjax.processes.base import sampling_levels, uniform_timestep

from helpers import random_batch


# ----------------------------------------------------------------------------
# Levels


def test_sampling_levels():
    np.testing.assert_array_equal(sampling_levels(4), [4, 3, 2, 1, 0])
    lv = sampling_levels(32, 8)
    assert lv[0] == 32 and lv[-1] == 0 and len(lv) == 9 and np.all(np.diff(lv) < 0)
    with pytest.raises(ValueError, match="num_steps"):
        sampling_levels(32, 64)


@pytest.mark.parametrize("T,K", [(32, 8), (32, 5), (32, 31), (8, 1), (8, 8), (1000, 7)])
def test_sampling_levels_are_trained_levels_from_T_to_0(T, K):
    lv = sampling_levels(T, K)
    assert lv.dtype == np.int32 and len(lv) == K + 1
    assert lv[0] == T and lv[-1] == 0 and np.all(np.diff(lv) < 0)
    np.testing.assert_array_equal(lv, np.round(np.linspace(0, T, K + 1))[::-1])  # docs/method.md
    with pytest.raises(ValueError, match="num_steps"):
        sampling_levels(T, 0)


@pytest.mark.parametrize("T", [1, 8, 100, 1000])
def test_uniform_timestep_maps_u_to_levels_1_to_T(T):
    """u in [(t-1)/T, t/T) is level t: never 0 (the data), T is reachable."""
    ut = lambda u: np.asarray(uniform_timestep(jnp.asarray(u, jnp.float32), T))
    assert ut([0.0]).tolist() == [1]
    assert ut([0.999999]).tolist() == [T]
    k = np.arange(1, T + 1)
    np.testing.assert_array_equal(ut((k - 0.5) / T), k)
    out = ut(np.linspace(0.0, 0.999999, 4001))
    assert out.dtype == np.int32
    assert out.min() == 1 and out.max() == T and np.all(np.diff(out) >= 0)


# ----------------------------------------------------------------------------
# Per-graph plumbing


def test_pair_mean_loss_counts_real_strict_upper_pairs_only():
    adj, mask = random_batch(0, [5, 1, 0, 7], 7)
    terms = jnp.asarray(np.random.default_rng(1).uniform(0.5, 2.0, adj.shape), jnp.float32)
    t_index = jnp.array([3, 1, 2, 8], jnp.int32)
    out = base.pair_mean_loss(terms, jnp.asarray(mask), t_index)
    pm = np.asarray(pair_mask(mask))
    ref = np.where(pm, np.asarray(terms), 0.0).sum((1, 2))
    np.testing.assert_allclose(out.per_graph, ref, rtol=1e-6)
    np.testing.assert_array_equal(out.num_pairs, [10, 0, 0, 21])
    assert out.num_pairs.dtype == jnp.float32
    np.testing.assert_allclose(out.loss, ref.sum() / 31, rtol=1e-6)
    np.testing.assert_array_equal(out.t_index, t_index)
    # No real pair at all: a zero loss, not a division by zero.
    empty = base.pair_mean_loss(terms, jnp.zeros_like(mask), t_index)
    assert float(empty.loss) == 0.0


def test_per_graph_noise_depends_only_on_each_graphs_key():
    keys = jax.random.split(jax.random.key(0), 4)
    z = base.per_graph_noise(keys, (4, 3, 3))
    chex.assert_shape(z, (4, 3, 3))
    np.testing.assert_array_equal(base.per_graph_noise(keys[2:3], (1, 3, 3))[0], z[2])
    np.testing.assert_array_equal(z[1], jax.random.uniform(keys[1], (3, 3), jnp.float32))
    # One key: one joint draw.
    joint = base.per_graph_noise(jax.random.key(5), (4, 3, 3), jax.random.normal)
    np.testing.assert_array_equal(joint, jax.random.normal(jax.random.key(5), (4, 3, 3)))


def test_per_graph_keys_and_time_keys():
    keys = jax.random.split(jax.random.key(1), 3)
    assert base.per_graph_keys(keys, 3) is keys
    with pytest.raises(ValueError, match="expected 2 per-graph keys"):
        base.per_graph_keys(keys, 2)
    split = base.per_graph_keys(jax.random.key(1), 3)
    np.testing.assert_array_equal(jax.random.key_data(split), jax.random.key_data(keys))
    u, noise_keys = base.per_graph_time_and_noise_keys(keys)
    chex.assert_shape(u, (3,))
    for b in range(3):
        assert float(u[b]) == float(jax.random.uniform(jax.random.fold_in(keys[b], 0), ()))
        np.testing.assert_array_equal(jax.random.key_data(noise_keys[b]),
                                      jax.random.key_data(jax.random.fold_in(keys[b], 1)))


@pytest.mark.parametrize("return_chain", [False, True])
def test_vmap_per_graph_shapes(return_chain):
    mask = jnp.asarray(np.array([[True, True, False], [True, False, False]]))
    keys = jax.random.split(jax.random.key(0), 2)

    def sample_batch(key, m):
        assert m.shape == (1, 3)
        adj = jnp.broadcast_to(m[:, :, None] & m[:, None, :], (1, 3, 3)).astype(jnp.float32)
        if return_chain:
            return adj, jnp.stack([adj, 2 * adj])  # [K+1 = 2, 1, N, N]
        return adj

    out = base.vmap_per_graph(sample_batch, keys, mask, return_chain)
    if return_chain:
        adj, chain = out
        chex.assert_shape(chain, (2, 2, 3, 3))
        np.testing.assert_array_equal(chain[:, 1], 2 * adj)
    else:
        adj = out
    chex.assert_shape(adj, (2, 3, 3))
    np.testing.assert_array_equal(adj.sum((1, 2)), [4, 1])


def test_broadcast_per_graph():
    chex.assert_shape(base.broadcast_per_graph(jnp.arange(3)), (3, 1, 1))


# ----------------------------------------------------------------------------
# Processes and the registry


def test_processes_are_hashable_and_samplers_validate_options():
    for proc in (BitFlipProcess(num_timesteps=8), GaussianProcess(num_timesteps=8)):
        assert proc == proc.replace() and hash(proc) == hash(proc.replace())
        s = proc.sampler(4)
        assert hash(s) == hash(proc.sampler(4)) and s.num_steps == 4 and not s.return_chain
        assert proc.sampler().num_steps == 8
        assert s.info["process"] == proc.name and s.info["num_steps"] == 4
        with pytest.raises(ValueError, match="no option.*bogus.*valid options"):
            proc.sampler(4, bogus=1)
        with pytest.raises(ValueError, match="num_steps"):
            proc.sampler(9)
    assert BitFlipProcess(num_timesteps=8).sampler(algorithm=1).algorithm == 1
    g = GaussianProcess(num_timesteps=8).sampler(eta=0.0, clip_x0=False)
    assert (g.eta, g.clip_x0) == (0.0, False)


def test_process_from_config():
    assert set(REGISTRY) == {"discrete", "gaussian"}
    cfg = test_config.get_config()
    p = process_from_config(cfg)
    assert isinstance(p, BitFlipProcess)
    assert (p.num_timesteps, p.schedule_name, p.loss_type, p.algorithm) == (8, "linear",
                                                                          "simple", 2)
    cfg.diffusion.loss = "vb"
    assert process_from_config(cfg).algorithm == 1  # the paper's pairing
    cfg.diffusion.kind = "gaussian"
    g = process_from_config(cfg)
    assert isinstance(g, GaussianProcess) and g.num_timesteps == 8
    cfg.diffusion.kind = "bernoulli"
    with pytest.raises(ValueError, match="config.diffusion.kind"):
        process_from_config(cfg)

