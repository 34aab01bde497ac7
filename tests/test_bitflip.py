"""The bit-flip process (ddgjax.processes.bitflip): forward noise, posterior, reverse
model, losses and samplers, checked against float64 NumPy brute force and against
what a perfect denoiser must give (docs/method.md)."""
import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.graphs import edge_mask, node_mask_from_counts, pair_mask
from ddgjax.processes import BitFlipProcess, bitflip
from ddgjax.processes.bitflip import make_schedule

from helpers import random_batch

T = 8
B, N = 4, 12  # the small batch shape of this file (each new shape costs compiles)
BIG_COUNTS, BIG_N = [190], 200  # one big graph (17955 pairs) for the statistical tests


def batch(seed, counts, max_nodes=N, p=0.4):
    adj, mask = random_batch(seed, counts, max_nodes, p)
    return jnp.asarray(adj), jnp.asarray(mask)


def perfect_denoiser(adj0):
    """Logits of a one-hot ``p(A_0 | A_t)`` at a known ``adj0`` (``[B,N,N]`` or ``[N,N]``,
    broadcast): sigmoid(+-1e4) is exactly 1 / 0 in float32, so sampling from it is exact."""
    logits = (2.0 * jnp.asarray(adj0) - 1.0) * 1e4

    def fn(adj_t, node_mask, t_index, noise_level):
        return jnp.broadcast_to(logits, adj_t.shape) + 0.0 * noise_level[:, None, None]

    return fn


def brute_force_posterior(a_t, a0, bb_t, bb_prev):
    """Bayes from the 2x2 forward kernels in float64: ``[q(a_prev=0|.), q(a_prev=1|.)]``."""
    beta = (bb_t - bb_prev) / (1 - 2 * bb_prev)
    Q_step = np.array([[1 - beta, beta], [beta, 1 - beta]])
    Q_prev = np.array([[1 - bb_prev, bb_prev], [bb_prev, 1 - bb_prev]])
    Q_t = np.array([[1 - bb_t, bb_t], [bb_t, 1 - bb_t]])
    post = np.array([Q_step[k, a_t] * Q_prev[a0, k] for k in (0, 1)]) / Q_t[a0, a_t]
    return post


def brute_force_p_prev(logit, a_t, bb_t, bb_prev):
    """``p_theta(a_prev | A_t) = sum_a q(a_prev | a_t, a_0=a) p_theta(a_0=a | A_t)`` in float64,
    for one entry: ``[p(a_prev=0), p(a_prev=1)]``."""
    pi1 = 1.0 / (1.0 + np.exp(-np.float64(logit)))
    return (brute_force_posterior(a_t, 1, bb_t, bb_prev) * pi1
            + brute_force_posterior(a_t, 0, bb_t, bb_prev) * (1.0 - pi1))


def brute_force_kl(q, p):
    """KL(q || p) of two distributions over {0, 1}, float64, 0 log 0 = 0."""
    q, p = np.asarray(q, np.float64), np.asarray(p, np.float64)
    return float(sum(qk * np.log(qk / pk) for qk, pk in zip(q, p) if qk > 0))


# ----------------------------------------------------------------------------
# Posterior and reverse model


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_posterior_matches_bayes_float64(name):
    s = make_schedule(name, T)
    with jax.enable_x64(True):
        for t, a_t, a0 in itertools.product(range(1, T + 1), (0, 1), (0, 1)):
            bt, bp = s.beta_bar64[t], s.beta_bar64[t - 1]
            q0, q1 = bitflip.q_posterior_probs(jnp.float64(a_t), jnp.float64(a0),
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
            _, q1 = bitflip.q_posterior_probs(jnp.float64(a_t), jnp.float64(a0), bt, bp)
            np.testing.assert_allclose(float(q1), v, rtol=1e-12)


def test_p_prev_is_posterior_mixture():
    s = make_schedule("linear", T)
    logits = jnp.array([-3.0, -0.5, 0.0, 2.0])
    adj_t = jnp.array([0.0, 1.0, 1.0, 0.0])
    for t in range(1, T + 1):
        bt, bp = s.beta_bar[t], s.beta_bar[t - 1]
        p0, p1 = bitflip.p_prev_probs(logits, adj_t, bt, bp)
        pa1 = jax.nn.sigmoid(logits)
        _, q1_1 = bitflip.q_posterior_probs(adj_t, jnp.ones(4), bt, bp)
        _, q1_0 = bitflip.q_posterior_probs(adj_t, jnp.zeros(4), bt, bp)
        np.testing.assert_allclose(p1, pa1 * q1_1 + (1 - pa1) * q1_0, rtol=1e-6)
        np.testing.assert_allclose(p0 + p1, 1.0, rtol=1e-6)


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_p_prev_matches_brute_force_marginal_float64(name):
    """p_theta(a_prev | A_t) against the float64 marginal of the 2x2 Bayes posterior,
    for consecutive and strided level pairs, in float64 and in float32."""
    s = make_schedule(name, T)
    logits = np.array([-6.0, -3.0, -0.5, 0.0, 0.3, 2.0, 7.0])
    pairs = [(t, t - 1) for t in range(1, T + 1)] + [(T, 0), (6, 2), (T, 4)]
    for (t, r), a_t in itertools.product(pairs, (0, 1)):
        bt, bp = s.beta_bar64[t], s.beta_bar64[r]
        ref = np.stack([brute_force_p_prev(l, a_t, bt, bp) for l in logits], axis=1)
        with jax.enable_x64(True):
            p0, p1 = bitflip.p_prev_probs(jnp.asarray(logits),
                                          jnp.full(len(logits), a_t, jnp.float64),
                                          jnp.float64(bt), jnp.float64(bp))
            assert p1.dtype == jnp.float64
            np.testing.assert_allclose(np.stack([p0, p1]), ref, rtol=1e-12, atol=1e-15)
        p0, p1 = bitflip.p_prev_probs(jnp.asarray(logits, jnp.float32),
                                      jnp.full(len(logits), a_t, jnp.float32),
                                      jnp.float32(bt), jnp.float32(bp))
        np.testing.assert_allclose(np.stack([p0, p1]), ref, rtol=1e-5, atol=1e-6)


def test_binary_kl_hand_values():
    """KL(q || p), with q the first pair: q = (1/4, 3/4), p = (1/2, 1/2)."""
    q, p = (0.25, 0.75), (0.5, 0.5)
    kl_qp = 0.25 * np.log(0.25 / 0.5) + 0.75 * np.log(0.75 / 0.5)    # 0.1308
    kl_pq = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)      # 0.1438
    assert abs(kl_qp - kl_pq) > 0.01
    np.testing.assert_allclose(float(bitflip.binary_kl(*q, *p)), kl_qp, rtol=1e-6)
    np.testing.assert_allclose(float(bitflip.binary_kl(*p, *q)), kl_pq, rtol=1e-6)
    # 0 log 0 = 0: a certain q against a fair coin costs log 2; KL(q || q) = 0.
    np.testing.assert_allclose(float(bitflip.binary_kl(0.0, 1.0, 0.5, 0.5)), np.log(2), rtol=1e-6)
    np.testing.assert_allclose(float(bitflip.binary_kl(0.0, 1.0, 0.0, 1.0)), 0.0, atol=1e-7)
    np.testing.assert_allclose(float(bitflip.binary_kl(0.3, 0.7, 0.3, 0.7)), 0.0, atol=1e-7)


