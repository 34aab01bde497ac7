"""Self-conditioning (PPGN ``self_condition``): the estimate channel, the two-pass training
loss and the sampler that carries the previous estimate."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from ddgjax.configuration import ConfigError, validate_config
from ddgjax.models import build_model
from ddgjax.processes import bitflip
from ddgjax.processes.flip_schedules import make_schedule
from helpers import random_batch
from test_models import noise_inputs, pad_to, random_params

T, N = 8, 8


def _model_and_params():
    model = build_model("ppgn", T, hidden=8, num_blocks=2, self_condition=True)
    return model, random_params(model)


def test_estimate_channel_is_equivariant_padding_free_and_reaches_the_logits():
    model, params = _model_and_params()
    assert params["params"]["embed"]["kernel"].shape[0] == 3  # adj, level, estimate
    apply = jax.jit(model.apply)
    adj, nm = random_batch(5, [N, N - 2, 5], N)
    t, level = noise_inputs(3, seed=2)
    est = np.random.default_rng(0).random((3, N, N)).astype(np.float32)
    est = (est + est.transpose(0, 2, 1)) / 2
    out = np.asarray(apply(params, adj, nm, t, level, est))
    # None is the zero estimate; another estimate gives other logits
    np.testing.assert_array_equal(np.asarray(apply(params, adj, nm, t, level)),
                                  np.asarray(apply(params, adj, nm, t, level,
                                                   np.zeros_like(est))))
    assert np.max(np.abs(np.asarray(apply(params, adj, nm, t, level)) - out)) > 1e-3
    # permutation equivariance, the estimate permuted with the graph
    perm = np.random.default_rng(1).permutation(N - 2)
    adj_p, est_p = np.array(adj), est.copy()
    adj_p[1, :N - 2, :N - 2] = adj_p[1][np.ix_(perm, perm)]
    est_p[1, :N - 2, :N - 2] = est[1][np.ix_(perm, perm)]
    out_p = np.asarray(apply(params, adj_p, nm, t, level, est_p))
    np.testing.assert_allclose(out_p[1, :N - 2, :N - 2], out[1][np.ix_(perm, perm)],
                               rtol=1e-4, atol=1e-4)
    # the estimate's values on the diagonal and on padding pairs are not read
    est_junk = est.copy()
    est_junk[:, np.arange(N), np.arange(N)] = 0.7
    est_junk[1, N - 2:, :] = est_junk[1, :, N - 2:] = 0.9
    np.testing.assert_allclose(np.asarray(apply(params, adj, nm, t, level, est_junk)), out,
                               rtol=1e-6, atol=1e-6)
    adj2, nm2 = pad_to(np.asarray(adj), np.asarray(nm), N + 3)
    est2 = np.zeros((3, N + 3, N + 3), np.float32)
    est2[:, :N, :N] = est
    est2[:, N:, :] = 0.5
    out2 = np.asarray(apply(params, adj2, nm2, t, level, est2))
    np.testing.assert_allclose(out2[:, :N, :N], out, rtol=1e-5, atol=1e-5)
    # an input: no gradient flows into it
    grad = jax.grad(lambda e: model.apply(params, adj, nm, t, level, e).sum())(est)
    assert not np.any(np.asarray(grad))


def test_estimate_errors_name_the_option_and_the_shape():
    plain = build_model("ppgn", T, hidden=8, num_blocks=2)
    params = random_params(plain)
    adj, nm = random_batch(5, [N, N, N], N)
    t, level = noise_inputs(3)
    with pytest.raises(ValueError, match="self_condition"):
        plain.apply(params, adj, nm, t, level, np.zeros((3, N, N), np.float32))
    model, params = _model_and_params()
    with pytest.raises(ValueError, match=r"x0_estimate must be \[B, N, N\]"):
        model.apply(params, adj, nm, t, level, np.zeros((3, N, N - 1), np.float32))


def _recording_denoiser(calls):
    """A denoiser whose logits are a fixed function of its inputs; ``calls`` gets the
    number of arguments and the estimate of each call (at trace time)."""
    def denoise(a, m, t, s, *est):
        calls.append(est)
        return (2.0 * a - 1.0) * (1.0 + s[:, None, None]) + (est[0] if est else 0.0)
    return denoise


def test_training_loss_runs_twice_and_feeds_half_the_graphs_the_first_estimate():
    schedule = make_schedule("linear", T)
    adj, nm = random_batch(3, [N] * 16, N)
    keys = jax.random.split(jax.random.key(4), 16)
    plain_calls, calls = [], []
    plain = bitflip.training_loss(_recording_denoiser(plain_calls), keys, adj, nm, schedule)
    assert len(plain_calls) == 1 and plain_calls[0] == ()
    off = bitflip.training_loss(_recording_denoiser([]), keys, adj, nm, schedule,
                                self_condition=False)
    np.testing.assert_array_equal(np.asarray(off.loss), np.asarray(plain.loss))
    bitflip.training_loss(_recording_denoiser(calls), keys, adj, nm, schedule,
                          self_condition=True)
    assert len(calls) == 2 and calls[0] == () and len(calls[1]) == 1
    # the estimate of the second call: sigmoid of the first for the coin's graphs, else 0
    coins = np.asarray(bitflip.self_condition_coins(keys))
    assert 0 < coins.sum() < 16
    # rebuild the first call's logits from the same noised graphs
    u_t, key_noise = bitflip.per_graph_time_and_noise_keys(keys)
    t_index = bitflip.uniform_timestep(u_t, T)
    bb = jnp.asarray(schedule.beta_bar)[t_index]
    adj_t = bitflip.q_sample(key_noise, jnp.asarray(adj), jnp.asarray(nm), bb)
    first = (2.0 * adj_t - 1.0) * (1.0 + bb[:, None, None])
    want = np.asarray(jax.nn.sigmoid(first)) * coins[:, None, None]
    got = np.asarray(jax.jit(lambda k: _second_estimate_for(
        _recording_denoiser([]), k, jnp.asarray(adj), jnp.asarray(nm), schedule))(keys))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # a graph's coin depends only on its own key
    np.testing.assert_array_equal(np.asarray(bitflip.self_condition_coins(keys[3:5])),
                                  coins[3:5])


def test_training_loss_has_no_gradient_through_the_first_pass():
    """The gradient equals that of the second call alone with the estimate held fixed."""
    schedule = make_schedule("linear", T)
    adj, nm = random_batch(7, [N] * 8, N)
    keys = jax.random.split(jax.random.key(9), 8)

    def denoise_with(w, fixed=None):
        def denoise(a, m, t, s, *est):
            e = est[0] if est else 0.0
            if fixed is not None and est:
                e = fixed
            return w * (2.0 * a - 1.0) + 3.0 * e
        return denoise

    loss = lambda w: bitflip.training_loss(denoise_with(w), keys, adj, nm, schedule,
                                           self_condition=True).loss
    est = _second_estimate_for(denoise_with(1.5), keys, adj, nm, schedule)
    fixed = lambda w: bitflip.training_loss(denoise_with(w, est), keys, adj, nm, schedule,
                                            self_condition=True).loss
    np.testing.assert_allclose(float(jax.grad(loss)(1.5)), float(jax.grad(fixed)(1.5)),
                               rtol=1e-6)


def _second_estimate_for(denoise, keys, adj, nm, schedule):
    seen = []

    def spy(a, m, t, s, *est):
        if est:
            seen.append(est[0])
        return denoise(a, m, t, s, *est)

    bitflip.training_loss(spy, keys, adj, nm, schedule, self_condition=True)
    return jax.lax.stop_gradient(seen[0])


def _switch_denoiser(threshold=0.0):
    """Logits -20 everywhere while the estimate is at most ``threshold``, +20 once above."""
    def denoise(a, m, t, s, *est):
        on = (jnp.max(est[0]) > threshold) if est else False
        return jnp.where(on, 20.0, -20.0) * jnp.ones_like(a)
    return denoise


@pytest.mark.parametrize("per_graph", [True, False])
def test_sampler_feeds_each_call_the_previous_estimate(per_graph):
    """With argmax at the last step, the result is the empty graph when every call sees
    a zero estimate and the complete graph when the second call sees the first's
    sigmoid(logits) (the raw ones: a logit scale does not change the estimate)."""
    schedule = make_schedule("linear", T)
    _, nm = random_batch(1, [N, N - 3], N)
    nm = jnp.asarray(nm)
    key = jax.random.split(jax.random.key(0), 2) if per_graph else jax.random.key(0)
    real = np.asarray(nm)[:, :, None] & np.asarray(nm)[:, None, :]
    real &= ~np.eye(N, dtype=bool)[None]
    run = lambda **kw: np.asarray(bitflip.sample_graphs(
        _switch_denoiser(), key, nm, schedule, algorithm=2, num_steps=2, argmax_last=True,
        **kw))
    assert run(self_condition=False).sum() == 0
    full = run(self_condition=True)
    np.testing.assert_array_equal(full.astype(bool), real)
    # the estimate is sigmoid(-20) ~ 2e-9, below a threshold of 1e-6, if it is taken
    # before the logit scale; after a scale of 0.5 it would be 4.5e-5, above
    scaled = np.asarray(bitflip.sample_graphs(
        _switch_denoiser(threshold=1e-6), key, nm, schedule, algorithm=2, num_steps=2, argmax_last=True,
        self_condition=True, logit_scale=0.5))
    assert scaled.sum() == 0
    with_final = np.asarray(bitflip.sample_graphs(
        _switch_denoiser(), key, nm, schedule, algorithm=2, num_steps=1,
        argmax_last=True, final_pass=True, self_condition=True))
    np.testing.assert_array_equal(with_final.astype(bool), real)  # the final pass sees it too


def test_sampler_chain_with_self_condition_ends_in_the_sample():
    schedule = make_schedule("linear", T)
    _, nm = random_batch(2, [N, N - 2], N)
    keys = jax.random.split(jax.random.key(3), 2)
    out, chain = bitflip.sample_graphs(_switch_denoiser(), keys, jnp.asarray(nm), schedule,
                                       algorithm=2, num_steps=3, return_chain=True,
                                       argmax_last=True, self_condition=True)
    assert chain.shape == (4, 2, N, N)
    np.testing.assert_array_equal(np.asarray(chain[-1]), np.asarray(out))
    assert np.asarray(out).sum() > 0  # the estimate reached the later calls


def test_config_checks():  # resume refusal: tests/test_faults.py
    cfg = test_config.get_config()
    cfg.model.ppgn.self_condition = True
    validate_config(cfg)
    from ddgjax.processes import process_from_config
    assert process_from_config(cfg).self_condition
    edp = cfg.copy_and_resolve_references()
    edp.model.name = "edp"
    with pytest.raises(ConfigError, match="self_condition"):
        validate_config(edp)
    gauss = cfg.copy_and_resolve_references()
    gauss.diffusion.kind = "gaussian"
    with pytest.raises(ConfigError, match="self_condition"):
        validate_config(gauss)


def test_self_conditioned_training_and_sampling_end_to_end(tmp_path):
    from ddgjax import training
    from ddgjax.sampling import generate, load_run
    cfg = test_config.get_config()
    cfg.model.ppgn.self_condition = True
    cfg.train.num_epochs = 2
    cfg.train.checkpoint_every_epochs = 1
    summary = training.train(cfg, str(tmp_path / "run"), verbose=False)
    assert summary["epochs"] == 2 and np.isfinite(summary["best_loss"])
    run = load_run(str(tmp_path / "run"))
    assert run.process.self_condition
    res = generate(run, 4, seed=0, batch_size=4, num_steps=4)
    assert res["adj"].shape[0] == 4 and res["sampler"]["self_condition"] is True
