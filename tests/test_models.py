"""Tests of the denoisers (ddgjax.models): output convention, symmetries, padding,
dtypes, noise conditioning and the registry. Tiny sizes, CPU."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.graphs import edge_mask, node_mask_from_counts
from ddgjax.models import EDPGNN, MODELS, PPGN, build_model, model_fields

T = 8
CONFIGS = {
    "ppgn": dict(hidden=8, num_blocks=2),
    "edp": dict(num_layers=2, gin_steps=2, channels=3, hidden=8),
}
NAMES = sorted(CONFIGS)


def random_batch(counts, max_nodes, seed=0, p=0.4):
    """Random padded 0/1 adjacency (numpy) following the GraphBatch convention."""
    rng = np.random.default_rng(seed)
    counts = np.asarray(counts)
    nm = node_mask_from_counts(counts, max_nodes)
    a = np.triu((rng.random((len(counts), max_nodes, max_nodes)) < p).astype(np.float32), 1)
    a = a + a.transpose(0, 2, 1)
    a = a * (nm[:, :, None] & nm[:, None, :])
    return a, nm


def noise_inputs(batch, seed=1):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, T + 1, size=batch).astype(np.int32)
    return t, (t / (2.0 * T)).astype(np.float32)


def pad_to(adj, nm, max_nodes):
    b, n = nm.shape
    a2 = np.zeros((b, max_nodes, max_nodes), np.float32)
    a2[:, :n, :n] = adj
    m2 = np.zeros((b, max_nodes), bool)
    m2[:, :n] = nm
    return a2, m2


def randomize(params, seed=3, scale=0.1):
    """Perturb every leaf (so alpha/gamma are no longer the t-independent 1/0 init)."""
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree.unflatten(
        treedef, [x + scale * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)])


@pytest.fixture(scope="module")
def setup():
    """name -> (model, params, jitted apply). Params are randomised once."""
    out = {}
    adj, nm = random_batch([6, 4], 6)
    t, bb = noise_inputs(2)
    for name in NAMES:
        model = build_model(name, T, **CONFIGS[name])
        params = randomize(model.init(jax.random.key(0), adj, nm, t, bb))
        out[name] = (model, params, jax.jit(model.apply))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_output_convention(setup, name):
    model, params, apply = setup[name]
    counts = [9, 5, 1, 0]
    adj, nm = random_batch(counts, 9)
    t, bb = noise_inputs(len(counts))
    out = apply(params, adj, nm, t, bb)
    chex.assert_shape(out, (4, 9, 9))
    chex.assert_type(out, jnp.float32)
    chex.assert_tree_all_finite(out)
    out = np.asarray(out)
    np.testing.assert_array_equal(out, out.transpose(0, 2, 1))
    off = ~np.asarray(edge_mask(nm))
    assert np.all(out[off] == 0.0), "logits must be 0 on the diagonal and on padding"
    assert np.abs(out[~off]).max() > 1e-3, "logits on real pairs should not be trivially 0"
    params_dtypes = {x.dtype for x in jax.tree.leaves(params)}
    assert params_dtypes == {jnp.dtype(jnp.float32)}


@pytest.mark.parametrize("name", NAMES)
def test_permutation_equivariance(setup, name):
    model, params, apply = setup[name]
    counts = [8, 6]
    adj, nm = random_batch(counts, 10, seed=5)
    t, bb = noise_inputs(2, seed=6)
    rng = np.random.default_rng(7)
    perm_adj = adj.copy()
    perms = []
    for b, n in enumerate(counts):
        p = np.concatenate([rng.permutation(n), np.arange(n, 10)])  # real nodes stay a prefix
        perms.append(p)
        perm_adj[b] = adj[b][np.ix_(p, p)]
    out = np.asarray(apply(params, adj, nm, t, bb))
    out_p = np.asarray(apply(params, perm_adj, nm, t, bb))
    for b, p in enumerate(perms):
        np.testing.assert_allclose(out_p[b], out[b][np.ix_(p, p)], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_padding_invariance(setup, name):
    model, params, apply = setup[name]
    counts = [7, 5, 3]
    adj, nm = random_batch(counts, 7, seed=11)
    t, bb = noise_inputs(3, seed=12)
    out = np.asarray(apply(params, adj, nm, t, bb))
    adj2, nm2 = pad_to(adj, nm, 14)
    out2 = np.asarray(apply(params, adj2, nm2, t, bb))
    np.testing.assert_allclose(out2[:, :7, :7], out, atol=1e-4, rtol=1e-4)
    assert np.all(out2[:, 7:, :] == 0) and np.all(out2[:, :, 7:] == 0)
    # Batch mixing: each graph alone gives what it gives inside the mixed batch.
    for b in range(3):
        alone = np.asarray(apply(params, adj[b:b + 1], nm[b:b + 1], t[b:b + 1], bb[b:b + 1]))
        np.testing.assert_allclose(alone[0], out[b], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_bfloat16_compute(setup, name):
    model, params, apply = setup[name]
    model16 = build_model(name, T, compute_dtype=jnp.bfloat16, **CONFIGS[name])
    adj, nm = random_batch([8, 5], 8, seed=21)
    t, bb = noise_inputs(2, seed=22)
    params16 = model16.init(jax.random.key(0), adj, nm, t, bb)
    chex.assert_trees_all_equal_shapes_and_dtypes(params16, params)  # params stay float32
    out32 = np.asarray(apply(params, adj, nm, t, bb))
    out16 = jax.jit(model16.apply)(params, adj, nm, t, bb)
    chex.assert_type(out16, jnp.float32)
    out16 = np.asarray(out16)
    np.testing.assert_array_equal(out16, out16.transpose(0, 2, 1))
    scale = np.abs(out32).max()
    err = np.abs(out16 - out32).max()
    assert err <= 0.05 * scale + 0.05, (err, scale)


def test_edp_conditioning_uses_t_index(setup):
    model, params, apply = setup["edp"]
    assert model.num_levels == T + 1
    cond = params["params"]["out"]["cond_0"]
    chex.assert_shape([cond["alpha"], cond["gamma"]], (T + 1, CONFIGS["edp"]["hidden"]))
    fresh = model.init(jax.random.key(1), *random_batch([4], 4), np.zeros(1, np.int32),
                       np.zeros(1, np.float32))
    np.testing.assert_array_equal(fresh["params"]["out"]["cond_0"]["alpha"], 1.0)
    np.testing.assert_array_equal(fresh["params"]["out"]["cond_0"]["gamma"], 0.0)

    adj, nm = random_batch([7, 7], 7, seed=31)
    adj[1] = adj[0]
    bb = np.zeros(2, np.float32)
    out = np.asarray(apply(params, adj, nm, np.array([0, T], np.int32), bb))
    assert np.abs(out[0] - out[1]).max() > 1e-3, "different t must give different logits"
    out_same = np.asarray(apply(params, adj, nm, np.array([3, 3], np.int32), bb))
    np.testing.assert_allclose(out_same[0], out_same[1], atol=1e-6)
    # Row T (the last level) is the one used at t = T, and only there.
    bumped = jax.tree_util.tree_map_with_path(
        lambda path, x: x.at[T].add(1.0) if "gamma" in jax.tree_util.keystr(path) else x, params)
    out_b = np.asarray(apply(bumped, adj, nm, np.array([0, T], np.int32), bb))
    np.testing.assert_array_equal(out_b[0], out[0])
    assert np.abs(out_b[1] - out[1]).max() > 1e-3


def test_ppgn_depends_on_beta_bar(setup):
    model, params, apply = setup["ppgn"]
    adj, nm = random_batch([6], 6, seed=41)
    t = np.zeros(1, np.int32)
    lo = np.asarray(apply(params, adj, nm, t, np.array([0.05], np.float32)))
    hi = np.asarray(apply(params, adj, nm, t, np.array([0.45], np.float32)))
    assert np.abs(lo - hi).max() > 1e-3
    # t_index is ignored by PPGN (it reads beta_bar only).
    other_t = np.asarray(apply(params, adj, nm, np.full(1, 5, np.int32),
                               np.array([0.05], np.float32)))
    np.testing.assert_array_equal(other_t, lo)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_finite_and_reach_all_params(setup, name):
    model, params, _ = setup[name]
    adj, nm = random_batch([6, 4, 0], 6, seed=51)
    t, bb = noise_inputs(3, seed=52)

    def loss(p):
        return jnp.sum(model.apply(p, adj, nm, t, bb) ** 2)

    grads = jax.jit(jax.grad(loss))(params)
    chex.assert_tree_all_finite(grads)
    dead = [jax.tree_util.keystr(path) for path, g in jax.tree_util.tree_leaves_with_path(grads)
            if not np.any(np.asarray(g) != 0)
            and not ("alpha" in jax.tree_util.keystr(path) or "gamma" in jax.tree_util.keystr(path))]
    assert not dead, f"parameters without gradient: {dead}"


def test_build_model():
    assert set(MODELS) == {"ppgn", "edp"}
    m = build_model("ppgn", 32, hidden=16, num_blocks=3)
    assert isinstance(m, PPGN) and m.hidden == 16 and m.num_blocks == 3
    e = build_model("edp", 32)
    assert isinstance(e, EDPGNN) and e.num_levels == 33
    assert (e.num_layers, e.gin_steps, e.channels, e.hidden) == (5, 4, 4, 16)
    assert "num_levels" not in model_fields("edp")
    with pytest.raises(ValueError, match="valid names.*edp.*ppgn"):
        build_model("gran", 32)
    with pytest.raises(TypeError, match="hiden"):
        build_model("ppgn", 32, hiden=16)
    with pytest.raises(TypeError, match="num_levels"):
        build_model("edp", 32, num_levels=10)
    with pytest.raises(TypeError, match="gin_steps"):
        build_model("ppgn", 32, gin_steps=4)
    with pytest.raises(ValueError, match="num_timesteps"):
        build_model("edp", 0)


def test_bad_input_shapes():
    model = build_model("ppgn", T, **CONFIGS["ppgn"])
    adj, nm = random_batch([4, 3], 4)
    t, bb = noise_inputs(2)
    with pytest.raises(ValueError, match="node_mask"):
        model.init(jax.random.key(0), adj, nm[:, :3], t, bb)
    with pytest.raises(ValueError, match="beta_bar"):
        model.init(jax.random.key(0), adj, nm, t, np.zeros(3, np.float32))