def test_vb_terms_match_brute_force_float64():
    """Per entry: KL(q(a_{t-1}|a_t,a_0) || p_theta(a_{t-1}|A_t)) for t >= 2 and
    -log p_theta(a_0|A_1) for t = 1, against float64 NumPy (the KL direction matters)."""
    s = make_schedule("linear", T)
    adj0, mask = batch(11, [12, 10, 7, 12])
    t_index = np.array([2, 5, T, 1], np.int32)
    bt, bp = s.beta_bar[t_index], s.beta_bar[t_index - 1]
    adj_t = bitflip.q_sample(jax.random.key(4), adj0, mask, jnp.asarray(bt))
    logits = np.random.default_rng(5).normal(scale=2.0, size=adj0.shape).astype(np.float32)
    terms = np.asarray(bitflip.vb_terms(jnp.asarray(logits), adj0, adj_t, jnp.asarray(bt),
                                        jnp.asarray(bp)))
    a0, at = np.asarray(adj0).astype(int), np.asarray(adj_t).astype(int)
    pm = np.asarray(pair_mask(mask))
    ref = np.zeros(terms.shape)
    for b, i, j in zip(*np.nonzero(pm)):
        t = t_index[b]
        l = np.float64(logits[b, i, j])
        if t == 1:
            ref[b, i, j] = np.logaddexp(0.0, l) - a0[b, i, j] * l  # -log p(a_0 | A_1)
        else:
            bb_t, bb_p = s.beta_bar64[t], s.beta_bar64[t - 1]
            q = brute_force_posterior(at[b, i, j], a0[b, i, j], bb_t, bb_p)
            p = brute_force_p_prev(l, at[b, i, j], bb_t, bb_p)
            ref[b, i, j] = brute_force_kl(q, p)
    assert (pm.sum((1, 2)) > 0).all() and (ref[pm] > 1e-3).mean() > 0.5
    np.testing.assert_allclose(terms[pm], ref[pm], rtol=1e-4, atol=1e-6)


