"""Step-unrolled training (``config.diffusion.unroll_prob``): the unrolled inputs are one
step of the configured sampler taken by the model itself, per graph from its own key,
without gradient; off, the loss is the plain one."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from ddgjax import training
from ddgjax.processes import bitflip, process_from_config
from ddgjax.processes.flip_schedules import make_schedule
from helpers import random_batch

T, N = 32, 12


def _spec(prob=1.0, steps=8, grid="power:3", algorithm=2, **levers):
    schedule = make_schedule("linear", T)
    t_lv, bb = bitflip.sampling_grid(schedule, steps, grid)
    return bitflip.UnrollSpec(prob, tuple(int(t) for t in t_lv), tuple(float(b) for b in bb),
                              algorithm, bitflip.SamplerLevers(**levers))


def _loss(denoise, keys, adj, nm, unroll=None, **kw):
    schedule = make_schedule("linear", T)
    return bitflip.training_loss(denoise, keys, jnp.asarray(adj), jnp.asarray(nm), schedule,
                                 "simple", True, 0.5, "power:2", unroll=unroll, **kw)


def _recording(calls, fn=None):
    def denoise(a, m, t, s, *est):
        calls.append((a, t, s))
        return (2.0 * a - 1.0) * 3.0 if fn is None else fn(a, m, t, s)
    return denoise


def test_off_is_the_plain_loss_and_on_calls_the_model_twice():
    adj, nm = random_batch(0, [N, N - 3, 9, N], N)
    keys = jax.random.split(jax.random.key(1), 4)
    plain_calls, off_calls, on_calls = [], [], []
    plain = _loss(_recording(plain_calls), keys, adj, nm)
    off = _loss(_recording(off_calls), keys, adj, nm, _spec(prob=0.0))
    assert len(plain_calls) == len(off_calls) == 1
    np.testing.assert_array_equal(np.asarray(off.loss), np.asarray(plain.loss))
    _loss(_recording(on_calls), keys, adj, nm, _spec(prob=1.0))
    assert len(on_calls) == 2


def test_unrolled_levels_are_consecutive_sampler_levels_and_coins_mix_the_plain_draw():
    spec = _spec(prob=0.5, steps=8)
    bb = np.asarray(spec.beta_bar, np.float32)
    B = 64
    adj, nm = random_batch(2, [N] * B, N)
    keys = jax.random.split(jax.random.key(3), B)
    calls = []
    _loss(_recording(calls), keys, adj, nm, spec)
    (_, t_first, s_first), (_, t_second, s_second) = calls
    s_first, s_second = np.asarray(s_first), np.asarray(s_second)
    # the unrolled step starts on one of the first K - 1 levels (never the step to 0)
    assert np.all(np.isin(s_first, bb[:-2]))
    k = np.searchsorted(-bb, -s_first)
    coins = np.asarray(bitflip.unroll_coins(keys, 0.5))
    assert 10 < coins.sum() < B - 10
    np.testing.assert_allclose(s_second[coins], bb[k + 1][coins], rtol=1e-6)
    assert np.all(bb[k + 1][coins] > 0)
    np.testing.assert_array_equal(np.asarray(t_second)[coins], np.asarray(spec.t_index)[k + 1][coins])
    # the other graphs keep the plain draw: the same level as without unrolling
    plain = []
    _loss(_recording(plain), keys, adj, nm)
    np.testing.assert_array_equal(s_second[~coins], np.asarray(plain[0][2])[~coins])
    np.testing.assert_array_equal(np.asarray(calls[1][0])[~coins],
                                  np.asarray(plain[0][0])[~coins])


def test_a_perfect_denoiser_unrolls_to_draws_of_q():
    """With logits that name A_0 exactly, Algorithm 2's step is a draw of q(A_s | A_0):
    each real pair differs from A_0 with probability beta_bar_s (uniform prior)."""
    spec = _spec(prob=1.0, steps=8, grid="uniform")
    B = 256
    adj0, nm = random_batch(4, [N] * B, N, p=0.3)
    oracle = lambda a, m, t, s: (2.0 * jnp.asarray(adj0) - 1.0) * 40.0
    keys = jax.random.split(jax.random.key(5), B)
    adj_s, t_s, bb_s = jax.jit(lambda k: bitflip.unrolled_inputs(
        oracle, k, jnp.asarray(adj0), jnp.asarray(nm), spec))(keys)
    adj_s, bb_s = np.asarray(adj_s), np.asarray(bb_s)
    np.testing.assert_array_equal(adj_s, np.swapaxes(adj_s, 1, 2))
    assert set(np.unique(adj_s)) <= {0.0, 1.0}
    iu = np.triu_indices(N, 1)
    flips = (adj_s != adj0)[:, iu[0], iu[1]].mean(axis=1)
    for level in np.unique(bb_s):
        rows = bb_s == level
        pairs = rows.sum() * len(iu[0])
        se = np.sqrt(level * (1 - level) / pairs)
        assert abs(flips[rows].mean() - level) < 5 * se + 1e-9, (level, flips[rows].mean())


def test_unrolled_inputs_are_per_graph_padding_free_and_follow_the_levers():
    spec = _spec(prob=1.0, steps=8, logit_scale=0.5)
    adj0, nm = random_batch(6, [N, 7, N - 1, 5, N], N)
    keys = jax.random.split(jax.random.key(7), 5)
    model = lambda a, m, t, s: (2.0 * a - 1.0) * 4.0 + s[:, None, None]
    run = jax.jit(lambda k, a, m: bitflip.unrolled_inputs(model, k, a, m, spec))
    adj_s, t_s, bb_s = (np.asarray(x) for x in run(keys, jnp.asarray(adj0), jnp.asarray(nm)))
    # zero on the diagonal and on every pair that touches padding
    assert not np.any(adj_s[:, np.arange(N), np.arange(N)])
    assert not np.any(adj_s * ~(nm[:, :, None] & nm[:, None, :]))
    # graph b depends only on its own key and graph
    sub = [np.asarray(x) for x in run(keys[1:3], jnp.asarray(adj0[1:3]), jnp.asarray(nm[1:3]))]
    np.testing.assert_array_equal(sub[0], adj_s[1:3])
    np.testing.assert_array_equal(sub[2], bb_s[1:3])
    # the step is the sampler's reverse_step with its levers, on the model's logits
    streams = jax.vmap(lambda k: jax.random.split(
        jax.random.fold_in(k, bitflip.UNROLL_STREAM), 3))(keys)
    bb = np.asarray(spec.beta_bar, np.float32)
    k = np.searchsorted(-bb, -bb_s) - 1
    for b in range(5):
        a_t = bitflip.q_sample(streams[b:b + 1, 1], jnp.asarray(adj0[b:b + 1]),
                               jnp.asarray(nm[b:b + 1]), jnp.asarray(bb[k[b]])[None])
        want = bitflip.reverse_step(model, streams[b, 2], a_t, jnp.asarray(nm[b:b + 1]),
                                    spec.t_index[k[b]], bb[k[b]], bb[k[b] + 1], 2,
                                    levers=spec.levers)
        np.testing.assert_array_equal(np.asarray(want)[0], adj_s[b])


def test_no_gradient_flows_through_the_unrolled_step():
    """The gradient equals that of the loss on the unrolled inputs held fixed."""
    spec = _spec(prob=1.0, steps=8)
    adj, nm = random_batch(8, [N] * 8, N)
    keys = jax.random.split(jax.random.key(9), 8)
    denoise = lambda w: (lambda a, m, t, s: w * (2.0 * a - 1.0) + w * w * s[:, None, None])
    loss = lambda w: _loss(denoise(w), keys, adj, nm, spec).loss
    fixed_inputs = bitflip.unrolled_inputs(denoise(1.5), keys, jnp.asarray(adj),
                                           jnp.asarray(nm), spec)

    def held(w):
        calls = []

        def den(a, m, t, s):
            calls.append(0)
            if len(calls) == 1:  # the unrolled step: replaced by the fixed result below
                return jnp.zeros_like(a)
            a_fixed, _, s_fixed = fixed_inputs
            return denoise(w)(a_fixed, m, t, s_fixed)
        return _loss(den, keys, adj, nm, spec).loss

    np.testing.assert_allclose(float(jax.grad(loss)(1.5)), float(jax.grad(held)(1.5)),
                               rtol=1e-5)
    assert float(jax.grad(loss)(1.5)) != 0.0


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="config.diffusion.unroll_prob"):
        _spec(prob=1.5)
    with pytest.raises(ValueError, match="config.sample.num_steps"):
        _spec(steps=1)
    schedule = make_schedule("linear", T)
    adj, nm = random_batch(0, [N] * 2, N)
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match="continuous time"):
        bitflip.training_loss(lambda a, m, t, s: a, keys, adj, nm, schedule, "simple", False,
                              unroll=_spec())
    cfg = test_config.get_config()
    cfg.diffusion.unroll_prob = 0.5
    with pytest.raises(ValueError, match="config.diffusion.unroll_prob.*continuous time"):
        process_from_config(cfg)
    cfg.diffusion.continuous_time = True
    cfg.model.ppgn.self_condition = True
    with pytest.raises(ValueError, match="config.diffusion.unroll_prob.*self-conditioning"):
        process_from_config(cfg)


def test_config_builds_the_sampler_step_and_training_runs(tmp_path):
    cfg = test_config.get_config()
    cfg.diffusion.continuous_time = True
    cfg.diffusion.unroll_prob = 0.5
    cfg.sample.num_steps = 6
    cfg.sample.grid = "power:3"
    cfg.sample.logit_scale = 0.9
    process = process_from_config(cfg)
    spec = process.unroll_spec
    t_lv, bb = bitflip.sampling_grid(process.schedule, 6, "power:3")
    assert spec.prob == 0.5 and spec.beta_bar == tuple(float(b) for b in bb)
    assert spec.t_index == tuple(int(t) for t in t_lv) and spec.levers.logit_scale == 0.9
    cfg.diffusion.unroll_prob = 0.0
    assert process_from_config(cfg).unroll_spec is None
    cfg.diffusion.unroll_prob = 0.5
    cfg.train.num_epochs = 2
    training.train(cfg, str(tmp_path / "u"), verbose=False)
    assert (tmp_path / "u" / "checkpoints").is_dir()
