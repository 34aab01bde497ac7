"""The Gaussian baseline: schedules, forward noise, reverse steps, training, sampling."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from ddgjax import training
from ddgjax.data import generate_graphs
from ddgjax.graphs import GraphBatch, edge_mask, graphs_to_batch, node_mask_from_counts, pair_mask
from ddgjax.models import init_params, model_from_config
from ddgjax.parallel import make_mesh
from ddgjax.processes import GaussianProcess, gaussian, process_from_config
from ddgjax.sampling import compiled_sampler

from helpers import random_batch as np_random_batch

T = 8


def gaussian_test_config():
    cfg = test_config.get_config()
    cfg.diffusion.kind = "gaussian"
    return cfg


def random_batch(seed, counts, N, p=0.4):
    """``helpers.random_batch`` as jax arrays."""
    adj, mask = np_random_batch(seed, counts, N, p)
    return jnp.asarray(adj), jnp.asarray(mask)


def oracle(adj0, node_mask, schedule):
    """A perfect denoiser for a known ``adj0``: the exact noise of ``x_t``."""
    x0 = gaussian.to_signal(adj0, node_mask)
    sab, sig = jnp.asarray(schedule.sqrt_alpha_bar), jnp.asarray(schedule.sigma)

    def fn(x_t, mask, t_index, sigma_t):
        eps = (x_t - sab[t_index][:, None, None] * x0) / sig[t_index][:, None, None]
        return jnp.where(edge_mask(mask), eps, 0.0)

    return fn


def assert_valid_adjacency(adj, counts):
    adj = np.asarray(adj)
    N = adj.shape[-1]
    assert set(np.unique(adj).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(adj, np.swapaxes(adj, -1, -2))
    np.testing.assert_array_equal(np.diagonal(adj, axis1=-2, axis2=-1), 0)
    outside = ~np.asarray(edge_mask(node_mask_from_counts(np.asarray(counts), N)))
    assert not adj[outside].any()


# ----------------------------------------------------------------------------
# Schedules


@pytest.mark.parametrize("name,steps", [("cosine", 8), ("cosine", 1000), ("linear", 1000),
                                        ("linear", 32)])
def test_schedule_is_variance_preserving_and_decreasing(name, steps):
    s = gaussian.make_gaussian_schedule(name, steps)
    assert s.alpha_bar64.shape == (steps + 1,) and s.alpha_bar64[0] == 1.0
    assert np.all(np.diff(s.alpha_bar64) < 0) and 0 < s.alpha_bar64[-1] < 1e-3
    np.testing.assert_allclose(s.sqrt_alpha_bar ** 2 + s.sigma ** 2, 1.0, rtol=1e-6)
    assert s.sigma[0] == 0.0


def test_schedule_errors():
    with pytest.raises(ValueError, match="num_timesteps >= 21"):
        gaussian.make_gaussian_schedule("linear", 8)
    with pytest.raises(ValueError, match="unknown Gaussian schedule"):
        gaussian.make_gaussian_schedule("quadratic", 8)
    with pytest.raises(ValueError, match="positive integer"):
        gaussian.make_gaussian_schedule("cosine", 0)


# ----------------------------------------------------------------------------
# Forward process


def test_symmetric_normal_masks_and_per_graph_keys():
    mask = jnp.asarray(node_mask_from_counts(np.array([5, 3, 0]), 6))
    keys = jax.random.split(jax.random.key(0), 3)
    z = gaussian.symmetric_normal(keys, mask)
    chex.assert_shape(z, (3, 6, 6))
    np.testing.assert_array_equal(z, jnp.swapaxes(z, 1, 2))
    assert not np.asarray(z)[~np.asarray(edge_mask(mask))].any()
    assert np.all(np.asarray(z)[np.asarray(pair_mask(mask))] != 0)
    # Graph b's noise depends only on keys[b].
    alone = gaussian.symmetric_normal(keys[1:2], mask[1:2])
    np.testing.assert_array_equal(alone[0], z[1])


def test_forward_marginal_matches_closed_form():
    sched = gaussian.make_gaussian_schedule("cosine", T)
    adj, mask = random_batch(0, [7], 9)
    M = 4000
    x0 = gaussian.to_signal(adj, mask)
    pm = np.asarray(pair_mask(mask))[0]

    @jax.jit
    def draw(t):
        x0_m = jnp.broadcast_to(x0, (M,) + x0.shape[1:])
        mask_m = jnp.broadcast_to(mask, (M,) + mask.shape[1:])
        eps = gaussian.symmetric_normal(jax.random.split(jax.random.fold_in(jax.random.key(0), t),
                                                         M), mask_m)
        return gaussian.q_sample(x0_m, eps, jnp.full((M,), t), sched)

    for t in (1, 4, T):
        x_t = np.asarray(draw(t))
        chex.assert_shape(x_t, (M, 9, 9))
        np.testing.assert_array_equal(x_t, np.swapaxes(x_t, 1, 2))
        assert not x_t[:, ~np.asarray(edge_mask(mask))[0]].any()
        ab = sched.alpha_bar64[t]
        mean, var = x_t.mean(0)[pm], x_t.var(0)[pm]
        expected = np.sqrt(ab) * np.asarray(x0)[0][pm]
        assert np.max(np.abs(mean - expected)) < 5 * np.sqrt((1 - ab) / M)
        np.testing.assert_allclose(var.mean(), 1 - ab, rtol=0.02)
        np.testing.assert_allclose(var, 1 - ab, rtol=0.15)


def test_training_loss_counts_real_pairs_only():
    sched = gaussian.make_gaussian_schedule("cosine", T)
    adj, mask = random_batch(1, [5, 7, 0], 8)
    keys = jax.random.split(jax.random.key(2), 3)

    @jax.jit
    def run(keys, adj, mask):
        seen = {}

        def denoise(x_t, m, t_index, sigma_t):
            seen.update(x_t=x_t, t=t_index, sigma=sigma_t)
            return jnp.zeros_like(x_t)

        out = gaussian.training_loss(denoise, keys, adj, mask, sched)
        return out, seen

    out, seen = run(keys, adj, mask)
    np.testing.assert_array_equal(out.num_pairs, [10, 21, 0])
    assert np.all((out.t_index >= 1) & (out.t_index <= T))
    np.testing.assert_array_equal(seen["t"], out.t_index)
    np.testing.assert_allclose(seen["sigma"], sched.sigma[np.asarray(seen["t"])])
    # With eps_hat = 0 the loss is the sum of eps^2 on real pairs.
    t = np.asarray(seen["t"])
    eps = ((np.asarray(seen["x_t"]) - sched.sqrt_alpha_bar[t][:, None, None]
            * np.asarray(gaussian.to_signal(adj, mask))) / sched.sigma[t][:, None, None])
    ref = np.where(np.asarray(pair_mask(mask)), eps ** 2, 0).sum((1, 2))
    np.testing.assert_allclose(out.per_graph, ref, rtol=1e-4)
    assert out.per_graph[2] == 0
    np.testing.assert_allclose(out.loss, ref.sum() / 31, rtol=1e-4)
    # Graph b's draw depends only on keys[b].
    alone, _ = run(keys[::-1], adj[::-1], mask[::-1])
    np.testing.assert_allclose(alone.per_graph[::-1], out.per_graph, rtol=1e-6)


def test_training_levels_are_uniform_on_1_to_T():
    """The process's loss draws t ~ U{1..T} per graph: never level 0, level T included."""
    process = GaussianProcess(num_timesteps=T)
    adj, mask = random_batch(1, [5, 7, 0], 8)

    @jax.jit
    @jax.vmap
    def draw(key):
        keys = jax.random.split(key, 3)
        return process.loss(lambda x_t, m, t, s: jnp.zeros_like(x_t), keys, adj, mask).t_index

    t = np.asarray(draw(jax.random.split(jax.random.key(7), 683))).ravel()
    counts = np.bincount(t, minlength=T + 1)
    assert t.min() == 1 and t.max() == T, counts
    assert counts[0] == 0 and np.all(counts[1:] > 0)
    expected = len(t) / T
    assert np.all(np.abs(counts[1:] - expected) < 5 * np.sqrt(expected * (1 - 1 / T))), counts