def test_q_sample_flip_rate_matches_beta_bar():
    s = make_schedule("linear", T)
    adj, mask = batch(0, BIG_COUNTS, BIG_N)
    pm = np.asarray(pair_mask(mask))
    n_pairs = pm.sum()
    for t in (1, 3, T // 2, T):
        bb = s.beta_bar[t]
        rates = []
        for r in range(4):
            adj_t = bitflip.q_sample(jax.random.key(100 * t + r), adj, mask, jnp.full((1,), bb))
            adj_t = np.asarray(adj_t)
            np.testing.assert_array_equal(adj_t, np.swapaxes(adj_t, 1, 2))
            assert np.all(adj_t[~np.asarray(pair_mask(mask) | np.swapaxes(pm, 1, 2))] == 0)
            rates.append((adj_t != np.asarray(adj))[pm].mean())
        rate = np.mean(rates)
        sd = np.sqrt(bb * (1 - bb) / (4 * n_pairs))
        assert abs(rate - bb) < 5 * sd + 1e-9, (t, rate, bb)


# ----------------------------------------------------------------------------
# Losses


def test_vb_terms_vanish_for_true_x0():
    s = make_schedule("linear", T)
    adj0, mask = batch(1, [10, 7, 12, 3])
    for t in range(1, T + 1):
        bt = jnp.full((B,), s.beta_bar[t])
        bp = jnp.full((B,), s.beta_bar[t - 1])
        adj_t = bitflip.q_sample(jax.random.key(t), adj0, mask, bt)
        perfect = (2 * adj0 - 1) * 40.0  # one-hot p(A_0|A_t) up to e^-40
        terms = bitflip.vb_terms(perfect, adj0, adj_t, bt, bp)
        assert float(jnp.max(jnp.abs(terms))) < 1e-6, t
        wrong = bitflip.vb_terms(-perfect, adj0, adj_t, bt, bp)
        assert float(jnp.max(jnp.where(pair_mask(mask), wrong, 0.0))) > 1e-3


def test_vb_terms_reconstruct_wherever_the_previous_level_is_zero():
    """The reconstruction term is decided by the level, not the index: the last step of a
    strided grid (t = 4 -> 0) is -log p(a_0 | A_4); a step ending above 0 is a KL."""
    s = make_schedule("linear", T)
    adj0, mask = batch(2, [10, 7, 12, 3])
    bt = jnp.full((B,), s.beta_bar[4])
    adj_t = bitflip.q_sample(jax.random.key(0), adj0, mask, bt)
    logits = jnp.asarray(np.random.default_rng(1).normal(size=adj0.shape), jnp.float32)
    last = bitflip.vb_terms(logits, adj0, adj_t, bt, jnp.zeros((B,)))
    np.testing.assert_allclose(last, bitflip.binary_nll(logits, adj0), rtol=1e-6)
    bp = jnp.full((B,), s.beta_bar[2])
    inner = bitflip.vb_terms(logits, adj0, adj_t, bt, bp)
    b3 = lambda x: x[:, None, None]
    kl = bitflip.binary_kl(*bitflip.q_posterior_probs(adj_t, adj0, b3(bt), b3(bp)),
                           *bitflip.p_prev_probs(logits, adj_t, b3(bt), b3(bp)))
    np.testing.assert_allclose(inner, kl, rtol=1e-6)
    assert not np.allclose(inner, last)


def test_training_loss_counts_only_real_upper_pairs():
    s = make_schedule("linear", T)
    adj0, mask = batch(2, [5, 9, 12, 0])

    def constant(adj_t, node_mask, t, bb):
        return jnp.zeros_like(adj_t)  # p = 1/2 everywhere: each pair costs log 2 * weight

    for loss_type in ("simple", "vb"):
        out = bitflip.training_loss(constant, jax.random.key(0), adj0, mask, s, loss_type)
        chex.assert_shape(out.per_graph, (B,))
        np.testing.assert_array_equal(out.num_pairs, [10, 36, 66, 0])
        assert np.isfinite(float(out.loss))
    out = bitflip.training_loss(constant, jax.random.key(0), adj0, mask, s, "simple")
    w = bitflip.simple_weight(s.beta_bar[np.asarray(out.t_index)], T)
    np.testing.assert_allclose(out.per_graph, np.log(2) * w * np.array([10, 36, 66, 0]), rtol=1e-5)
    with pytest.raises(ValueError, match="unknown loss"):
        bitflip.training_loss(constant, jax.random.key(0), adj0, mask, s, "l2")
    with pytest.raises(ValueError, match="continuous_time"):
        bitflip.training_loss(constant, jax.random.key(0), adj0, mask, s, "vb", True)


def test_simple_weight_hand_values():
    """1 - 2 beta_bar + 1/T (Bond-Taylor et al. eq. 7), at hand-computed points."""
    cases = {8: [(0.0, 1.125), (0.5, 0.125), (0.25, 0.625)],
             100: [(0.0, 1.01), (0.5, 0.01), (0.3, 0.41)],
             1: [(0.0, 2.0), (0.5, 1.0)]}
    for num_timesteps, points in cases.items():
        bb, expected = np.array(points).T
        np.testing.assert_allclose(bitflip.simple_weight(jnp.asarray(bb, jnp.float32),
                                                         num_timesteps), expected, rtol=1e-6)
    # Linear schedule: the weight of level t is (T - t + 1) / T.
    s = make_schedule("linear", T)
    np.testing.assert_allclose(bitflip.simple_weight(s.beta_bar, T),
                               (T - np.arange(T + 1) + 1) / T, rtol=1e-6)


def constant_logit_case(c: float = 0.7):
    """A batch, a denoiser with logit ``c`` everywhere and, per graph, the unweighted NLL of
    its real strict upper pairs, ``sum (log(1 + e^c) - a_0 c)``: ``(schedule, adj0, mask,
    denoiser, pair mask, nll [B])``."""
    s = make_schedule("linear", T)
    adj0, mask = batch(6, [12, 9, 5, 1])

    def constant(adj_t, node_mask, t, bb):
        return jnp.full(adj_t.shape, c, jnp.float32)

    pm = np.asarray(pair_mask(mask))
    nll = np.where(pm, np.log1p(np.exp(c)) - np.asarray(adj0) * c, 0.0).sum((1, 2))
    return s, adj0, mask, constant, pm, nll


def test_training_loss_simple_by_hand():
    """L_simple of a constant-logit model, built from t_index without simple_weight:
    per pair (log(1 + e^c) - a_0 c) (T - t + 1) / T on the linear schedule."""
    s, adj0, mask, constant, pm, nll = constant_logit_case()
    seen = set()
    for k in range(3):
        out = bitflip.training_loss(constant, jax.random.key(10 + k), adj0, mask, s, "simple")
        t = np.asarray(out.t_index)
        seen.update(t.tolist())
        ref = nll * (T - t + 1) / T
        np.testing.assert_allclose(out.per_graph, ref, rtol=1e-5)
        np.testing.assert_allclose(out.loss, ref.sum() / pm.sum(), rtol=1e-5)
    assert len(seen) >= 4  # several levels, so a wrong weight cannot hide at one t


def test_training_loss_vb_end_to_end_against_brute_force():
    """L_vb as training_loss computes it: the denoiser sees A_t ~ q(A_t | A_0) at the drawn
    level with noise_level = beta_bar_t, and each graph's term is the float64 KL (or the
    reconstruction NLL at t = 1) summed over its real pairs."""
    s = make_schedule("linear", T)
    adj0, mask = batch(7, [12, 10, 7, 12])
    logits = np.random.default_rng(8).normal(size=adj0.shape).astype(np.float32)
    pm = np.asarray(pair_mask(mask))
    a0 = np.asarray(adj0).astype(int)
    for k in range(3):
        seen = {}

        def denoise(adj_t, node_mask, t, bb):
            seen.update(adj_t=np.asarray(adj_t), t=np.asarray(t), bb=np.asarray(bb))
            return jnp.asarray(logits)

        out = bitflip.training_loss(denoise, jax.random.key(20 + k), adj0, mask, s, "vb")
        t, at = seen["t"], seen["adj_t"].astype(int)
        np.testing.assert_array_equal(t, out.t_index)
        np.testing.assert_allclose(seen["bb"], s.beta_bar[t])
        assert not at[~(pm | np.swapaxes(pm, 1, 2))].any()
        ref = np.zeros(B)
        for b, i, j in zip(*np.nonzero(pm)):
            l = np.float64(logits[b, i, j])
            if t[b] == 1:
                ref[b] += np.logaddexp(0.0, l) - a0[b, i, j] * l
            else:
                bb_t, bb_p = s.beta_bar64[t[b]], s.beta_bar64[t[b] - 1]
                q = brute_force_posterior(at[b, i, j], a0[b, i, j], bb_t, bb_p)
                ref[b] += brute_force_kl(q, brute_force_p_prev(l, at[b, i, j], bb_t, bb_p))
        np.testing.assert_allclose(out.per_graph, ref, rtol=1e-4)


def t_index_draws(loss_fn, adj0, mask, num_keys=512):
    """``int[num_keys * B]`` levels drawn by ``loss_fn(key, adj0, mask).t_index`` over
    ``num_keys`` keys (one jitted vmap)."""
    keys = jax.random.split(jax.random.key(123), num_keys)
    draws = jax.jit(jax.vmap(lambda k: loss_fn(k, adj0, mask).t_index))(keys)
    return np.asarray(draws).ravel()


def constant_logits(adj_t, node_mask, t, bb):
    return jnp.zeros_like(adj_t) + 0.0 * bb[:, None, None]


def test_training_levels_are_uniform_on_1_to_T():
    """t ~ U{1..T}: level 0 (the data) is never drawn, level T is, all about equally often."""
    s = make_schedule("linear", T)
    adj0, mask = batch(9, [12, 9, 5, 1])
    t = t_index_draws(lambda k, a, m: bitflip.training_loss(constant_logits, k, a, m, s, "vb"),
                      adj0, mask)
    counts = np.bincount(t, minlength=T + 1)
    assert t.min() == 1 and t.max() == T, counts
    assert counts[0] == 0 and np.all(counts[1:] > 0)
    expected = len(t) / T
    assert np.all(np.abs(counts[1:] - expected) < 5 * np.sqrt(expected * (1 - 1 / T))), counts


def test_continuous_time_option_draws_levels_in_range():
    s = make_schedule("linear", T)
    adj0, mask = batch(4, [6] * 4)
    t = t_index_draws(lambda k, a, m: bitflip.training_loss(constant_logits, k, a, m, s,
                                                            "simple", continuous_time=True),
                      adj0, mask, num_keys=16)
    assert t.min() >= 1 and t.max() <= T and len(np.unique(t)) > 3
    out = bitflip.training_loss(constant_logits, jax.random.key(3), adj0, mask, s, "simple",
                                continuous_time=True)
    assert np.isfinite(float(out.loss))


# ----------------------------------------------------------------------------
# Samplers


def _check_valid(adj, counts):
    adj = np.asarray(adj)
    assert set(np.unique(adj)) <= {0.0, 1.0}
    np.testing.assert_array_equal(adj, np.swapaxes(adj, -1, -2))
    assert np.all(np.diagonal(adj, axis1=-2, axis2=-1) == 0)
    for a, n in zip(adj, counts):
        assert np.all(a[n:, :] == 0) and np.all(a[:, n:] == 0)


@pytest.mark.parametrize("algorithm", [1, 2])
def test_samplers_give_valid_adjacency(algorithm):
    """Every level of the chain is a 0/1 symmetric adjacency without self-loops or padding
    edges; the per-graph (vmapped) sampler of a sub-batch gives the same graphs."""
    s = make_schedule("linear", T)
    num_steps = 3
    counts = np.array([1, 4, 9, 12])
    mask = jnp.asarray(node_mask_from_counts(counts, N))

    def denoise(adj_t, node_mask, t, bb):  # a fake model: "clean graph is a ring"
        n = adj_t.shape[-1]
        ring = jnp.roll(jnp.eye(n), 1, axis=1) + jnp.roll(jnp.eye(n), -1, axis=1)
        return jnp.broadcast_to(8.0 * ring - 4.0, adj_t.shape) + 0.0 * bb[:, None, None]

    fn = jax.jit(lambda k, m: bitflip.sample_graphs(denoise, k, m, s, algorithm, num_steps,
                                                    return_chain=True))
    adj0, chain = fn(jax.random.key(0), mask)
    chex.assert_shape(chain, (num_steps + 1, B, N, N))
    _check_valid(adj0, counts)
    for c in chain:
        _check_valid(c, counts)
    np.testing.assert_array_equal(chain[-1], adj0)
    # A_T is ER(1/2); the denoiser pulls A_0 to the ring.
    ring_edges = np.asarray(adj0)[3][np.arange(11), np.arange(1, 12)]
    assert ring_edges.mean() > 0.8

    keys = jax.random.split(jax.random.key(1), B)
    v = jax.jit(lambda k, m: bitflip.sample_graphs_vmapped(denoise, k, m, s, algorithm, num_steps))
    out = v(keys, mask)
    _check_valid(out, counts)
    # per-graph keys: sampling a sub-batch reproduces the same graphs
    np.testing.assert_array_equal(v(keys[1:3], mask[1:3]), np.asarray(out)[1:3])


@pytest.mark.parametrize("algorithm", [1, 2])
def test_perfect_denoiser_samples_the_graph_exactly(algorithm):
    """A one-hot p(A_0 | A_t) at a known A_0 gives back A_0 exactly, from any A_T: the last
    step goes to level 0 where beta_bar = 0, so nothing is flipped. All T steps for the
    batch sampler, 3 strided steps for the per-graph one, 13 steps off the trained grid
    (continuous time) with one shared key."""
    s = make_schedule("linear", T)
    adj0, mask = batch(12, [12, 9, 5, 1], p=0.5)
    out, chain = jax.jit(lambda k: bitflip.sample_graphs(
        perfect_denoiser(adj0), k, mask, s, algorithm, None, return_chain=True))(
            jax.random.key(0))
    np.testing.assert_array_equal(out, adj0)
    assert np.any(np.asarray(chain[0]) != np.asarray(adj0))  # A_T is noise, not A_0
    # Per-graph keys (vmapped) through the process's sampler: one shared A_0, prefix masks.
    full = np.asarray(adj0[0])  # a 12-node graph; graph b is its first n_b nodes
    sampler = BitFlipProcess(num_timesteps=T).sampler(3, algorithm=algorithm)
    keys = jax.random.split(jax.random.key(1), B)
    out_v = jax.jit(lambda k, m: sampler(perfect_denoiser(full), k, m))(keys, mask)
    np.testing.assert_array_equal(out_v, full[None] * np.asarray(edge_mask(mask)))
    for grid in ("uniform", "power:3"):
        out = bitflip.sample_graphs(perfect_denoiser(adj0), jax.random.key(4), mask, s,
                                    algorithm, 13, grid=grid)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(adj0))


