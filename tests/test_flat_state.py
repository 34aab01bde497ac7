"""Flat train states (ddgjax.flat_state): the chunks' steps on flat vectors are the
leaf-by-leaf steps (the path of a state that cannot be laid flat), and the trees come
back exactly."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ddgjax import input_pipeline, training
from ddgjax.flat_state import FlatLayout
from ddgjax.parallel import batch_sharded, make_mesh, put_global, replicate
from tests.test_training import run_chunk, tiny_setup


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_flatten_then_unflatten_is_the_state():
    cfg, model, process, tx, state, _ = tiny_setup("ppgn", "simple")
    # distinct values in every part (Adam's moments start equal), so a swap would show
    leaves, treedef = jax.tree_util.tree_flatten(state.opt_state)
    keys = jax.random.split(jax.random.key(5), len(leaves))
    noisy = [jax.random.normal(k, x.shape, x.dtype) if jnp.issubdtype(x.dtype, jnp.floating)
             else x + 7 for k, x in zip(keys, leaves)]
    state = state.replace(ema_params=jax.tree_util.tree_map(lambda x: x + 1.0, state.params),
                          opt_state=jax.tree_util.tree_unflatten(treedef, noisy))
    layout = FlatLayout.of(state)
    flat = layout.flatten(state)
    num = sum(x.size for x in jax.tree_util.tree_leaves(state.params))
    assert flat.params.shape == flat.ema_params.shape == (num,)
    vectors = [x for x in jax.tree_util.tree_leaves(flat.opt_state) if x.shape == (num,)]
    assert len(vectors) == 2  # Adam's mu and nu
    _leaves_equal(layout.unflatten(flat, state), state)
    # under jit, with the template a tracer
    _leaves_equal(jax.jit(lambda s: layout.unflatten(layout.flatten(s), s))(state), state)


def test_no_flat_layout_for_mixed_dtypes_or_one_leaf():
    cfg, model, process, tx, state, _ = tiny_setup("ppgn", "simple")
    assert FlatLayout.of(state) is not None
    low = optax.adam(1e-3, mu_dtype=jnp.bfloat16)  # a moment of another dtype
    assert FlatLayout.of(state.replace(opt_state=low.init(state.params))) is None
    leaves, treedef = jax.tree_util.tree_flatten(state.params)
    mixed = jax.tree_util.tree_unflatten(treedef, [leaves[0].astype(jnp.bfloat16)] + leaves[1:])
    assert FlatLayout.of(state.replace(params=mixed, ema_params=mixed)) is None
    one = {"w": jnp.ones(3)}
    assert FlatLayout.of(training.TrainState(jnp.zeros((), jnp.int32), one, one,
                                             tx.init(one))) is None


@pytest.fixture
def flat_or_leaf(monkeypatch):
    """``run(flat, fn)``: ``fn()`` with the chunks on the flat state (checked: a layout was
    made) or leaf by leaf (``FlatLayout.of`` finds none, as for a state that cannot be
    laid flat)."""
    real = FlatLayout.of.__func__

    def run(flat, fn):
        seen = []

        def spy(cls, state):
            seen.append(real(cls, state) if flat else None)
            return seen[-1]

        with monkeypatch.context() as patch:
            patch.setattr(FlatLayout, "of", classmethod(spy))
            out = fn()
        assert seen and all((x is not None) == flat for x in seen)
        return out

    return run


def _logits(model, data):
    adj, mask = jnp.asarray(data.adj), jnp.asarray(data.node_mask)
    b = adj.shape[0]
    t, lv = jnp.full((b,), 3, jnp.int32), jnp.full((b,), 0.2, jnp.float32)
    return lambda p: np.asarray(model.apply(p, adj, mask, t, lv))


def _assert_same_training(model, data, flat_out, leaf_out):
    """Same losses, step, optimizer count and (through what they compute) parameters and EMA.
    Leaves are compared through the model's output: a bias in front of an instance norm
    has a gradient that is zero up to rounding, so its Adam steps depend on the
    summation order of any two programs (tests/test_training.py says more)."""
    (fs, fl), (ls, ll) = flat_out, leaf_out
    np.testing.assert_allclose(np.asarray(fl), np.asarray(ll), rtol=1e-5)
    assert int(np.asarray(fs.step).reshape(-1)[0]) == int(np.asarray(ls.step).reshape(-1)[0])
    assert jax.tree_util.tree_structure(fs) == jax.tree_util.tree_structure(ls)
    logits = _logits(model, data)
    for ours, theirs in ((fs.params, ls.params), (fs.ema_params, ls.ema_params)):
        np.testing.assert_allclose(logits(ours), logits(theirs), rtol=1e-3, atol=1e-3)
    # the optimizer state is a tree again, e.g. Adam's step count
    counts = [[x for x in jax.tree_util.tree_leaves(s.opt_state) if np.ndim(x) == 0]
              for s in (fs, ls)]
    assert [int(c) for c in counts[0]] == [int(c) for c in counts[1]]


def test_flat_chunk_equals_leaf_by_leaf_chunk(flat_or_leaf):
    cfg, model, process, tx, state, data = tiny_setup("ppgn", "simple")
    mesh = make_mesh(jax.devices()[:1])
    rng = np.random.default_rng(1)
    idx = np.stack([rng.permutation(8) for _ in range(6)]).astype(np.int32)
    outs = [flat_or_leaf(flat, lambda: run_chunk(
                training.make_train_chunk(model, tx, process, mesh, jax.random.key(1), 0.9),
                state, data, idx, mesh))
            for flat in (True, False)]
    _assert_same_training(model, data, *outs)


def test_flat_weighted_chunk_equals_leaf_by_leaf(flat_or_leaf):
    """The size-bucket chunk (one weight per step) on four devices."""
    cfg, model, process, tx, state, data = tiny_setup("ppgn", "simple")
    mesh = make_mesh(jax.devices()[:4])
    idx = np.tile(np.arange(8, dtype=np.int32), (3, 1))
    weights = np.array([1.0, 0.5, 2.0], np.float32)
    dev = replicate(input_pipeline.device_copy(data), mesh)

    def run():
        chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(2), 0.0,
                                          weighted=True)
        return chunk(replicate(state, mesh), dev,
                     put_global(idx, batch_sharded(mesh, 1)), replicate(weights, mesh))

    _assert_same_training(model, data, *[flat_or_leaf(flat, run) for flat in (True, False)])


def test_flat_seeds_chunk_equals_leaf_by_leaf(flat_or_leaf):
    """Several runs in one program, data-parallel over four devices."""
    cfg, model, process, tx, _, data = tiny_setup("ppgn", "simple")
    mesh = make_mesh(jax.devices()[:4])
    keys = jnp.stack([jax.random.key(11), jax.random.key(12)])
    states = [training.init_state(model, tx, jax.random.key(k), 20) for k in (3, 4)]
    stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *states)
    idx = np.tile(np.arange(8, dtype=np.int32), (3, 2, 1))
    dev = replicate(input_pipeline.device_copy(data), mesh)

    def run():
        chunk = training.make_train_chunk_seeds(model, tx, process, mesh, keys, 0.9)
        return chunk(replicate(stacked, mesh), dev,
                     put_global(idx, batch_sharded(mesh, 2)))

    outs = [flat_or_leaf(flat, run) for flat in (True, False)]
    for r in range(2):
        pick = lambda o: (jax.tree_util.tree_map(lambda a: np.asarray(a)[r], o[0]),
                          np.asarray(o[1])[:, r])
        _assert_same_training(model, data, pick(outs[0]), pick(outs[1]))