# ----------------------------------------------------------------------------
# Reverse process


@pytest.mark.parametrize("num_steps", [1, 3, 8])
def test_eta_one_is_the_ddpm_posterior_of_the_strided_pair(num_steps):
    sched = gaussian.make_gaussian_schedule("cosine", T)
    c = gaussian.step_coefficients(sched, num_steps, eta=1.0)
    assert c.t[0] == T and len(c.t) == num_steps
    levels = list(c.t) + [0]
    ab = sched.alpha_bar64
    for k in range(num_steps):
        t, s = levels[k], levels[k + 1]
        a = ab[t] / ab[s]
        # q(x_s | x_t, x0) = N(c0 x0 + ct x_t, var) (Ho et al. 2020, eq. 7, for the pair (t, s)).
        c0 = np.sqrt(ab[s]) * (1 - a) / (1 - ab[t])
        ct = np.sqrt(a) * (1 - ab[s]) / (1 - ab[t])
        var = (1 - ab[s]) / (1 - ab[t]) * (1 - a)
        # Our update: sqrt(ab_s) x0 + eps_coef (x_t - sqrt(ab_t) x0) / sigma_t + std z.
        our_ct = c.eps_coef[k] / c.sigma_t[k]
        our_c0 = c.sqrt_ab_s[k] - c.eps_coef[k] * c.sqrt_ab_t[k] / c.sigma_t[k]
        np.testing.assert_allclose([our_c0, our_ct, c.std[k] ** 2], [c0, ct, var],
                                   rtol=2e-5, atol=1e-7)
    assert c.std[-1] == 0 and c.eps_coef[-1] == 0 and c.sqrt_ab_s[-1] == 1