@pytest.mark.parametrize("algorithm", [1, 2])
def test_one_reverse_step_preserves_the_forward_marginal(algorithm):
    """A_t ~ q(A_t | A_0), one reverse step to s with a perfect denoiser: A_s ~ q(A_s | A_0),
    i.e. each real pair differs from A_0 with probability beta_bar_s. Given a_t, Algorithm 1
    follows the posterior q(a_s | a_t, a_0); Algorithm 2 forgets a_t (it re-noises A_0)."""
    s = make_schedule("linear", T)
    adj0, mask = batch(13, BIG_COUNTS, BIG_N)
    pm = np.asarray(pair_mask(mask))
    n_pairs = pm.sum()
    a0 = np.asarray(adj0)
    denoise = perfect_denoiser(adj0)
    for k, (t, r) in enumerate([(T, T - 1), (5, 4), (2, 1), (6, 2), (1, 0), (T, 0)]):
        bb_t, bb_s = s.beta_bar64[t], s.beta_bar64[r]
        key_t, key_s = jax.random.split(jax.random.key(50 + k))
        adj_t = bitflip.q_sample(key_t, adj0, mask, jnp.full((1,), bb_t, jnp.float32))
        adj_s = np.asarray(bitflip.reverse_step(denoise, key_s, adj_t, mask, t, s.beta_bar[t],
                                                s.beta_bar[r], algorithm))
        _check_valid(adj_s, BIG_COUNTS)
        flipped = (adj_s != a0)[pm]
        if r == 0:
            assert not flipped.any(), (t, r)
            continue
        se = np.sqrt(bb_s * (1 - bb_s) / n_pairs)
        assert abs(flipped.mean() - bb_s) < 4 * se, (algorithm, t, r, flipped.mean(), bb_s)
        # Given a_t != a_0: the posterior (Algorithm 1) or beta_bar_s again (Algorithm 2).
        moved = (np.asarray(adj_t) != a0)[pm]
        expected = (brute_force_posterior(1, 0, bb_t, bb_s)[1] if algorithm == 1 else bb_s)
        se = np.sqrt(expected * (1 - expected) / moved.sum())
        assert abs(flipped[moved].mean() - expected) < 4 * se, (algorithm, t, r)


