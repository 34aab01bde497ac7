import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax import diffusion
from ddgjax.graphs import node_mask_from_counts, pair_mask
from ddgjax.schedules import make_schedule

T = 8


def random_batch(seed, counts, N, p=0.4):
    rng = np.random.default_rng(seed)
    B = len(counts)
    mask = node_mask_from_counts(np.asarray(counts), N)
    u = np.triu(rng.random((B, N, N)) < p, 1) & pair_mask(mask)
    adj = (u | np.swapaxes(u, 1, 2)).astype(np.float32)
    return jnp.asarray(adj), jnp.asarray(mask)


def brute_force_posterior(a_t, a0, bb_t, bb_prev):
    """Bayes from the 2x2 forward kernels in float64."""
    beta = (bb_t - bb_prev) / (1 - 2 * bb_prev)
    Q_step = np.array([[1 - beta, beta], [beta, 1 - beta]])
    Q_prev = np.array([[1 - bb_prev, bb_prev], [bb_prev, 1 - bb_prev]])
    Q_t = np.array([[1 - bb_t, bb_t], [bb_t, 1 - bb_t]])
    post = np.array([Q_step[k, a_t] * Q_prev[a0, k] for k in (0, 1)]) / Q_t[a0, a_t]
    return post


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_posterior_matches_bayes_float64(name):
    s = make_schedule(name, T)
    with jax.enable_x64(True):
        for t, a_t, a0 in itertools.product(range(1, T + 1), (0, 1), (0, 1)):
            bt, bp = s.beta_bar64[t], s.beta_bar64[t - 1]
            q0, q1 = diffusion.q_posterior_probs(jnp.float64(a_t), jnp.float64(a0),
                                                 jnp.float64(bt), jnp.float64(bp))
            assert q0.dtype == jnp.float64
            ref = brute_force_posterior(a_t, a0, bt, bp)
            np.testing.assert_allclose([q0, q1], ref, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(float(q0 + q1), 1.0, rtol=1e-14)


def test_posterior_four_cases_of_the_paper():
    s = make_schedule("linear", T)
    t = 5
    bt, bp = s.beta_bar64[t], s.beta_bar64[t - 1]
    b = s.beta64[t]
    expected = {(1, 1): (1 - b) * (1 - bp) / (1 - bt), (1, 0): (1 - b) * bp / bt,
                (0, 1): b * (1 - bp) / bt, (0, 0): b * bp / (1 - bt)}
    with jax.enable_x64(True):
        for (a_t, a0), v in expected.items():
            _, q1 = diffusion.q_posterior_probs(jnp.float64(a_t), jnp.float64(a0), bt, bp)
            np.testing.assert_allclose(float(q1), v, rtol=1e-12)


def test_p_prev_is_posterior_mixture():
    s = make_schedule("linear", T)
    logits = jnp.array([-3.0, -0.5, 0.0, 2.0])
    adj_t = jnp.array([0.0, 1.0, 1.0, 0.0])
    for t in range(1, T + 1):
        bt, bp = s.beta_bar[t], s.beta_bar[t - 1]
        p0, p1 = diffusion.p_prev_probs(logits, adj_t, bt, bp)
        pa1 = jax.nn.sigmoid(logits)
        _, q1_1 = diffusion.q_posterior_probs(adj_t, jnp.ones(4), bt, bp)
        _, q1_0 = diffusion.q_posterior_probs(adj_t, jnp.zeros(4), bt, bp)
        np.testing.assert_allclose(p1, pa1 * q1_1 + (1 - pa1) * q1_0, rtol=1e-6)
        np.testing.assert_allclose(p0 + p1, 1.0, rtol=1e-6)


def test_q_sample_flip_rate_matches_beta_bar():
    s = make_schedule("linear", T)
    adj, mask = random_batch(0, [40] * 8, 48)
    pm = np.asarray(pair_mask(mask))
    n_pairs = pm.sum()
    for t in (1, 3, T // 2, T):
        bb = s.beta_bar[t]
        rates = []
        for r in range(4):
            adj_t = diffusion.q_sample(jax.random.key(100 * t + r), adj, mask, jnp.full((8,), bb))
            adj_t = np.asarray(adj_t)
            np.testing.assert_array_equal(adj_t, np.swapaxes(adj_t, 1, 2))
            assert np.all(adj_t[~np.asarray(pair_mask(mask) | np.swapaxes(pm, 1, 2))] == 0)
            rates.append((adj_t != np.asarray(adj))[pm].mean())
        rate = np.mean(rates)
        sd = np.sqrt(bb * (1 - bb) / (4 * n_pairs))
        assert abs(rate - bb) < 5 * sd + 1e-9, (t, rate, bb)


def test_vb_terms_vanish_for_true_x0():
    s = make_schedule("linear", T)
    adj0, mask = random_batch(1, [10, 7, 12], 12)
    B = adj0.shape[0]
    for t in range(1, T + 1):
        bt = jnp.full((B,), s.beta_bar[t])
        bp = jnp.full((B,), s.beta_bar[t - 1])
        adj_t = diffusion.q_sample(jax.random.key(t), adj0, mask, bt)
        perfect = (2 * adj0 - 1) * 40.0  # one-hot p(A_0|A_t) up to e^-40
        terms = diffusion.vb_terms(perfect, adj0, adj_t, jnp.full((B,), t), bt, bp)
        assert float(jnp.max(jnp.abs(terms))) < 1e-6, t
        wrong = diffusion.vb_terms(-perfect, adj0, adj_t, jnp.full((B,), t), bt, bp)
        assert float(jnp.max(jnp.where(pair_mask(mask), wrong, 0.0))) > 1e-3


def test_training_loss_counts_only_real_upper_pairs():
    s = make_schedule("linear", T)
    adj0, mask = random_batch(2, [5, 9], 12)

    def constant(adj_t, node_mask, t, bb):
        return jnp.zeros_like(adj_t)  # p = 1/2 everywhere: each pair costs log 2 * weight

    for loss_type in ("simple", "vb"):
        out = diffusion.training_loss(constant, jax.random.key(0), adj0, mask, s, loss_type)
        chex.assert_shape(out.per_graph, (2,))
        np.testing.assert_array_equal(out.num_pairs, [10, 36])
        assert np.isfinite(float(out.loss))
    out = diffusion.training_loss(constant, jax.random.key(0), adj0, mask, s, "simple")
    w = diffusion.simple_weight(s.beta_bar[np.asarray(out.t_index)], T)
    np.testing.assert_allclose(out.per_graph, np.log(2) * w * np.array([10, 36]), rtol=1e-5)
    with pytest.raises(ValueError, match="unknown loss"):
        diffusion.training_loss(constant, jax.random.key(0), adj0, mask, s, "l2")
    with pytest.raises(ValueError, match="continuous_time"):
        diffusion.training_loss(constant, jax.random.key(0), adj0, mask, s, "vb", True)


def test_vb_loss_is_a_valid_bound_term():
    """KL terms of a constant model are non-negative."""
    s = make_schedule("linear", T)
    adj0, mask = random_batch(3, [8, 8, 8, 8], 8)
    logits = jnp.asarray(np.random.default_rng(0).normal(size=adj0.shape), jnp.float32)
    for t in range(1, T + 1):
        B = adj0.shape[0]
        bt, bp = jnp.full((B,), s.beta_bar[t]), jnp.full((B,), s.beta_bar[t - 1])
        adj_t = diffusion.q_sample(jax.random.key(t), adj0, mask, bt)
        terms = diffusion.vb_terms(logits, adj0, adj_t, jnp.full((B,), t), bt, bp)
        assert float(terms.min()) > -1e-6


def _check_valid(adj, counts):
    adj = np.asarray(adj)
    assert set(np.unique(adj)) <= {0.0, 1.0}
    np.testing.assert_array_equal(adj, np.swapaxes(adj, -1, -2))
    assert np.all(np.diagonal(adj, axis1=-2, axis2=-1) == 0)
    for a, n in zip(adj, counts):
        assert np.all(a[n:, :] == 0) and np.all(a[:, n:] == 0)


@pytest.mark.parametrize("algorithm", [1, 2])
@pytest.mark.parametrize("num_steps", [None, 3])
def test_samplers_give_valid_adjacency(algorithm, num_steps):
    s = make_schedule("linear", T)
    counts = np.array([1, 4, 9, 12, 2])
    mask = jnp.asarray(node_mask_from_counts(counts, 12))

    def denoise(adj_t, node_mask, t, bb):  # a fake model: "clean graph is a ring"
        n = adj_t.shape[-1]
        ring = jnp.roll(jnp.eye(n), 1, axis=1) + jnp.roll(jnp.eye(n), -1, axis=1)
        return jnp.broadcast_to(8.0 * ring - 4.0, adj_t.shape) + 0.0 * bb[:, None, None]

    fn = jax.jit(lambda k, m: diffusion.sample_graphs(denoise, k, m, s, algorithm, num_steps,
                                                      return_chain=True))
    adj0, chain = fn(jax.random.key(0), mask)
    K = T if num_steps is None else num_steps
    chex.assert_shape(chain, (K + 1, 5, 12, 12))
    _check_valid(adj0, counts)
    for c in chain:
        _check_valid(c, counts)
    np.testing.assert_array_equal(chain[-1], adj0)
    # A_T is ER(1/2); the denoiser pulls A_0 to the ring.
    ring_edges = np.asarray(adj0)[3][np.arange(11), np.arange(1, 12)]
    assert ring_edges.mean() > 0.8

    keys = jax.random.split(jax.random.key(1), 5)
    v = jax.jit(lambda k, m: diffusion.sample_graphs_vmapped(denoise, k, m, s, algorithm, num_steps))
    out = v(keys, mask)
    _check_valid(out, counts)
    # per-graph keys: sampling a sub-batch reproduces the same graphs
    np.testing.assert_array_equal(v(keys[1:3], mask[1:3]), np.asarray(out)[1:3])


def test_continuous_time_option_draws_levels_in_range():
    s = make_schedule("linear", T)
    adj0, mask = random_batch(4, [6] * 64, 6)

    def constant(adj_t, node_mask, t, bb):
        return jnp.zeros_like(adj_t) + 0.0 * bb[:, None, None]

    out = diffusion.training_loss(constant, jax.random.key(3), adj0, mask, s, "simple",
                                  continuous_time=True)
    t = np.asarray(out.t_index)
    assert t.min() >= 1 and t.max() <= T and len(np.unique(t)) > 3
    assert np.isfinite(float(out.loss))