def test_reverse_step_shapes_and_masks():
    sched = gaussian.make_gaussian_schedule("cosine", T)
    adj, mask = random_batch(3, [6, 4], 7)
    c = gaussian.step_coefficients(sched, 4)
    step = jax.tree_util.tree_map(lambda a: a[1], c)

    @jax.jit
    def run(mask):
        x_t = gaussian.symmetric_normal(jax.random.key(0), mask) * 3.0
        return gaussian.reverse_step(lambda a, m, t, b: a * 0.5, jax.random.key(1), x_t, mask,
                                     step)

    x_s, x0_hat = run(mask)
    chex.assert_shape([x_s, x0_hat], (2, 7, 7))
    chex.assert_type([x_s, x0_hat], jnp.float32)
    for x in (x_s, x0_hat):
        np.testing.assert_array_equal(x, jnp.swapaxes(x, 1, 2))
        assert not np.asarray(x)[~np.asarray(edge_mask(mask))].any()
    assert float(jnp.abs(x0_hat).max()) <= 1.0


def test_step_with_true_x0_preserves_the_forward_marginal():
    """x_t ~ q(x_t | x0), one strided ancestral step with a perfect model: x_s ~ q(x_s | x0)."""
    sched = gaussian.make_gaussian_schedule("cosine", T)
    adj, mask = random_batch(4, [6], 6)
    M = 4000
    c = gaussian.step_coefficients(sched, 4)  # levels 8, 6, 4, 2, 0
    k = 1  # from t = 6 to s = 4
    t, s = int(c.t[k]), int(c.t[k + 1])
    step = jax.tree_util.tree_map(lambda a: a[k], c)

    @jax.jit
    def run():
        adj_m = jnp.broadcast_to(adj, (M, 6, 6))
        mask_m = jnp.broadcast_to(mask, (M, 6))
        x0 = gaussian.to_signal(adj_m, mask_m)
        eps = gaussian.symmetric_normal(jax.random.split(jax.random.key(5), M), mask_m)
        x_t = gaussian.q_sample(x0, eps, jnp.full((M,), t), sched)
        x_s, _ = gaussian.reverse_step(oracle(adj_m, mask_m, sched), jax.random.key(6), x_t,
                                       mask_m, step, clip_x0=False)
        return x_s

    pm = np.asarray(pair_mask(mask))[0]
    xs = np.asarray(run())[:, pm]
    ab = sched.alpha_bar64[s]
    x0 = np.asarray(gaussian.to_signal(adj, mask))[0][pm]
    np.testing.assert_allclose(xs.mean(0), np.sqrt(ab) * x0, atol=5 * np.sqrt((1 - ab) / M))
    np.testing.assert_allclose(xs.var(0).mean(), 1 - ab, rtol=0.03)