# ----------------------------------------------------------------------------
# Sampling grids (the grids themselves: test_bitflip_schedules.py)


def test_off_grid_sampling_needs_continuous_time():
    with pytest.raises(ValueError, match="needs a model trained in continuous time"):
        BitFlipProcess(num_timesteps=T).sampler(4, grid="uniform")
    with pytest.raises(ValueError, match="needs a model trained in continuous time"):
        BitFlipProcess(num_timesteps=T, grid="power:2")
    cont = BitFlipProcess(num_timesteps=T, continuous_time=True)
    sampler = cont.sampler(50, grid="power:1.5")
    assert sampler.num_steps == 50 and sampler.grid == "power:1.5"
    assert hash(sampler) == hash(cont.sampler(50, grid="power:1.5"))
    assert sampler.info["grid"] == "power:1.5"
    assert BitFlipProcess(num_timesteps=T, continuous_time=True, grid="uniform").sampler(
        4).grid == "uniform"                                      # the process's default


# ----------------------------------------------------------------------------
# The marginal prior: A_T ~ ER(rho), entries kept with probability 1 - 2 beta_bar


RHO = 0.15


def marginal_kernel(keep, rho):
    """Float64 2x2 transition matrix ``Q[a, b] = q(next = b | now = a)``: keep the state
    with probability ``keep``, else redraw it from Bernoulli(rho)."""
    m = np.array([1.0 - rho, rho])
    return keep * np.eye(2) + (1.0 - keep) * np.ones((2, 1)) * m[None, :]


