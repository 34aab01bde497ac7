"""PPGN dropout (``model.ppgn.dropout``): only in training steps, from the step's key."""
import jax
import numpy as np
import pytest

from configs import test as test_config
from ddgjax import training
from ddgjax.configuration import ConfigError, validate_config
from ddgjax.models import build_model
from ddgjax.parallel import make_mesh
from helpers import random_batch
from test_models import noise_inputs, random_params
from test_training import run_chunk, tiny_setup

T, N = 8, 8


def test_dropout_acts_only_when_asked_and_adds_no_parameters():
    plain = build_model("ppgn", T, hidden=8, num_blocks=2)
    drop = build_model("ppgn", T, hidden=8, num_blocks=2, dropout=0.5)
    params = random_params(plain)
    assert jax.tree_util.tree_structure(random_params(drop)) == \
        jax.tree_util.tree_structure(params)
    adj, nm = random_batch(4, [N, N - 1], N)
    t, level = noise_inputs(2)
    want = np.asarray(plain.apply(params, adj, nm, t, level))
    np.testing.assert_array_equal(np.asarray(drop.apply(params, adj, nm, t, level)), want)
    train = lambda k: np.asarray(drop.apply(params, adj, nm, t, level, deterministic=False,
                                            rngs={"dropout": jax.random.key(k)}))
    assert np.max(np.abs(train(0) - want)) > 1e-3
    np.testing.assert_array_equal(train(0), train(0))
    assert np.max(np.abs(train(0) - train(1))) > 1e-3
    with pytest.raises(ValueError, match="config.model.ppgn.dropout"):
        build_model("ppgn", T, hidden=8, num_blocks=2, dropout=1.0).init(
            jax.random.key(0), adj, nm, t, level)


def test_training_steps_use_dropout_reproducibly():
    cfg, model, process, tx, state, data = tiny_setup("ppgn", "simple")
    drop = build_model("ppgn", cfg.diffusion.num_timesteps, hidden=cfg.model.ppgn.hidden,
                       num_blocks=cfg.model.ppgn.num_blocks, dropout=0.5)
    mesh = make_mesh(jax.devices()[:1])
    idx = np.tile(np.arange(8, dtype=np.int32), (3, 1))
    run = lambda m, key: run_chunk(training.make_train_chunk(m, tx, process, mesh,
                                                             jax.random.key(key)),
                                   state, data, idx, mesh)
    a, la = run(drop, 1)
    b, lb = run(drop, 1)
    _, lp = run(model, 1)
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))  # same key, same masks
    assert np.all(np.isfinite(np.asarray(la)))
    assert not np.allclose(np.asarray(la), np.asarray(lp))  # the masks changed the steps
    for x, y in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_dropout_config_checks():  # resume refusal: tests/test_faults.py
    cfg = test_config.get_config()
    cfg.model.ppgn.dropout = 0.1
    validate_config(cfg)
    for bad in (-0.1, 1.0):
        wrong = cfg.copy_and_resolve_references()
        wrong.model.ppgn.dropout = bad
        with pytest.raises(ConfigError, match="config.model.ppgn.dropout"):
            validate_config(wrong)
    edp = cfg.copy_and_resolve_references()
    edp.model.name = "edp"
    with pytest.raises(ConfigError, match="dropout"):
        validate_config(edp)