def test_sampler_with_a_perfect_model_returns_the_graph():
    sched = gaussian.make_gaussian_schedule("cosine", T)
    adj, mask = random_batch(7, [6, 9, 3], 9)
    for num_steps, eta in [(3, 0.0), (T, 1.0)]:
        out, chain = jax.jit(lambda key: gaussian.sample_graphs(
            oracle(adj, mask, sched), key, mask, sched, num_steps, eta=eta,
            return_chain=True))(jax.random.key(0))
        np.testing.assert_array_equal(out, adj)
        chex.assert_shape(chain, (num_steps + 1, 3, 9, 9))
        np.testing.assert_array_equal(chain[-1], out)


def small_edp_sampling_setup():
    """A 1-layer EDP-GNN Gaussian model (random weights; it reads t_index, while PPGN's
    sigma_t input is covered by the CLI test), its process, 6 graphs of mixed sizes
    (0 to 10 nodes) and one key per graph."""
    cfg = gaussian_test_config()
    cfg.model.name = "edp"
    cfg.model.edp.num_layers, cfg.model.edp.gin_steps = 1, 1
    model = model_from_config(cfg)
    params = init_params(model, jax.random.key(0), 10)
    process = gaussian.from_config(cfg)
    counts = np.array([10, 4, 7, 1, 0, 2])
    mask = jnp.asarray(node_mask_from_counts(counts, 10))
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(3), i))(jnp.arange(6))
    return model, params, process, counts, mask, keys


def test_process_sampler_output_is_a_valid_adjacency():
    model, params, process, counts, mask, keys = small_edp_sampling_setup()
    # None steps = all T levels; the chain is [B, K+1, N, N] with the output last.
    sampler = compiled_sampler(model, process.sampler(None, return_chain=True))
    adj, chain = sampler(params, keys, mask)
    chex.assert_shape(adj, (6, 10, 10))
    assert_valid_adjacency(adj, counts)
    assert adj.sum() > 0
    chex.assert_shape(chain, (6, T + 1, 10, 10))
    np.testing.assert_array_equal(chain[:, -1], adj)
    assert_valid_adjacency(chain.reshape(-1, 10, 10), np.repeat(counts, T + 1))
    # Per-graph keys: graph b depends only on keys[b], not on its batch neighbours.
    perm = np.array([3, 0, 5, 1, 4, 2])
    adj_p, _ = sampler(params, keys[perm], mask[perm])
    np.testing.assert_array_equal(adj_p, adj[perm])
    with pytest.raises(ValueError, match="num_steps"):
        process.sampler(num_steps=T + 1)


# ----------------------------------------------------------------------------
# Training


def test_jitted_steps_lower_the_loss():
    cfg = gaussian_test_config()
    cfg.model.ppgn.num_blocks = 1
    cfg.train.lr = 5e-3
    data = graphs_to_batch(generate_graphs("community_small", 8, seed=3), 20)
    model = model_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), 20)
    process = gaussian.from_config(cfg)
    loss_fn = process.loss
    mesh = make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1), 0.0)

    @jax.jit
    def fixed_loss(params):
        """Mean over 8 fixed key sets: the same t and noise before and after training."""
        def one(k):
            keys = jax.random.split(jax.random.key(k), data.adj.shape[0])
            return loss_fn(lambda a, m, t, b: model.apply(params, a, m, t, b), keys,
                           jnp.asarray(data.adj), jnp.asarray(data.node_mask)).loss
        return jnp.mean(jax.lax.map(one, jnp.arange(1000, 1008)))

    before = float(fixed_loss(state.params))
    G = data.adj.shape[0]
    adj = np.concatenate([data.adj, np.zeros_like(data.adj[:1])])
    mask = np.concatenate([data.node_mask, np.zeros_like(data.node_mask[:1])])
    state, losses = chunk(state, GraphBatch(adj, mask), np.tile(np.arange(G, dtype=np.int32), (40, 1)))
    after = float(fixed_loss(state.params))
    assert np.all(np.isfinite(losses)) and int(state.step) == 40
    assert after < 0.8 * before, (before, after)