def brute_force_marginal_posterior(a_t, a0, bb_t, bb_prev, rho):
    alpha_t, alpha_prev = 1 - 2 * bb_t, 1 - 2 * bb_prev
    Q_step = marginal_kernel(alpha_t / alpha_prev, rho)
    Q_prev, Q_t = marginal_kernel(alpha_prev, rho), marginal_kernel(alpha_t, rho)
    np.testing.assert_allclose(Q_prev @ Q_step, Q_t, atol=1e-14)  # the kernels compose
    return np.array([Q_step[k, a_t] * Q_prev[a0, k] for k in (0, 1)]) / Q_t[a0, a_t]


@pytest.mark.parametrize("rho", [RHO, 0.5, 0.8])
def test_marginal_posterior_matches_bayes_float64(rho):
    s = make_schedule("linear", T)
    with jax.enable_x64(True):
        for t, a_t, a0 in itertools.product(range(1, T + 1), (0, 1), (0, 1)):
            bt, bp = s.beta_bar64[t], s.beta_bar64[t - 1]
            ref = brute_force_marginal_posterior(a_t, a0, bt, bp, rho)
            got = bitflip.q_posterior_probs(jnp.float64(a_t), jnp.float64(a0), jnp.float64(bt),
                                            jnp.float64(bp), rho + 0.0)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
            if rho == 0.5:  # the general formula is the paper's posterior at rho = 1/2
                np.testing.assert_allclose(ref, brute_force_posterior(a_t, a0, bt, bp),
                                           rtol=1e-12)
            logit = 0.7
            pi1 = 1 / (1 + np.exp(-logit))
            p_ref = (brute_force_marginal_posterior(a_t, 1, bt, bp, rho) * pi1
                     + brute_force_marginal_posterior(a_t, 0, bt, bp, rho) * (1 - pi1))
            p_got = bitflip.p_prev_probs(jnp.float64(logit), jnp.float64(a_t), jnp.float64(bt),
                                         jnp.float64(bp), rho)
            np.testing.assert_allclose(p_got, p_ref, rtol=1e-12)


def test_marginal_forward_process_rates_and_prior():
    s = make_schedule("linear", T)
    adj0, mask = batch(13, BIG_COUNTS, BIG_N)
    pm = np.asarray(pair_mask(mask))
    a0 = np.asarray(adj0)[pm]
    for t in (2, 5, T):
        alpha = 1 - 2 * s.beta_bar64[t]
        a_t = np.asarray(bitflip.q_sample(jax.random.key(t), adj0, mask,
                                          jnp.full((1,), s.beta_bar[t]), RHO))
        _check_valid(a_t, BIG_COUNTS)
        for value, expected in ((1, alpha + (1 - alpha) * RHO), (0, (1 - alpha) * RHO)):
            ones = a_t[pm][a0 == value]
            se = np.sqrt(expected * (1 - expected) / ones.size) + 1e-12
            assert abs(ones.mean() - expected) < 4 * se, (t, value, ones.mean(), expected)
    prior = np.asarray(bitflip.sample_prior(jax.random.key(0), mask, RHO))[pm]
    assert abs(prior.mean() - RHO) < 4 * np.sqrt(RHO * (1 - RHO) / prior.size)


@pytest.mark.parametrize("algorithm", [1, 2])
def test_marginal_prior_perfect_denoiser_and_one_step_marginal(algorithm):
    s = make_schedule("linear", T)
    adj0, mask = batch(13, BIG_COUNTS, BIG_N)
    out = bitflip.sample_graphs(perfect_denoiser(adj0), jax.random.key(2), mask, s, algorithm,
                                rho=RHO)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(adj0))
    pm = np.asarray(pair_mask(mask))
    a0 = np.asarray(adj0)[pm]
    for k, (t, r) in enumerate([(T, T - 1), (5, 2)]):
        kt, ks = jax.random.split(jax.random.key(70 + k))
        adj_t = bitflip.q_sample(kt, adj0, mask, jnp.full((1,), s.beta_bar[t]), RHO)
        adj_s = np.asarray(bitflip.reverse_step(perfect_denoiser(adj0), ks, adj_t, mask, t,
                                                s.beta_bar[t], s.beta_bar[r], algorithm,
                                                rho=RHO))[pm]
        alpha = 1 - 2 * s.beta_bar64[r]
        for value, expected in ((1, alpha + (1 - alpha) * RHO), (0, (1 - alpha) * RHO)):
            got = adj_s[a0 == value]
            se = np.sqrt(expected * (1 - expected) / got.size)
            assert abs(got.mean() - expected) < 4 * se, (algorithm, t, r, value)


def test_marginal_vb_terms_vanish_for_true_x0():
    s = make_schedule("linear", T)
    adj0, mask = batch(3, [12, 10, 7, 4])
    logits = (2.0 * adj0 - 1.0) * 1e4
    for t in range(2, T + 1):
        adj_t = bitflip.q_sample(jax.random.key(t), adj0, mask, jnp.full((B,), s.beta_bar[t]),
                                 RHO)
        terms = bitflip.vb_terms(logits, adj0, adj_t, jnp.full((B,), s.beta_bar[t]),
                                 jnp.full((B,), s.beta_bar[t - 1]), RHO)
        assert float(jnp.abs(jnp.where(pair_mask(mask), terms, 0.0)).max()) < 1e-5


def test_fit_to_data_sets_the_density_of_the_marginal_prior():
    from configs import test as test_config
    from ddgjax.processes import fit_to_data, process_from_config

    adj0, mask = batch(3, [12, 10, 7, 4])
    cfg = test_config.get_config()
    assert fit_to_data(cfg, adj0, mask) is cfg  # uniform prior: nothing to fit
    assert process_from_config(cfg).prior_density == 0.5
    cfg.diffusion.prior = "marginal"
    with pytest.raises(ValueError, match="config.diffusion.prior_density"):
        process_from_config(cfg)
    fitted = fit_to_data(cfg, np.asarray(adj0), np.asarray(mask))
    pm = np.asarray(pair_mask(mask))
    expected = np.asarray(adj0)[pm].mean()
    assert fitted.diffusion.prior_density == pytest.approx(expected)
    assert cfg.diffusion.prior_density == 0.0  # the caller's config is left alone
    assert process_from_config(fitted).prior_density == pytest.approx(expected)
    cfg.diffusion.prior = "sparse"
    with pytest.raises(ValueError, match="config.diffusion.prior: expected one of"):
        process_from_config(cfg)
    with pytest.raises(ValueError, match="prior_density: expected a value in"):
        BitFlipProcess(prior_density=1.0)


def test_renoise_mix_mixes_the_two_algorithms_per_pair():
    """renoise_mix m: each pair of an Algorithm 1 step is Bernoulli of
    (1 - m) p_theta(a_{t-1} = 1 | A_t) + m q(a_{t-1} = 1 | a_0 ~ p_theta), checked
    against the empirical frequency over many pairs; m = 0 is Algorithm 1 exactly."""
    n, b, rho = 64, 16, 0.1
    mask = jnp.ones((b, n), bool)
    adj_t = jnp.zeros((b, n, n))
    logit = float(np.log(0.7 / 0.3))
    den = lambda a, m, t, bb: jnp.full(a.shape, logit)
    bt, bp = 0.3, 0.2
    _, p1 = bitflip.p_prev_probs(jnp.asarray(logit), jnp.asarray(0.0), jnp.asarray(bt),
                                 jnp.asarray(bp), rho)
    renoised = bitflip.q_marginal_prob1(0.7, bp, rho)
    pm = np.asarray(pair_mask(mask))
    key = jax.random.key(8)
    for m in (0.0, 0.5, 1.0):
        out = bitflip.reverse_step(den, key, adj_t, mask, 3, bt, bp, 1, rho=rho,
                                   levers=bitflip.SamplerLevers(renoise_mix=m))
        freq = float(np.asarray(out)[pm].mean())
        expected = (1 - m) * float(p1) + m * renoised
        assert abs(freq - expected) < 0.015, (m, freq, expected)
    np.testing.assert_array_equal(
        bitflip.reverse_step(den, key, adj_t, mask, 3, bt, bp, 1, rho=rho,
                             levers=bitflip.SamplerLevers(renoise_mix=0.0)),
        bitflip.reverse_step(den, key, adj_t, mask, 3, bt, bp, 1, rho=rho))
    with pytest.raises(ValueError, match="renoise_mix: expected a probability"):
        BitFlipProcess(num_timesteps=T).sampler(4, algorithm=1, renoise_mix=1.5)
    with pytest.raises(ValueError, match="renoise_mix"):
        bitflip.SamplerLevers(renoise_mix=-0.1)


def test_renoise_mix_outside_algorithm_1_is_refused():
    """renoise_mix acts only in Algorithm 1 steps: a sampler, a process default, the chain
    and a completion that run Algorithm 2 refuse it by name instead of ignoring it."""
    proc = BitFlipProcess(num_timesteps=T)
    assert proc.sampler(4, algorithm=1, renoise_mix=0.5).levers.renoise_mix == 0.5
    with pytest.raises(ValueError, match="renoise_mix: acts only in Algorithm 1 steps"):
        proc.sampler(4, algorithm=2, renoise_mix=0.5)
    with pytest.raises(ValueError, match="config.sample.renoise_mix: acts only"):
        BitFlipProcess(num_timesteps=T, algorithm=2, renoise_mix=0.5)
    adj, mask = batch(0, [5, 7])
    with pytest.raises(ValueError, match="renoise_mix: acts only"):
        bitflip.sample_graphs(lambda a, *_: jnp.zeros_like(a), jax.random.key(0), mask,
                              make_schedule("linear", T), 2, 4,
                              levers=bitflip.SamplerLevers(renoise_mix=0.5))
    from ddgjax.processes.bitflip import inpainting
    sampler = proc.sampler(4, algorithm=1, renoise_mix=0.5)
    sampler = type(sampler)(proc, 4, 2, levers=sampler.levers)     # built past the check
    with pytest.raises(ValueError, match="renoise_mix: acts only"):
        inpainting.complete_graphs(lambda a, *_: jnp.zeros_like(a), jax.random.key(0), adj,
                                   jnp.zeros_like(adj, dtype=bool), mask, sampler)