def test_score_configs_load():
    from configs import paper

    for spec in ("ego_small,ppgn,score", "community_small,ppgn,score", "sbm_27,edp,score",
                 "planar_60,edp,score"):
        cfg = paper.get_config(spec)
        assert cfg.diffusion.kind == "gaussian" and cfg.diffusion.num_timesteps == 1000
        assert cfg.model.name == spec.split(",")[1]
        process = gaussian.from_config(cfg)
        assert process == process_from_config(cfg)
        assert isinstance(process, GaussianProcess) and process.num_timesteps == 1000
        assert process.schedule.num_timesteps == 1000


def test_from_config_reads_the_gaussian_keys():
    cfg = gaussian_test_config()
    p = gaussian.from_config(cfg)
    assert (p.schedule_name, p.num_timesteps, p.eta, p.clip_x0) == ("cosine", T, 1.0, True)
    cfg.diffusion.gaussian.eta = 0.0
    s = gaussian.from_config(cfg).sampler(3)
    assert (s.eta, s.clip_x0, s.num_steps) == (0.0, True, 3)
    assert s.info == {"process": "gaussian", "num_steps": 3, "eta": 0.0, "clip_x0": True}
    s = gaussian.from_config(cfg).sampler(3, eta=0.5, clip_x0=False)  # options override
    assert (s.eta, s.clip_x0) == (0.5, False)
    # A run config written before diffusion.gaussian existed gets the defaults.
    del cfg.diffusion["gaussian"]
    assert gaussian.from_config(cfg) == GaussianProcess("cosine", T, 1.0, True)
    with pytest.raises(ValueError, match="eta"):
        GaussianProcess(num_timesteps=T, eta=1.5)
    with pytest.raises(ValueError, match="eta"):
        GaussianProcess(num_timesteps=T).sampler(eta=-0.5)
    with pytest.raises(ValueError, match="num_timesteps >= 21"):
        GaussianProcess("linear", T)


# ----------------------------------------------------------------------------
# Annealed Langevin (sampler="langevin")


def test_langevin_levels_and_step_sizes():
    sched = gaussian.make_gaussian_schedule("cosine", 1000)
    c = gaussian.langevin_coefficients(sched, 62, num_levels=6, sigma_max=1.6, sigma_min=0.1,
                                       step_eps=0.005)
    levels = gaussian.langevin_levels(sched, 6, 1.6, 0.1)
    assert len(levels) == 6 and np.all(np.diff(levels) < 0)
    sig = gaussian.ve_sigma(sched)[levels]
    np.testing.assert_allclose(sig, np.geomspace(1.6, 0.1, 6), rtol=0.02)
    # 62 steps over 6 levels: 11, 11, 10, 10, 10, 10 in descending level order.
    np.testing.assert_array_equal(c.t, np.repeat(levels, [11, 11, 10, 10, 10, 10]))
    # Step size eps_l = eps sigma_l^2 / sigma_L^2 (adjacency units) = step_y / 4.
    step_y = (np.asarray(c.noise_std, np.float64)) ** 2
    np.testing.assert_allclose(step_y / 4, 0.005 * gaussian.ve_sigma(sched)[c.t] ** 2 / sig[-1] ** 2,
                               rtol=1e-5)
    # Coarse trained grids keep distinct levels only; K must cover them.
    assert len(gaussian.langevin_levels(gaussian.make_gaussian_schedule("cosine", 4), 6, 1.6,
                                        0.1)) < 6
    with pytest.raises(ValueError, match="num_steps >= its 6 levels"):
        gaussian.langevin_coefficients(sched, 5)