def test_logit_scale_is_a_scaled_denoiser():
    adj0, mask = batch(13, [12, 9, 5, 3])
    s = make_schedule("linear", T)
    den = lambda a, m, t, b: 0.8 * (2 * a - 1) - 0.2
    key = jax.random.key(2)
    for alg in (1, 2):
        scaled = bitflip.sample_graphs(den, key, mask, s, alg, T,
                                       levers=bitflip.SamplerLevers(logit_scale=2.5))
        by_hand = bitflip.sample_graphs(lambda *x: 2.5 * den(*x), key, mask, s, alg, T)
        np.testing.assert_array_equal(scaled, by_hand)
    with pytest.raises(ValueError, match="logit_scale"):
        BitFlipProcess(num_timesteps=T).sampler(4, logit_scale=0.0)
    info = BitFlipProcess(num_timesteps=T).sampler(4, algorithm=1, logit_scale=2.0,
                                                   renoise_mix=0.25).info
    assert info["logit_scale"] == 2.0 and info["renoise_mix"] == 0.25


def test_training_grid_distorts_continuous_levels():
    """train_grid "power:G" draws beta_bar = u^G / 2: the median level is 0.5^G / 2."""
    u = jnp.linspace(0.0, 1.0, 11)
    np.testing.assert_allclose(bitflip.training_levels(u, "uniform"), u / 2, rtol=1e-6)
    np.testing.assert_allclose(bitflip.training_levels(u, "power:2"), u ** 2 / 2, rtol=1e-6)
    with pytest.raises(ValueError, match="training grid"):
        bitflip.training_levels(u, "trained")
    s = make_schedule("linear", 128)
    adj0, mask = batch(4, [6] * 4)
    loss = lambda grid: (lambda k, a, m: bitflip.training_loss(
        constant_logits, k, a, m, s, "simple", continuous_time=True, train_grid=grid))
    t_uniform = t_index_draws(loss("uniform"), adj0, mask, num_keys=256)
    t_power = t_index_draws(loss("power:3"), adj0, mask, num_keys=256)
    # level index ~ 256 bb: median 64 (uniform) vs 256 * 0.5^3 / 2 = 16 (power:3)
    assert 54 < np.median(t_uniform) < 74 and 10 < np.median(t_power) < 22
    with pytest.raises(ValueError, match="config.diffusion.train_grid.*continuous_time"):
        BitFlipProcess(train_grid="power:2")
    for bad in ("cubic", "mid:2", "power:0"):
        with pytest.raises(ValueError, match="config.diffusion.train_grid: expected"):
            BitFlipProcess(continuous_time=True, train_grid=bad)
    assert BitFlipProcess(continuous_time=True, train_grid="power:2").train_grid == "power:2"


@pytest.mark.parametrize("rho", [RHO, 0.5])
def test_posterior_at_tiny_levels_in_float32(rho):
    """At beta_bar ~ 1e-8, where float32 rounds 1 - 2 beta_bar to 1, the float32 posterior
    and p_theta(a_{t-1} | A_t) stay finite and match float64 Bayes (they were 0/0 when
    1 - alpha was formed by cancellation; a power:5 grid of 32 steps reaches 1.5e-8)."""
    for bt, bp in ((1.5e-8, 0.0), (5e-7, 1.5e-8), (3e-6, 5e-7)):
        for a_t, a0 in itertools.product((0, 1), (0, 1)):
            ref = brute_force_marginal_posterior(a_t, a0, bt, bp, rho)
            got = np.asarray(bitflip.q_posterior_probs(
                jnp.float32(a_t), jnp.float32(a0), jnp.float32(bt), jnp.float32(bp), rho))
            assert np.all(np.isfinite(got)), (bt, bp, a_t, a0, got)
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-6)
            p = np.asarray(bitflip.p_prev_probs(jnp.float32(3.0), jnp.float32(a_t),
                                                jnp.float32(bt), jnp.float32(bp), rho))
            assert np.all(np.isfinite(p)) and abs(p.sum() - 1) < 1e-5
        np.testing.assert_allclose(bitflip.q_marginal_prob1(0.0, jnp.float32(bt), rho),
                                   2 * bt * rho, rtol=1e-5)


def test_from_config_reads_the_process_and_its_sampler_defaults():
    """from_config: the diffusion keys and the config.sample defaults of the sampler
    (algorithm 0: by loss); a run config recorded without the sampler keys gets the
    defaults."""
    import ml_collections

    from configs import test as test_config
    cfg = test_config.get_config()
    cfg.diffusion.continuous_time = True
    cfg.diffusion.train_grid = "power:2"
    cfg.sample.update(algorithm=1, grid="power:3", renoise_mix=0.7, logit_scale=0.9)
    p = bitflip.from_config(cfg)
    assert (p.continuous_time, p.train_grid, p.algorithm, p.grid) == (True, "power:2", 1,
                                                                       "power:3")
    assert p.levers == bitflip.SamplerLevers(renoise_mix=0.7, logit_scale=0.9)
    s = p.sampler(16)
    assert (s.algorithm, s.grid, s.levers) == (1, "power:3", p.levers)
    assert p.sampler(16, logit_scale=1.2).levers.logit_scale == 1.2     # options override
    old = ml_collections.ConfigDict({"diffusion": {"num_timesteps": 8, "loss": "vb"},
                                     "sample": {"algorithm": 0}})
    p = bitflip.from_config(old)
    assert (p.algorithm, p.grid, p.levers, p.prior_density) == (1, "trained",
                                                                bitflip.SamplerLevers(), 0.5)