def test_langevin_with_an_exact_gaussian_score_reaches_the_target():
    """Target x0 ~ N(m, s^2) per real pair (signal units): the exact eps-prediction is
    eps = sigma_t (x_t - sqrt(ab_t) m) / (ab_t s^2 + sigma_t^2), so score_y = -(y - m) / v
    with v = s^2 + sigma_y^2. Discretised Langevin with step h then has the stationary
    law N(m, h / (1 - (1 - h / 2v)^2)), which the last level's 100 steps reach."""
    m, s = 0.3, 0.3
    sched = gaussian.make_gaussian_schedule("cosine", 1000)
    sab, sig = jnp.asarray(sched.sqrt_alpha_bar), jnp.asarray(sched.sigma)

    def exact(x_t, mask, t_index, sigma_t):
        a, sg = sab[t_index][:, None, None], sig[t_index][:, None, None]
        eps = sg * (x_t - a * m) / (a ** 2 * s ** 2 + sg ** 2)
        return jnp.where(edge_mask(mask), eps, 0.0)

    c = gaussian.langevin_coefficients(sched, 300, num_levels=3, sigma_max=0.8, sigma_min=0.1,
                                       step_eps=0.005)
    mask = jnp.asarray(node_mask_from_counts(np.full(64, 20), 20))
    y, _ = jax.jit(lambda k: gaussian.langevin_chain(exact, k, mask, c))(jax.random.key(1))
    vals = np.asarray(y)[np.asarray(pair_mask(mask))].astype(np.float64)
    sigma_y = 2 * gaussian.ve_sigma(sched)[c.t[-1]]
    v = s ** 2 + sigma_y ** 2
    h = float(c.noise_std[-1]) ** 2
    var_stationary = h / (1 - (1 - h / (2 * v)) ** 2)
    assert abs(vals.mean() - m) < 0.015
    np.testing.assert_allclose(vals.var(), var_stationary, rtol=0.05)
    np.testing.assert_allclose(vals.var(), v, rtol=0.1)  # the discretisation bias is ~4%


def test_langevin_sampler_valid_adjacency_and_per_graph_keys():
    model, params, process, counts, mask, keys = small_edp_sampling_setup()
    K = 2 * T + 3  # more updates than trained levels is fine for Langevin
    sampler = process.sampler(K, return_chain=True, sampler="langevin", num_levels=4)
    assert isinstance(sampler, gaussian.LangevinSampler) and sampler.info["sampler"] == "langevin"
    fn = compiled_sampler(model, sampler)
    adj, chain = fn(params, keys, mask)
    chex.assert_shape(adj, (6, 10, 10))
    assert_valid_adjacency(adj, counts)
    chex.assert_shape(chain, (6, K + 1, 10, 10))
    np.testing.assert_array_equal(chain[:, -1], adj)
    assert_valid_adjacency(chain.reshape(-1, 10, 10), np.repeat(counts, K + 1))
    # Deterministic per key; graph b depends only on keys[b] (permuted, and a smaller batch).
    np.testing.assert_array_equal(fn(params, keys, mask)[0], adj)
    perm = np.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_array_equal(fn(params, keys[perm], mask[perm])[0], adj[perm])
    np.testing.assert_array_equal(fn(params, keys[:2], mask[:2])[0], adj[:2])
    assert not np.array_equal(fn(params, keys[::-1], mask)[0][0], adj[0])


def test_langevin_sampler_options():
    process = GaussianProcess(num_timesteps=1000)
    assert isinstance(process.sampler(16), gaussian.GaussianSampler)
    assert isinstance(process.sampler(16, sampler="ddpm", eta=0.0), gaussian.GaussianSampler)
    s = process.sampler(None, sampler="langevin", step_eps=0.05, noise_scale=0.1)
    assert (s.num_steps, s.num_levels, s.step_eps, s.noise_scale) == (1000, 6, 0.05, 0.1)
    with pytest.raises(ValueError, match="ddpm sampler"):
        process.sampler(16, sampler="langevin", eta=0.0)
    with pytest.raises(ValueError, match="need sampler='langevin'"):
        process.sampler(16, num_levels=3)
    with pytest.raises(ValueError, match="unknown Gaussian sampler"):
        process.sampler(16, sampler="euler")
    with pytest.raises(ValueError, match="no option"):
        process.sampler(16, sampler="langevin", steps=3)
