"""Tests of the denoisers (ddgjax.models): output convention, symmetries, padding,
dtypes, noise conditioning and the registry. Tiny sizes, CPU."""
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.graphs import edge_mask
from ddgjax.models import EDPGNN, MODELS, PPGN, build_model, model_fields
from ddgjax.models.ppgn import PPGNBlock, fp8_rounded_params

from helpers import random_batch

T = 8
CONFIGS = {
    "ppgn": dict(hidden=8, num_blocks=2),
    "edp": dict(num_layers=2, gin_steps=2, channels=3, hidden=8),
    "gt": dict(num_layers=2, node_dim=8, edge_dim=4, heads=2, global_dim=4),
    # the graph transformer with random-walk node and edge inputs
    "gt_walk": dict(num_layers=2, node_dim=8, edge_dim=4, heads=2, global_dim=4,
                    walk_features=3),
}
NAMES = sorted(CONFIGS)


def model_name(key: str) -> str:
    """The model a CONFIGS key builds (``gt_walk`` -> ``gt``)."""
    return key.split("_")[0]
B, N = 3, 8  # one batch shape for most tests: each new shape costs a compile


def noise_inputs(batch, seed=1):
    """``(t_index int32[B], noise_level float32[B])``: random levels and their linear beta_bar."""
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


def random_params(model, seed=3):
    """Random float32 params of the model's shapes (no compiled init: it is slow on CPU).

    Kernels ~ N(0, 1/fan_in), biases ~ N(0, 0.1^2), EDP's per-level alpha ~ 1 + N(0, 0.1^2)
    and gamma ~ N(0, 0.1^2), so that the conditioning really differs between levels.
    """
    adj, nm = random_batch(0, [N] * B, N)
    shapes = jax.eval_shape(model.init, jax.random.key(0), adj, nm, *noise_inputs(B))
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        key = jax.tree_util.keystr(path)
        noise = rng.standard_normal(leaf.shape).astype(np.float32)
        if "kernel" in key:
            return jnp.asarray(noise / np.sqrt(leaf.shape[0]))
        if "alpha" in key:
            return jnp.asarray(1.0 + 0.1 * noise)
        return jnp.asarray(0.1 * noise)

    return jax.tree_util.tree_map_with_path(draw, shapes)


@pytest.fixture(scope="module")
def setup():
    """name -> (model, random params, jitted apply)."""
    out = {}
    for name in NAMES:
        model = build_model(model_name(name), T, **CONFIGS[name])
        out[name] = (model, random_params(model), jax.jit(model.apply))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_output_convention(setup, name):
    model, params, apply = setup[name]
    adj, nm = random_batch(0, [8, 5, 0], N)  # includes an empty graph
    t, level = noise_inputs(B)
    out = apply(params, adj, nm, t, level)
    chex.assert_shape(out, (B, N, N))
    chex.assert_type(out, jnp.float32)
    chex.assert_tree_all_finite(out)
    out = np.asarray(out)
    np.testing.assert_array_equal(out, out.transpose(0, 2, 1))
    off = ~np.asarray(edge_mask(nm))
    assert np.all(out[off] == 0.0), "logits must be 0 on the diagonal and on padding"
    assert np.abs(out[~off]).min() > 0.0, "logits on real pairs should not be trivially 0"


@pytest.mark.parametrize("name", NAMES)
def test_permutation_equivariance(setup, name):
    model, params, apply = setup[name]
    counts = [8, 6, 3]
    adj, nm = random_batch(5, counts, N)
    t, level = noise_inputs(B, seed=6)
    rng = np.random.default_rng(7)
    perm_adj = adj.copy()
    perms = []
    for b, n in enumerate(counts):
        p = np.concatenate([rng.permutation(n), np.arange(n, N)])  # real nodes stay a prefix
        perms.append(p)
        perm_adj[b] = adj[b][np.ix_(p, p)]
    out = np.asarray(apply(params, adj, nm, t, level))
    out_p = np.asarray(apply(params, perm_adj, nm, t, level))
    for b, p in enumerate(perms):
        np.testing.assert_allclose(out_p[b], out[b][np.ix_(p, p)], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_padding_invariance(setup, name):
    model, params, apply = setup[name]
    counts = [8, 5, 3]
    adj, nm = random_batch(11, counts, N)
    t, level = noise_inputs(B, seed=12)
    out = np.asarray(apply(params, adj, nm, t, level))
    adj2, nm2 = pad_to(adj, nm, N + 7)
    out2 = np.asarray(apply(params, adj2, nm2, t, level))
    np.testing.assert_allclose(out2[:, :N, :N], out, atol=1e-4, rtol=1e-4)
    assert np.all(out2[:, N:, :] == 0) and np.all(out2[:, :, N:] == 0)
    # Batch mixing: each graph alone (with empty graphs beside it; same shape, so no
    # recompile) gives what it gives inside the mixed batch.
    for b in range(B):
        alone_adj = np.zeros_like(adj)
        alone_adj[0] = adj[b]
        alone_nm = np.zeros_like(nm)
        alone_nm[0] = nm[b]
        alone = np.asarray(apply(params, alone_adj, alone_nm, np.roll(t, -b), np.roll(level, -b)))
        np.testing.assert_allclose(alone[0], out[b], atol=1e-4, rtol=1e-4)
        assert np.all(alone[1:] == 0)


@pytest.mark.parametrize("name", NAMES)
def test_bfloat16_compute(setup, name):
    model, params, apply = setup[name]
    model16 = build_model(model_name(name), T, compute_dtype=jnp.bfloat16, **CONFIGS[name])
    adj, nm = random_batch(21, [8, 6, 4], N)
    t, level = noise_inputs(B, seed=22)
    shapes16 = jax.eval_shape(model16.init, jax.random.key(0), adj, nm, t, level)
    chex.assert_trees_all_equal_shapes_and_dtypes(shapes16, params)  # params stay float32
    out32 = np.asarray(apply(params, adj, nm, t, level))
    out16 = jax.jit(model16.apply)(params, adj, nm, t, level)
    chex.assert_type(out16, jnp.float32)
    out16 = np.asarray(out16)
    np.testing.assert_array_equal(out16, out16.transpose(0, 2, 1))
    assert np.all(out16[~np.asarray(edge_mask(nm))] == 0)
    err = np.abs(out16 - out32).max()
    scale = np.abs(out32).max()
    assert err <= 0.05 * scale + 0.02, (err, scale)
    assert err > 0, "bfloat16 compute should change the numbers a little"


def test_edp_conditioning_uses_t_index(setup):
    model, params, apply = setup["edp"]
    assert model.num_levels == T + 1
    cond = params["params"]["out"]["cond_0"]
    chex.assert_shape([cond["alpha"], cond["gamma"]], (T + 1, CONFIGS["edp"]["hidden"]))

    adj, nm = random_batch(31, [7, 7, 7], N)
    adj[1] = adj[2] = adj[0]
    level = np.zeros(B, np.float32)
    t = np.array([0, T, 3], np.int32)
    out = np.asarray(apply(params, adj, nm, t, level))
    assert np.abs(out[0] - out[1]).max() > 1e-3, "different t must give different logits"
    out_same = np.asarray(apply(params, adj, nm, np.array([3, 3, 3], np.int32), level))
    np.testing.assert_allclose(out_same[0], out_same[1], atol=1e-6)
    np.testing.assert_allclose(out_same[2], out[2], atol=1e-6)
    # Row T (the last level) is the one used at t = T, and only there.
    bumped = jax.tree_util.tree_map_with_path(
        lambda path, x: x.at[T].add(1.0) if "gamma" in jax.tree_util.keystr(path) else x, params)
    out_b = np.asarray(apply(bumped, adj, nm, t, level))
    np.testing.assert_array_equal(out_b[0], out[0])
    np.testing.assert_array_equal(out_b[2], out[2])
    assert np.abs(out_b[1] - out[1]).max() > 1e-3


def test_level_condition_init():
    from ddgjax.models.edp import LevelCondition
    cond = LevelCondition(num_levels=T + 1)
    h = jnp.ones((2, 5, 4))
    v = cond.init(jax.random.key(0), h, jnp.array([0, T]))
    chex.assert_shape([v["params"]["alpha"], v["params"]["gamma"]], (T + 1, 4))
    np.testing.assert_array_equal(v["params"]["alpha"], 1.0)
    np.testing.assert_array_equal(v["params"]["gamma"], 0.0)
    np.testing.assert_array_equal(cond.apply(v, h, jnp.array([0, T])), h)


def test_ppgn_depends_on_noise_level(setup):
    model, params, apply = setup["ppgn"]
    adj, nm = random_batch(41, [6, 6, 6], N)
    adj[1] = adj[2] = adj[0]
    t = np.zeros(B, np.int32)
    out = np.asarray(apply(params, adj, nm, t, np.array([0.05, 0.45, 0.05], np.float32)))
    assert np.abs(out[0] - out[1]).max() > 1e-3
    np.testing.assert_allclose(out[0], out[2], atol=1e-6)
    # t_index is ignored by PPGN (it reads noise_level only).
    other_t = np.asarray(apply(params, adj, nm, np.full(B, 5, np.int32),
                               np.array([0.05, 0.45, 0.05], np.float32)))
    np.testing.assert_array_equal(other_t, out)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_finite_and_reach_all_params(setup, name):
    model, params, _ = setup[name]
    adj, nm = random_batch(51, [8, 4, 0], N)
    t, level = noise_inputs(B, seed=52)

    def loss(p):
        return jnp.sum(model.apply(p, adj, nm, t, level) ** 2)

    grads = jax.jit(jax.grad(loss))(params)
    chex.assert_tree_all_finite(grads)
    dead = [jax.tree_util.keystr(path) for path, g in jax.tree_util.tree_leaves_with_path(grads)
            if not np.any(np.asarray(g) != 0)]
    # the PPGN's mixing biases are cancelled by the instance norm that follows them: their
    # gradient is an exact zero by design (test_ppgn_mixing_bias_cannot_change_the_output...)
    by_design = ([f"['params']['block_{k}']['mix']['bias']"
                  for k in range(CONFIGS["ppgn"]["num_blocks"])] if name == "ppgn" else [])
    assert sorted(dead) == sorted(by_design), f"parameters without gradient: {dead}"


def test_build_model():
    assert set(MODELS) == {"ppgn", "edp", "gt"}
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
    adj, nm = random_batch(0, [4, 3], 4)
    t, level = noise_inputs(2)
    with pytest.raises(ValueError, match="node_mask"):
        jax.eval_shape(model.init, jax.random.key(0), adj, nm[:, :3], t, level)
    with pytest.raises(ValueError, match="noise_level"):
        jax.eval_shape(model.init, jax.random.key(0), adj, nm, t, np.zeros(3, np.float32))


def ppgn_block_reference(params, x, node_mask, eps=1e-5):
    """One PPGN block in float64 NumPy, from the formula in ddgjax/models/ppgn.py:

    m1, m2 = Dense -> leaky_relu(0.01) -> Dense per entry; P = mask(m1) @ m2 / sqrt(n) per
    channel; Y = mask(InstanceNorm(Dense(concat[X, P]))), the norm (no affine, biased
    variance) per graph and channel over the real n x n entries.
    """
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params["params"])
    x = np.asarray(x, np.float64)
    dense = lambda d, v: v @ d["kernel"] + d["bias"]

    def mlp(tree, v):
        h = dense(tree["dense_0"], v)
        return dense(tree["dense_1"], np.where(h > 0, h, 0.01 * h))

    sq = (node_mask[:, :, None] & node_mask[:, None, :])[..., None]
    n = node_mask.sum(1)
    m1 = mlp(p["m1"], x) * sq
    m2 = mlp(p["m2"], x)
    prod = np.einsum("bikc,bkjc->bijc", m1, m2) / np.sqrt(np.maximum(n, 1))[:, None, None, None]
    y = dense(p["mix"], np.concatenate([x, prod], axis=-1))
    out = np.zeros_like(y)
    for b, nb in enumerate(n):
        if nb:
            real = y[b, :nb, :nb]
            out[b, :nb, :nb] = (real - real.mean((0, 1))) / np.sqrt(real.var((0, 1)) + eps)
    return out


def test_ppgn_block_matches_float64_reference():
    """One block against its formula, with the block's own parameters (biases made nonzero)
    and junk on the padding entries of its input (which must not reach real entries)."""
    h = 4
    counts = [7, 5, 0]
    _, nm = random_batch(61, counts, N)
    x = np.random.default_rng(62).normal(size=(B, N, N, h)).astype(np.float32)
    sq = nm[:, :, None] & nm[:, None, :]
    inv_sqrt_n = (1.0 / np.sqrt(np.maximum(nm.sum(1), 1))).astype(np.float32)
    block = PPGNBlock(hidden=h)
    params = jax.jit(block.init)(jax.random.key(63), x, sq, inv_sqrt_n)
    shapes = jax.tree_util.tree_map(np.shape, params["params"])
    assert shapes == {"m1": {"dense_0": {"kernel": (h, h), "bias": (h,)},
                             "dense_1": {"kernel": (h, h), "bias": (h,)}},
                      "m2": {"dense_0": {"kernel": (h, h), "bias": (h,)},
                             "dense_1": {"kernel": (h, h), "bias": (h,)}},
                      "mix": {"kernel": (2 * h, h), "bias": (h,)}}, shapes
    rng = np.random.default_rng(64)
    params = jax.tree_util.tree_map_with_path(
        lambda path, a: a + 0.3 * rng.standard_normal(a.shape).astype(np.float32)
        if "bias" in jax.tree_util.keystr(path) else a, params)
    out = np.asarray(jax.jit(block.apply)(params, x, sq, inv_sqrt_n))
    ref = ppgn_block_reference(params, x, nm)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert np.all(out[~sq] == 0)


def test_ppgn_log_noise_features():
    """noise_features="log": one more input channel (a log-scale level), still
    permutation equivariant, and it separates levels the raw value squeezes together."""
    from ddgjax.models.input_channels import noise_channels
    np.testing.assert_allclose(noise_channels(jnp.asarray([0.0, 1e-8, 1e-4, 0.5]), "log")[:, 1],
                               [0.0, 0.0, 0.5, 1 + np.log10(0.5) / 8], rtol=1e-6, atol=1e-7)
    assert noise_channels(jnp.asarray([0.1, 0.2]), "linear").shape == (2, 1)
    adj, nm = random_batch(3, [4, 3], 4)
    for name, extra in (("ppgn", dict(hidden=8, num_blocks=1)), ("gt", CONFIGS["gt"])):
        with pytest.raises(ValueError, match=f"config.model.{name}.noise_features"):
            build_model(name, T, noise_features="cubic", **extra).init(
                jax.random.key(0), adj, nm, np.zeros(2, np.int32), np.full(2, 0.1, np.float32))
    model = build_model("ppgn", T, hidden=8, num_blocks=2, noise_features="log")
    params = random_params(model)
    assert params["params"]["embed"]["kernel"].shape[0] == 3  # adj + two noise channels
    adj, nm = random_batch(5, [N, N - 2, 3], N)
    levels = jnp.asarray([1e-5, 1e-3, 0.3], jnp.float32)
    out = model.apply(params, adj, nm, jnp.ones(B, jnp.int32), levels)
    perm = np.random.default_rng(0).permutation(N - 2)
    adj_p = np.array(adj)
    adj_p[1, :N - 2, :N - 2] = adj_p[1][np.ix_(perm, perm)]
    out_p = model.apply(params, adj_p, nm, jnp.ones(B, jnp.int32), levels)
    np.testing.assert_allclose(np.asarray(out_p)[1, :N - 2, :N - 2],
                               np.asarray(out)[1][np.ix_(perm, perm)], rtol=1e-4, atol=1e-4)
    low = model.apply(params, adj, nm, jnp.ones(B, jnp.int32), jnp.full((B,), 1e-6))
    lowish = model.apply(params, adj, nm, jnp.ones(B, jnp.int32), jnp.full((B,), 1e-3))
    assert float(jnp.max(jnp.abs(low - lowish))) > 1e-3


def test_random_walk_channels_equal_float64_walk_powers():
    """``random_walk_channels``: ``log(1 + n * (D^-1 A)^k)`` by brute force in float64, rows of an
    isolated node zero, nothing on padding."""
    from ddgjax.models.input_channels import random_walk_channels
    adj, nm = random_batch(21, [N, 6, 2], N)
    adj = np.array(adj)
    adj[0, 3, :] = adj[0, :, 3] = 0                      # node 3 of graph 0 isolated
    out = np.asarray(random_walk_channels(jnp.asarray(adj), jnp.asarray(nm), 3))
    assert out.shape == (B, N, N, 3) and out.dtype == np.float32
    for b in range(B):
        n = int(nm[b].sum())
        a = adj[b, :n, :n].astype(np.float64)
        deg = a.sum(1, keepdims=True)
        w = np.divide(a, deg, out=np.zeros_like(a), where=deg > 0)
        for k in range(3):
            np.testing.assert_allclose(out[b, :n, :n, k],
                                       np.log1p(n * np.linalg.matrix_power(w, k + 1)),
                                       rtol=1e-5, atol=1e-6)
        assert np.all(out[b, n:] == 0) and np.all(out[b, :, n:] == 0)
    assert np.all(out[0, 3] == 0)


def test_laplacian_projector_channels_equal_float64_eigenvectors():
    """``laplacian_projector_channels``: ``n v_k v_k^T`` of the normalised Laplacian's
    eigenvectors 1..K by brute force in float64 (eigenvalues simple here), an isolated
    node kept, nothing on padding, a zero channel where a graph has too few nodes."""
    from ddgjax.models.input_channels import laplacian_projector_channels
    adj, nm = random_batch(24, [N, 6, 2], N)
    adj = np.array(adj)
    adj[0, 3, :] = adj[0, :, 3] = 0                      # node 3 of graph 0 isolated
    K = 3
    out = np.asarray(laplacian_projector_channels(jnp.asarray(adj), jnp.asarray(nm), K))
    assert out.shape == (B, N, N, K) and out.dtype == np.float32
    for b in range(B):
        n = int(nm[b].sum())
        a = adj[b, :n, :n].astype(np.float64)
        deg = a.sum(1)
        dis = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1.0)), 0.0)
        lap = np.eye(n) - dis[:, None] * a * dis[None, :]
        vals, vecs = np.linalg.eigh(lap)
        for k in range(K):
            if k + 1 >= n:
                assert np.all(out[b, ..., k] == 0)
                continue
            if min(abs(vals[k + 1] - vals[k]), abs(vals[min(k + 2, n - 1)] - vals[k + 1])
                   if k + 2 < n else 1.0) < 1e-3:
                continue                                  # a repeated eigenvalue: no unique v
            want = n * np.outer(vecs[:, k + 1], vecs[:, k + 1])
            np.testing.assert_allclose(out[b, :n, :n, k], want, rtol=1e-3, atol=1e-4)
        assert np.all(out[b, n:] == 0) and np.all(out[b, :, n:] == 0)
    tiny = laplacian_projector_channels(jnp.asarray(adj[:, :2, :2]), jnp.asarray(nm[:, :2]), 4)
    assert tiny.shape == (B, 2, 2, 4)                     # K + 1 > N: zero channels


@pytest.mark.parametrize("option,count,batch_seed,tol", [
    ("walk_features", 3, 22, 1e-4),
    ("spectral_features", 2, 28, 1e-3),   # seed 28: simple low Laplacian eigenvalues
])
def test_ppgn_extra_input_channels_are_equivariant_and_padding_free(option, count,
                                                                     batch_seed, tol):
    """walk_features / spectral_features = K: K more input channels that reach the
    logits; the model stays permutation equivariant and independent of the padding; a
    negative K is an error naming the config field."""
    model = build_model("ppgn", T, hidden=8, num_blocks=2, **{option: count})
    params = random_params(model)
    assert params["params"]["embed"]["kernel"].shape[0] == 2 + count  # adj, level, K
    apply = jax.jit(model.apply)
    adj, nm = random_batch(batch_seed, [N, N - 2, 5], N)
    t, level = noise_inputs(B, seed=23)
    out = np.asarray(apply(params, adj, nm, t, level))
    perm = np.random.default_rng(1).permutation(N - 2)
    adj_p = np.array(adj)
    adj_p[1, :N - 2, :N - 2] = adj_p[1][np.ix_(perm, perm)]
    out_p = np.asarray(apply(params, adj_p, nm, t, level))
    np.testing.assert_allclose(out_p[1, :N - 2, :N - 2], out[1][np.ix_(perm, perm)],
                               rtol=tol, atol=tol)
    adj2, nm2 = pad_to(np.asarray(adj), np.asarray(nm), N + 5)
    out2 = np.asarray(apply(params, adj2, nm2, t, level))
    np.testing.assert_allclose(out2[:, :N, :N], out, rtol=tol, atol=tol)
    # the new channels reach the logits: other weights on them, other outputs
    moved = jax.tree_util.tree_map(lambda a: a, params)
    moved["params"]["embed"]["kernel"] = params["params"]["embed"]["kernel"].at[2:].add(1.0)
    assert np.max(np.abs(np.asarray(apply(moved, adj, nm, t, level)) - out)) > 1e-3
    plain = build_model("ppgn", T, hidden=8, num_blocks=2)
    assert random_params(plain)["params"]["embed"]["kernel"].shape[0] == 2
    with pytest.raises(ValueError, match=f"config.model.ppgn.{option}"):
        build_model("ppgn", T, hidden=8, num_blocks=2, **{option: -1}).init(
            jax.random.key(0), adj, nm, t, level)


@pytest.mark.parametrize("options", [
    dict(),
    dict(fused=True, walk_features=2, noise_features="log"),
    dict(self_condition=True, remat=True),
])
def test_ppgn_pad_multiple_is_the_same_function_and_gradient(options):
    """pad_multiple = m runs the blocks on N rounded up to a multiple of m inside the call:
    the same parameters, outputs ([B, N, N]) and gradients as without it (N = 8 -> 12 and
    -> 16; m dividing N pads nothing); a bad m is an error naming the config field."""
    from ddgjax.models.ppgn import padded_nodes
    plain = build_model("ppgn", T, hidden=8, num_blocks=2, **options)
    params = random_params(plain)
    adj, nm = random_batch(31, [N, 6, 3], N)
    t, level = noise_inputs(B, seed=32)
    est = ((np.asarray(adj) + 0.3) / 1.6,) if options.get("self_condition") else ()

    def loss(model, p):
        logits = model.apply(p, adj, nm, t, level, *est)
        return jnp.sum(jnp.sin(logits) * (np.arange(N * N).reshape(N, N) % 5))

    want_out = np.asarray(plain.apply(params, adj, nm, t, level, *est))
    want_grad = jax.grad(lambda p: loss(plain, p))(params)
    for m in (6, 16, 4):
        padded = build_model("ppgn", T, hidden=8, num_blocks=2, pad_multiple=m, **options)
        assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
            jax.eval_shape(padded.init, jax.random.key(0), adj, nm, t, level, *est))
        out = np.asarray(padded.apply(params, adj, nm, t, level, *est))
        chex.assert_shape(out, (B, N, N))
        width = padded_nodes(N, m)     # the blocks run on the padded width, and only there
        jaxpr = str(jax.make_jaxpr(padded.apply)(params, adj, nm, t, level, *est))
        widths = {int(w) for w in re.findall(rf"\[{B},(\d+),\1,8\]", jaxpr)} - {1}
        assert widths == {width}, (m, widths)
        np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
        grad = jax.grad(lambda p: loss(padded, p))(params)
        chex.assert_trees_all_close(grad, want_grad, rtol=1e-4, atol=2e-4)
    assert [padded_nodes(n, m) for n, m in ((187, 32), (192, 32), (27, 4), (60, 1))] == [
        192, 192, 28, 60]
    for bad in (0, -4, 2.5, True, "8"):
        with pytest.raises(ValueError, match="config.model.ppgn.pad_multiple"):
            build_model("ppgn", T, hidden=8, num_blocks=2, pad_multiple=bad).init(
                jax.random.key(0), adj, nm, t, level)


def test_ppgn_remat_gives_the_same_outputs_and_gradients():
    """remat=True recomputes the blocks in the backward pass: same parameters, outputs
    and gradients as without it."""
    plain = build_model("ppgn", T, hidden=8, num_blocks=2)
    remat = build_model("ppgn", T, hidden=8, num_blocks=2, remat=True)
    params = random_params(plain)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
        jax.eval_shape(remat.init, jax.random.key(0), *random_batch(0, [N] * B, N),
                       *noise_inputs(B)))
    adj, nm = random_batch(6, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=2)
    loss = lambda m: (lambda p: jnp.sum(jnp.tanh(m.apply(p, adj, nm, t, lv))))
    np.testing.assert_allclose(plain.apply(params, adj, nm, t, lv),
                               remat.apply(params, adj, nm, t, lv), rtol=1e-6, atol=1e-6)
    g_plain = jax.grad(loss(plain))(params)
    g_remat = jax.grad(loss(remat))(params)
    # float32 sums in another order: compare against each leaf's scale (the biases before
    # an instance norm have gradients that are zero up to rounding)
    scale = max(float(jnp.max(jnp.abs(g))) for g in jax.tree_util.tree_leaves(g_plain))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale),
        g_plain, g_remat)


@pytest.mark.parametrize("remat", [False, True])
def test_ppgn_fused_block_equals_the_reference_block(remat):
    """fused=True (merged m1/m2 GEMMs, one-pass norm) has the reference's parameter tree
    and computes the same outputs and gradients in float32, with padding."""
    plain = build_model("ppgn", T, hidden=8, num_blocks=3)
    fused = build_model("ppgn", T, hidden=8, num_blocks=3, fused=True, remat=remat)
    params = random_params(plain)
    adj, nm = random_batch(7, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=3)
    fresh = fused.init(jax.random.key(0), adj, nm, t, lv)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(fresh)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_array_equal(a, b),
                           plain.init(jax.random.key(0), adj, nm, t, lv), fresh)
    out_ref = plain.apply(params, adj, nm, t, lv)
    out = fused.apply(params, adj, nm, t, lv)
    assert float(jnp.max(jnp.abs(out_ref))) > 1e-2
    np.testing.assert_allclose(out, out_ref, rtol=2e-5, atol=2e-5)
    loss = lambda m: (lambda p: jnp.sum(jnp.tanh(m.apply(p, adj, nm, t, lv))))
    g_ref, g = jax.grad(loss(plain))(params), jax.grad(loss(fused))(params)
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g_ref))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4 * scale), g_ref, g)


@pytest.mark.parametrize("fused", [False, True])
def test_ppgn_fp8_weights_train_the_weights_the_float8_samplers_round(fused):
    """``fp8_weights=True`` (quantisation-aware training) is the plain model with the
    float8 samplers' rounded weights, exactly, and its gradient is the plain model's at
    those weights (straight through the rounding); the rounding does move the outputs."""
    h, d = 8, 3
    plain = build_model("ppgn", T, hidden=h, num_blocks=d, fused=fused)
    qat = build_model("ppgn", T, hidden=h, num_blocks=d, fused=fused, fp8_weights=True)
    params = random_params(plain)
    rounded = fp8_rounded_params(params, h, d)
    adj, nm = random_batch(11, [N, N - 2, 5], N)
    t, lv = noise_inputs(B, seed=4)
    out = qat.apply(params, adj, nm, t, lv)
    np.testing.assert_allclose(out, plain.apply(rounded, adj, nm, t, lv), rtol=1e-6,
                               atol=1e-6)
    moved = np.abs(np.asarray(out) - np.asarray(plain.apply(params, adj, nm, t, lv))).max()
    assert moved > 1e-3 * float(np.abs(np.asarray(out)).max())
    loss = lambda m: (lambda p: jnp.sum(jnp.tanh(m.apply(p, adj, nm, t, lv))))
    g_qat, g_ref = jax.grad(loss(qat))(params), jax.grad(loss(plain))(rounded)
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g_ref))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale),
        g_qat, g_ref)
    # the rounded kernels get gradients, as every other parameter
    assert float(jnp.abs(g_qat["params"]["block_1"]["m1"]["dense_0"]["kernel"]).max()) > 0


def test_round_weights_to_fp8_trainable_is_the_rounding_with_an_identity_gradient():
    from ddgjax.models.pair_mlp_mgpu import (round_weights_to_fp8,
                                             round_weights_to_fp8_trainable)
    w = jnp.asarray(np.random.default_rng(0).standard_normal((24, 5)) * 0.1, jnp.float32)
    chex.assert_trees_all_equal(round_weights_to_fp8_trainable(w), round_weights_to_fp8(w))
    c = jnp.arange(120.0).reshape(24, 5)
    chex.assert_trees_all_equal(
        jax.grad(lambda v: jnp.sum(round_weights_to_fp8_trainable(v) * c))(w), c)


@pytest.mark.parametrize("fused", [False, True])
def test_ppgn_fp8_activations_round_every_block_output(fused):
    """``fp8_activations=True`` is the plain model with each block's output rounded to
    float8 (what the float8 samplers store), with a straight-through gradient; the
    rounding does move the outputs."""
    import flax.linen as fnn
    from ddgjax.models.pair_mlp_mgpu import round_to_fp8_trainable
    h, d = 8, 3
    plain = build_model("ppgn", T, hidden=h, num_blocks=d, fused=fused)
    qat = build_model("ppgn", T, hidden=h, num_blocks=d, fused=fused, fp8_activations=True)
    params = random_params(plain)
    adj, nm = random_batch(12, [N, N - 2, 5], N)
    t, lv = noise_inputs(B, seed=5)
    rounded_blocks = []

    def round_block_outputs(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        name = context.module.name or ""
        if context.method_name == "__call__" and name.startswith("block_"):
            rounded_blocks.append(name)
            return round_to_fp8_trainable(out)
        return out

    def plain_rounded(p):
        with fnn.intercept_methods(round_block_outputs):
            return plain.apply(p, adj, nm, t, lv)
    out = qat.apply(params, adj, nm, t, lv)
    np.testing.assert_allclose(out, plain_rounded(params), rtol=1e-6, atol=1e-6)
    assert rounded_blocks == [f"block_{k}" for k in range(d)]
    moved = np.abs(np.asarray(out) - np.asarray(plain.apply(params, adj, nm, t, lv))).max()
    assert moved > 1e-3 * float(np.abs(np.asarray(out)).max())
    loss = lambda f: (lambda p: jnp.sum(jnp.tanh(f(p))))
    g_qat = jax.grad(loss(lambda p: qat.apply(p, adj, nm, t, lv)))(params)
    g_ref = jax.grad(loss(plain_rounded))(params)
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g_ref))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale),
        g_qat, g_ref)


def test_round_to_fp8_trainable_saturates_and_has_an_identity_gradient():
    from ddgjax.models.pair_mlp_mgpu import FP8, round_to_fp8_trainable
    x = jnp.asarray([0.3, -1.7, 1000.0, -2000.0, 3e-4], jnp.float32)
    r = round_to_fp8_trainable(x)
    chex.assert_trees_all_equal(r, x.astype(FP8).astype(jnp.float32).at[2:4].set(
        jnp.asarray([448.0, -448.0])))
    assert r.dtype == jnp.float32
    c = jnp.arange(1.0, 6.0)
    chex.assert_trees_all_equal(jax.grad(lambda v: jnp.sum(round_to_fp8_trainable(v) * c))(x), c)


@pytest.mark.parametrize("fused", [False, True])
def test_ppgn_mixing_bias_cannot_change_the_output_and_gets_a_zero_gradient(fused):
    """With the instance norm the mixing layer's bias is cancelled by the norm's mean: moving
    it leaves the logits unchanged (float32 rounding), so its gradient is an exact zero
    (autodiff's would be rounding noise), while the mixing kernel's is not. With the layer
    norm the bias matters and keeps its gradient."""
    adj, nm = random_batch(7, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=3)
    for norm in ("instance", "layer"):
        model = build_model("ppgn", T, hidden=8, num_blocks=2, fused=fused, norm=norm)
        params = random_params(model)
        moved = jax.tree_util.tree_map(lambda x: x, params)
        for k in range(2):
            bias = moved["params"][f"block_{k}"]["mix"]["bias"]
            moved["params"][f"block_{k}"]["mix"]["bias"] = bias + 3.0 + jnp.arange(8.0)
        out, out_moved = model.apply(params, adj, nm, t, lv), model.apply(moved, adj, nm, t, lv)
        loss = lambda p: jnp.sum(jnp.tanh(model.apply(p, adj, nm, t, lv)))
        grads = jax.grad(loss)(params)["params"]
        bias_grads = [grads[f"block_{k}"]["mix"]["bias"] for k in range(2)]
        if norm == "instance":
            np.testing.assert_allclose(out_moved, out, rtol=1e-4, atol=1e-4)
            for g in bias_grads:
                np.testing.assert_array_equal(g, 0.0)
            assert float(jnp.max(jnp.abs(grads["block_0"]["mix"]["kernel"]))) > 1e-2
        else:
            assert float(jnp.max(jnp.abs(out_moved - out))) > 1e-2
            assert min(float(jnp.max(jnp.abs(g))) for g in bias_grads) > 1e-4


def test_ppgn_fused_block_in_bfloat16_stays_close_to_float32():
    """In bfloat16 the fused path is as close to the float32 reference as the plain
    bfloat16 path is (bf16 operands: relative errors of 1e-3 to 1e-2)."""
    ref = build_model("ppgn", T, hidden=16, num_blocks=3)
    params = random_params(ref)
    adj, nm = random_batch(8, [N, N - 2, 5], N)
    t, lv = noise_inputs(B, seed=4)
    out_ref = np.asarray(ref.apply(params, adj, nm, t, lv))
    errs = {}
    for fused in (False, True):
        m = build_model("ppgn", T, hidden=16, num_blocks=3, fused=fused,
                        compute_dtype=jnp.bfloat16)
        out = np.asarray(m.apply(params, adj, nm, t, lv))
        errs[fused] = np.linalg.norm(out - out_ref) / np.linalg.norm(out_ref)
    assert errs[True] < 3e-2 and errs[True] < 2 * errs[False] + 1e-3, errs


def test_one_pass_instance_norm_equals_the_two_pass_norm_in_float64():
    """The shifted one-pass statistics equal the two-pass ones, also for a channel whose
    mean is 1e3 times its spread, and padding entries come out 0."""
    from ddgjax.models.common import masked_instance_norm, masked_instance_norm_one_pass
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 6, 4)).astype(np.float32)
    x[..., 1] = 1e3 + 1e-0 * x[..., 1]
    counts = np.array([6, 4, 1])
    nm = np.arange(6)[None, :] < counts[:, None]
    sq = nm[:, :, None] & nm[:, None, :]
    two = np.asarray(masked_instance_norm(jnp.asarray(x), jnp.asarray(sq)))
    one = np.asarray(masked_instance_norm_one_pass(jnp.asarray(x), jnp.asarray(sq)))
    np.testing.assert_allclose(one, two, rtol=1e-4, atol=1e-4)
    assert np.all(one[~sq] == 0)


def test_pair_mlp_kernel_equals_its_reference_and_differentiates_through_it():
    """The Pallas kernel (interpret mode on CPU) computes pair_mlps_reference, for
    float32 and bfloat16, and its custom gradient is the reference's gradient."""
    from ddgjax.models.pair_mlp_kernel import pair_mlps, pair_mlps_reference, supported
    assert supported(4 * 64, 32, 16) and not supported(4 * 7, 32, 16)
    assert not supported(256, 24, 16)
    keys = jax.random.split(jax.random.key(5), 6)
    M, C, H = 192, 32, 16
    args = [jax.random.normal(keys[0], (M, C)), jax.random.normal(keys[1], (2, C, H)) / 6,
            jax.random.normal(keys[2], (2, H)), jax.random.normal(keys[3], (2, H, H)) / 4,
            jax.random.normal(keys[4], (2, H)), jax.random.uniform(keys[5], (M,))]
    for dtype, tol in ((jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)):
        cast = [a.astype(dtype) for a in args]
        out = np.asarray(jnp.stack(pair_mlps(*cast)), np.float32)
        ref = np.asarray(jnp.stack(pair_mlps_reference(*cast)), np.float32)
        assert out.shape == (2, H, M)
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * np.abs(ref).max())
    w = jax.random.normal(keys[0], (2, H, M))
    g = jax.grad(lambda *a: jnp.sum(w * jnp.stack(pair_mlps(*a))), argnums=(0, 1, 3))(*args)
    g_ref = jax.grad(lambda *a: jnp.sum(w * jnp.stack(pair_mlps_reference(*a))),
                     argnums=(0, 1, 3))(*args)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                           g, g_ref)


def _relative_error(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


def test_ppgn_with_the_pallas_kernels_equals_the_xla_path():
    """pallas=True in bfloat16: the kernels run (pallas_call in the program), with the
    same parameters, and give the XLA fused path's outputs up to bfloat16 rounding (with
    padding); a shape the kernels can't tile falls back to XLA; float32 stays on XLA."""
    bf16 = dict(hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16)
    xla = build_model("ppgn", T, fused=True, **bf16)
    fast = build_model("ppgn", T, pallas=True, **bf16)
    params = random_params(build_model("ppgn", T, hidden=16, num_blocks=2))
    adj4, nm4 = random_batch(10, [8, 6, 3, 8], 8)  # 4 * 64 rows: the kernels run
    t4, lv4 = noise_inputs(4, seed=6)
    assert "pallas_call" in str(jax.make_jaxpr(lambda p: fast.apply(p, adj4, nm4, t4, lv4))(params))
    assert _relative_error(fast.apply(params, adj4, nm4, t4, lv4),
                           xla.apply(params, adj4, nm4, t4, lv4)) < 2e-2
    adj, nm = random_batch(9, [7, 4, 3], 7)  # 3 * 49 rows: no tile of 16 or more divides it
    t, lv = noise_inputs(3, seed=5)
    assert "pallas_call" not in str(jax.make_jaxpr(lambda p: fast.apply(p, adj, nm, t, lv))(params))
    f32 = build_model("ppgn", T, hidden=16, num_blocks=2, pallas=True)
    assert "pallas_call" not in str(jax.make_jaxpr(lambda p: f32.apply(p, adj4, nm4, t4, lv4))(params))


def test_pair_mlp_kernel_under_vmap_merges_the_examples():
    """vmap over examples (the per-graph sampler) gives the per-example results, with
    the weights shared or per example (e.g. vmap over seeds)."""
    from ddgjax.models.pair_mlp_kernel import pair_mlps, pair_mlps_reference
    keys = jax.random.split(jax.random.key(6), 6)
    V, M, C, H = 3, 16, 16, 16
    x = jax.random.normal(keys[0], (V, M, C))
    w0, b0 = jax.random.normal(keys[1], (2, C, H)) / 4, jax.random.normal(keys[2], (2, H))
    w1, b1 = jax.random.normal(keys[3], (2, H, H)) / 4, jax.random.normal(keys[4], (2, H))
    s = jax.random.uniform(keys[5], (V, M))
    out = jax.vmap(pair_mlps, in_axes=(0, None, None, None, None, 0))(x, w0, b0, w1, b1, s)
    for v in range(V):
        want = pair_mlps_reference(x[v], w0, b0, w1, b1, s[v])
        for a, b in zip(out, want):
            np.testing.assert_allclose(a[v], b, rtol=1e-5, atol=1e-5)
    w0s = jnp.stack([w0, 2 * w0, -w0])
    out = jax.vmap(pair_mlps, in_axes=(0, 0, None, None, None, 0))(x, w0s, b0, w1, b1, s)
    want = pair_mlps_reference(x[1], w0s[1], b0, w1, b1, s[1])
    np.testing.assert_allclose(out[0][1], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nodes,G", [(4, 6), (8, 6), (6, 8)])
def test_mix_norm_kernel_equals_its_reference_also_under_vmap(nodes, G):
    """The mixing kernel's output and per-graph sums equal the XLA reference, with
    tiles spanning two graphs (nodes 6: 36 rows per graph in 32-row tiles) and masked rows; under vmap
    the examples' rows are merged and the result is per example; gradients flow."""
    from ddgjax.models.mix_norm_kernel import mix_with_stats, mix_with_stats_reference
    keys = jax.random.split(jax.random.key(7), 6)
    C, H = 16, 16
    nsq = nodes * nodes
    M = G * nsq
    x = jax.random.normal(keys[0], (M, C))
    prod = jax.random.normal(keys[1], (H, M))
    wx, wp = jax.random.normal(keys[2], (C, H)) / 4, jax.random.normal(keys[3], (H, H)) / 4
    b = 3.0 + jax.random.normal(keys[4], (H,))
    mask = (jax.random.uniform(keys[5], (M,)) < 0.7).astype(jnp.float32)
    got = mix_with_stats(x, prod, wx, wp, b, mask, nsq)
    want = mix_with_stats_reference(x, prod, wx, wp, b, mask, nsq)
    assert got[1].shape == (G, 2, H)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-4)
    xs, ps, ms = x.reshape(2, M // 2, C), jnp.stack([prod[:, :M // 2], prod[:, M // 2:]]), \
        mask.reshape(2, M // 2)
    got = jax.vmap(lambda a, p, m: mix_with_stats(a, p, wx, wp, b, m, nsq))(xs, ps, ms)
    for v in range(2):
        w = mix_with_stats_reference(xs[v], ps[v], wx, wp, b, ms[v], nsq)
        np.testing.assert_allclose(got[0][v], w[0], rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got[1][v], w[1], rtol=1e-5, atol=1e-3)
    g = jax.grad(lambda w: mix_with_stats(x, prod, w, wp, b, mask, nsq)[0].sum())(wx)
    g_ref = jax.grad(lambda w: mix_with_stats_reference(x, prod, w, wp, b, mask, nsq)[0].sum())(wx)
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("subtiles", [2, 3, 4])
def test_kernels_running_several_tiles_per_program_equal_their_references(monkeypatch,
                                                                           subtiles):
    """``DDGJAX_PAIR_MLP_SUBTILES`` / ``DDGJAX_MIX_SUBTILES``: each program loads the weights
    once and runs several row tiles (the largest count <= the setting that divides the
    tiles); outputs, per-graph sums (tiles spanning two graphs) and the hidden layers of
    the gradient's forward equal the references."""
    from ddgjax.models import pallas_launch
    from ddgjax.models.mix_norm_kernel import mix_with_stats, mix_with_stats_reference
    from ddgjax.models.pair_mlp_kernel import (_forward_with_hidden, hidden_reference,
                                               pair_mlps, pair_mlps_reference)
    monkeypatch.setenv("DDGJAX_PAIR_MLP_SUBTILES", str(subtiles))
    monkeypatch.setenv("DDGJAX_MIX_SUBTILES", str(subtiles))
    # the counts the calls below run with: 4 pair-MLP tiles, 18 mixing tiles
    assert pallas_launch.subtiles("DDGJAX_PAIR_MLP", 4) == {2: 2, 3: 2, 4: 4}[subtiles]
    assert pallas_launch.subtiles("DDGJAX_MIX", 18) == {2: 2, 3: 3, 4: 3}[subtiles]
    keys = jax.random.split(jax.random.key(17), 10)
    M, C, H = 512, 16, 16                                            # 4 tiles of 128
    args = [jax.random.normal(keys[0], (M, C)), jax.random.normal(keys[1], (2, C, H)) / 4,
            jax.random.normal(keys[2], (2, H)), jax.random.normal(keys[3], (2, H, H)) / 4,
            jax.random.normal(keys[4], (2, H)), jax.random.uniform(keys[5], (M,))]
    _all_close_tree(pair_mlps(*args), pair_mlps_reference(*args), 1e-5, 1e-5)
    m0, m1, hidden = _forward_with_hidden(*args)
    _all_close_tree((m0, m1, hidden), pair_mlps_reference(*args) + (hidden_reference(*args[:3]),),
                    1e-5, 1e-5)
    nsq, G = 36, 16                                                  # 6 nodes: 18 tiles of 32 rows
    x, prod = jax.random.normal(keys[6], (nsq * G, C)), jax.random.normal(keys[7], (H, nsq * G))
    wx, wp = jax.random.normal(keys[8], (C, H)) / 4, jax.random.normal(keys[9], (H, H)) / 4
    b = 2.0 + jnp.arange(H, dtype=jnp.float32) / H
    mask = (jax.random.uniform(keys[5], (nsq * G,)) < 0.7).astype(jnp.float32)
    _all_close_tree(mix_with_stats(x, prod, wx, wp, b, mask, nsq),
                    mix_with_stats_reference(x, prod, wx, wp, b, mask, nsq), 1e-5, 1e-5)


def _pallas_and_xla_models(batch_seed, node_counts, noise_seed):
    """A bfloat16 PPGN 2 x 16 with the Pallas kernels and with the XLA fused blocks, the
    same random parameters, and a padded batch (8 nodes at most) with noise inputs."""
    bf16 = dict(hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16)
    fast = build_model("ppgn", T, pallas=True, **bf16)
    xla = build_model("ppgn", T, fused=True, **bf16)
    params = random_params(build_model("ppgn", T, hidden=16, num_blocks=2))
    adj, nm = random_batch(batch_seed, node_counts, 8)
    return fast, xla, params, adj, nm, *noise_inputs(len(node_counts), seed=noise_seed)


def test_ppgn_pallas_model_under_vmap_equals_the_batched_call():
    """The per-graph (vmapped) call of the bfloat16 pallas model, as the kernels' own
    vmap rules see it, matches the batched call and the XLA path, with padding."""
    fast, xla, params, adj, nm, t, lv = _pallas_and_xla_models(11, [8, 6, 5, 8], 7)
    per_graph = lambda m: jax.vmap(lambda a, k, ti, l: m.apply(params, a[None], k[None],
                                                               ti[None], l[None])[0])
    batched = fast.apply(params, adj, nm, t, lv)
    assert _relative_error(per_graph(fast)(adj, nm, t, lv), batched) < 1e-2
    assert _relative_error(per_graph(xla)(adj, nm, t, lv), batched) < 2e-2


def _all_close_tree(got, want, rtol, atol_rel):
    """Every leaf of ``got`` within ``rtol`` and ``atol_rel * max|want|`` of ``want``."""
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol_rel * max(np.abs(b).max(), 1e-6))


def _check_cotangents(loss, kernel, reference, args, bf16_atol_rel):
    """``loss(kernel)``'s gradients for every argument equal ``loss(reference)``'s, in each
    argument's dtype: float32 to rounding, bfloat16 to its precision."""
    for dtype, rtol, atol in ((jnp.float32, 1e-5, 1e-5), (jnp.bfloat16, 5e-2, bf16_atol_rel)):
        cast = [a.astype(dtype) for a in args]
        every = tuple(range(len(args)))
        g = jax.grad(loss(kernel), argnums=every)(*cast)
        g_ref = jax.grad(loss(reference), argnums=every)(*cast)
        assert [x.dtype for x in g] == [dtype] * len(args)
        _all_close_tree(g, g_ref, rtol, atol)


def test_pair_mlp_kernel_gradient_from_residuals_equals_autodiff_of_the_reference():
    """Under differentiation the kernel also writes the hidden layers, and the backward
    (``pair_mlps_backward``, no forward recomputed) gives autodiff's cotangents of the
    reference for all six arguments (the scale's included), in float32 to rounding, in
    bfloat16 to its precision, and per example under vmap."""
    from ddgjax.models.pair_mlp_kernel import (_forward_with_hidden, hidden_reference,
                                               pair_mlps, pair_mlps_reference)
    keys = jax.random.split(jax.random.key(11), 8)
    M, C, H = 128, 16, 16
    args = [jax.random.normal(keys[0], (M, C)), jax.random.normal(keys[1], (2, C, H)) / 4,
            jax.random.normal(keys[2], (2, H)), jax.random.normal(keys[3], (2, H, H)) / 4,
            jax.random.normal(keys[4], (2, H)), jax.random.uniform(keys[5], (M,))]
    w = jax.random.normal(keys[6], (2, H, M))
    loss = lambda f: lambda *a: jnp.sum(w * jnp.stack(f(*a)).astype(jnp.float32))
    _check_cotangents(loss, pair_mlps, pair_mlps_reference, args, 2e-2)
    # the kernel that writes the residual: the same outputs, and the hidden layers
    m0, m1, hidden = _forward_with_hidden(*args)
    _all_close_tree((m0, m1), pair_mlps_reference(*args), 1e-5, 1e-5)
    assert hidden.shape == (M, 2 * H)
    _all_close_tree(hidden, hidden_reference(*args[:3]), 1e-5, 1e-5)
    # per example under vmap: the merged-rows kernel and its backward
    xs, ss = jnp.stack([args[0], -args[0]]), jnp.stack([args[5], 1.0 - args[5]])
    vloss = lambda f: lambda x, w0, s: sum(
        loss(f)(x[v], w0, args[2], args[3], args[4], s[v]) for v in range(2))
    batched = lambda x, w0, s: jnp.sum(jax.vmap(
        lambda xv, sv: jnp.sum(w * jnp.stack(pair_mlps(xv, w0, args[2], args[3], args[4], sv))))(
        x, s))
    g = jax.grad(batched, argnums=(0, 1, 2))(xs, args[1], ss)
    g_ref = jax.grad(vloss(pair_mlps_reference), argnums=(0, 1, 2))(xs, args[1], ss)
    _all_close_tree(g, g_ref, 1e-5, 1e-5)


def test_pair_mlp_backward_drops_the_scale_gemm_when_the_scale_needs_no_gradient():
    """The scale's cotangent costs one GEMM (``m_0`` before scaling); the PPGN's scale
    is no function of parameters, so its compiled gradient must not run that GEMM."""
    from ddgjax.models.pair_mlp_kernel import pair_mlps
    keys = jax.random.split(jax.random.key(12), 4)
    M, C, H = 128, 16, 16
    x, w0 = jax.random.normal(keys[0], (M, C)), jax.random.normal(keys[1], (2, C, H))
    w1, s = jax.random.normal(keys[2], (2, H, H)), jax.random.uniform(keys[3], (M,))
    b = jnp.zeros((2, H))

    def dots(argnums):
        loss = lambda x, w0, w1, s: jnp.sum(jnp.stack(pair_mlps(x, w0, b, w1, b, s)) ** 2)
        hlo = jax.jit(jax.grad(loss, argnums)).lower(x, w0, w1, s).compile().as_text()
        return sum(hlo.count(op) for op in (" dot(", "__cublas$gemm", "__cublas$lt$matmul"))

    assert dots((0, 1, 2)) == dots((0, 1, 2, 3)) - 1


@pytest.mark.parametrize("nodes,G", [(4, 6), (6, 8)])
def test_mix_norm_kernel_gradient_equals_autodiff_of_the_reference(nodes, G):
    """The mixing kernel's backward (``mix_with_stats_backward``, from the inputs and ``y``)
    gives autodiff's cotangents of the reference for all inputs, through both ``y`` and
    the per-graph sums, with tiles spanning two graphs; bfloat16 to its precision."""
    from ddgjax.models.mix_norm_kernel import mix_with_stats, mix_with_stats_reference
    keys = jax.random.split(jax.random.key(13), 8)
    C, H = 16, 16
    nsq = nodes * nodes
    M = G * nsq
    args = [jax.random.normal(keys[0], (M, C)), jax.random.normal(keys[1], (H, M)),
            jax.random.normal(keys[2], (C, H)) / 4, jax.random.normal(keys[3], (H, H)) / 4,
            3.0 + jax.random.normal(keys[4], (H,)),
            (jax.random.uniform(keys[5], (M,)) < 0.7).astype(jnp.float32)]
    wy = jax.random.normal(keys[6], (M, H))
    ws = jax.random.normal(keys[7], (G, 2, H)) / nsq

    def loss(f):
        def run(*a):
            y, sums = f(*a)
            return jnp.sum(wy * y.astype(jnp.float32)) + jnp.sum(ws * sums)
        return run

    _check_cotangents(loss, lambda *a: mix_with_stats(*a, nsq),
                      lambda *a: mix_with_stats_reference(*a, nsq), args, 3e-2)


def test_ppgn_trains_with_the_pallas_kernels_like_the_xla_path(monkeypatch):
    """pallas=True in bfloat16 under jax.grad: the gradient program runs the kernels (the
    pair-MLP one that writes its hidden layers, and the mixing one, in every block) and
    no second forward pass; its parameter gradients equal the XLA fused path's up to
    bfloat16 rounding, with padding."""
    fast, xla, params, adj, nm, t, lv = _pallas_and_xla_models(12, [8, 6, 3, 8], 8)
    w = jax.random.normal(jax.random.key(2), adj.shape)
    loss = lambda m: lambda p: jnp.sum(w * m.apply(p, adj, nm, t, lv))
    jaxpr = str(jax.make_jaxpr(jax.grad(loss(fast)))(params))
    assert jaxpr.count("pallas_call") == 2 * 2                     # 2 kernels x 2 blocks
    assert jaxpr.count("ShapedArray(bfloat16[256,32])") == 2       # the hidden layers [M, 2h]
    # no forward recomputed: the backward never calls the kernels' XLA references
    from ddgjax.models import mix_norm_kernel, pair_mlp_kernel

    def recomputed(*args, **kwargs):
        raise AssertionError("the backward recomputed a kernel's forward")

    with monkeypatch.context() as patch:
        patch.setattr(pair_mlp_kernel, "pair_mlps_reference", recomputed)
        patch.setattr(mix_norm_kernel, "mix_with_stats_reference", recomputed)
        g = jax.grad(loss(fast))(params)
    g_ref = jax.grad(loss(xla))(params)
    flat, flat_ref = (np.concatenate([np.ravel(np.asarray(x, np.float32))
                                      for x in jax.tree_util.tree_leaves(tree)])
                      for tree in (g, g_ref))
    assert _relative_error(flat, flat_ref) < 3e-2


def test_without_pallas_triton_the_triton_kernels_run_their_references(monkeypatch):
    """A JAX without Pallas' Triton backend (deprecated in JAX 0.11): pallas=True still
    samples and trains, the Triton kernels' places taken by their XLA references (no
    pallas_call under the Triton backend, the same outputs and gradients as with the
    kernels up to bfloat16 rounding), and one RuntimeWarning says so."""
    from ddgjax.models import pallas_launch
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "triton")
    fast, xla, params, adj, nm, t, lv = _pallas_and_xla_models(12, [8, 6, 3, 8], 8)
    w = jax.random.normal(jax.random.key(2), adj.shape)
    loss = lambda p: jnp.sum(w * fast.apply(p, adj, nm, t, lv))
    want, want_g = fast.apply(params, adj, nm, t, lv), jax.grad(loss)(params)
    monkeypatch.setattr(pallas_launch, "_triton_importable", lambda: False)
    pallas_launch._warn_no_triton.cache_clear()                     # warn in this test
    with pytest.warns(RuntimeWarning, match="no Pallas Triton backend"):
        program = str(jax.make_jaxpr(lambda p: fast.apply(p, adj, nm, t, lv))(params))
    assert "pallas_call" not in program
    assert "pallas_call" not in str(jax.make_jaxpr(jax.grad(loss))(params))
    assert _relative_error(fast.apply(params, adj, nm, t, lv), want) < 2e-2
    flat = lambda tree: np.concatenate([np.ravel(np.asarray(x, np.float32))
                                        for x in jax.tree_util.tree_leaves(tree)])
    assert _relative_error(flat(jax.grad(loss)(params)), flat(want_g)) < 3e-2


def test_pallas_kernels_stay_off_on_cpu_unless_asked(monkeypatch):
    """On a CPU the kernels would run interpreted (slow): only DDGJAX_PALLAS_INTERPRET=1
    (the tests) turns them on; without it pallas=True takes the XLA path."""
    from ddgjax.models import pallas_launch
    bf16 = dict(hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16, pallas=True)
    fast = build_model("ppgn", T, **bf16)
    params = random_params(build_model("ppgn", T, hidden=16, num_blocks=2))
    adj, nm = random_batch(12, [8, 6, 3, 8], 8)
    t, lv = noise_inputs(4, seed=8)
    program = lambda: str(jax.make_jaxpr(lambda p: fast.apply(p, adj, nm, t, lv))(params))
    assert pallas_launch.available() and "pallas_call" in program()
    monkeypatch.delenv("DDGJAX_PALLAS_INTERPRET")
    assert not pallas_launch.available() and "pallas_call" not in program()


@pytest.mark.parametrize("name,options", [
    ("ppgn", dict(hidden=8, num_blocks=2)), ("edp", dict(hidden=8, num_layers=2)),
    ("ppgn", dict(hidden=8, num_blocks=2, walk_features=2, spectral_features=3,
                  self_condition=True, noise_features="log", dropout=0.1, film=True))])
def test_init_params_do_not_depend_on_the_node_count(name, options):
    """``init_params`` traces at most ``INIT_NODES`` nodes: the same tree and values as
    ``model.init`` on graphs of the data's size."""
    from ddgjax import models
    model = models.build_model(name, num_timesteps=T, **options)
    full = model.init(jax.random.key(7), *models._dummy_inputs(N))
    assert N > models.INIT_NODES
    chex.assert_trees_all_equal(jax.device_get(models.init_params(model, jax.random.key(7), N)),
                                jax.device_get(full))


def test_init_params_runs_on_the_host_cpu_off_a_cpu_backend(monkeypatch):
    """Off a CPU backend ``init_params`` initialises on the CPU device and hands back the
    same values on the default device; under a trace, and without a CPU platform, it
    initialises in place."""
    from ddgjax import models
    model = models.build_model("ppgn", num_timesteps=T, hidden=8, num_blocks=2)
    here = models._init_here(model, jax.random.key(3), N)
    used = []
    real_default_device = jax.default_device

    def spy(device):
        used.append(device.platform)
        return real_default_device(device)

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # as on a GPU machine
    monkeypatch.setattr(jax, "default_device", spy)
    params = models.init_params(model, jax.random.key(3), N)
    assert used == ["cpu"]
    chex.assert_trees_all_equal(jax.device_get(params), jax.device_get(here))
    assert all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(params))
    # traced (e.g. abstract shapes): in place, no host round trip
    shapes = jax.eval_shape(lambda k: models.init_params(model, k, N), jax.random.key(3))
    chex.assert_trees_all_equal_shapes(shapes, here)
    assert used == ["cpu"]
    # no CPU platform: in place

    def no_cpu(*args):
        raise RuntimeError("Unknown backend cpu")

    monkeypatch.setattr(jax, "devices", no_cpu)
    chex.assert_trees_all_equal(jax.device_get(models.init_params(model, jax.random.key(3), N)),
                                jax.device_get(here))
    assert used == ["cpu"]


def test_init_params_never_runs_the_pallas_kernels(monkeypatch):
    """A model with ``pallas=True`` initialises without its kernels, to the parameters of
    the same model without them. On a GPU machine the kernels count as available while
    ``init_params`` runs on the host CPU, where they would be lowered for the CPU and
    crash (found in round 23 on an H200); here that machine is simulated: the kernels
    report themselves available and fail if called."""
    from ddgjax import models
    from ddgjax.models import pair_mlp_kernel, pallas_launch

    def no_kernel(*args, **kwargs):
        raise AssertionError("init_params ran the Pallas kernel")

    monkeypatch.setattr(pallas_launch, "available", lambda: True)
    monkeypatch.setattr(pair_mlp_kernel, "pair_mlps", no_kernel)
    kw = dict(num_timesteps=T, hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16)
    fast = models.build_model("ppgn", pallas=True, **kw)
    with pytest.raises(AssertionError, match="ran the Pallas kernel"):  # the kernel path is live
        fast.init(jax.random.key(3), *models._dummy_inputs(models.INIT_NODES))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")          # as on a GPU machine
    params = models.init_params(fast, jax.random.key(3), N)
    plain = models.build_model("ppgn", pallas=False, **kw)
    chex.assert_trees_all_equal(jax.device_get(params),
                                jax.device_get(models._init_here(plain, jax.random.key(3), N)))


def test_ppgn_film_starts_as_the_plain_model_and_conditions_on_level_and_size():
    """film=True: the plain model's parameters plus the FiLM MLP and one head per block;
    freshly initialised (zero heads) it computes the plain model's logits; with nonzero
    heads it stays permutation equivariant and independent of the padding, and the
    node count reaches the logits through FiLM alone."""
    from ddgjax.models.input_channels import graph_conditions
    plain = build_model("ppgn", T, hidden=8, num_blocks=2, noise_features="log")
    film = build_model("ppgn", T, hidden=8, num_blocks=2, noise_features="log", film=True)
    adj, nm = random_batch(31, [N, N - 2, 5], N)
    t, lv = noise_inputs(B, seed=31)
    fresh = film.init(jax.random.key(0), adj, nm, t, lv)["params"]
    extra = sorted(set(fresh) - set(random_params(plain)["params"]))
    assert extra == ["film_0", "film_1", "film_mlp_0", "film_mlp_1"]
    assert fresh["film_0"]["kernel"].shape == (8, 16)
    assert fresh["film_mlp_0"]["kernel"].shape == (3, 8)   # 2 noise channels + log2(n)/8
    params = random_params(film)
    base = {"params": {k: v for k, v in params["params"].items() if k not in extra}}
    zero_heads = {"params": {**params["params"], **{
        k: jax.tree_util.tree_map(jnp.zeros_like, params["params"][k])
        for k in ("film_0", "film_1")}}}
    np.testing.assert_allclose(film.apply(zero_heads, adj, nm, t, lv),
                               plain.apply(base, adj, nm, t, lv), rtol=1e-6, atol=1e-6)
    apply = jax.jit(film.apply)
    out = np.asarray(apply(params, adj, nm, t, lv))
    assert np.max(np.abs(out - np.asarray(plain.apply(base, adj, nm, t, lv)))) > 1e-3
    perm = np.random.default_rng(2).permutation(N - 2)
    adj_p = np.array(adj)
    adj_p[1, :N - 2, :N - 2] = adj_p[1][np.ix_(perm, perm)]
    np.testing.assert_allclose(np.asarray(apply(params, adj_p, nm, t, lv))[1, :N - 2, :N - 2],
                               out[1][np.ix_(perm, perm)], rtol=1e-4, atol=1e-4)
    adj2, nm2 = pad_to(np.asarray(adj), np.asarray(nm), N + 5)
    np.testing.assert_allclose(np.asarray(apply(params, adj2, nm2, t, lv))[:, :N, :N], out,
                               rtol=1e-4, atol=1e-4)
    cond = np.asarray(graph_conditions(jnp.asarray(lv), jnp.asarray(nm), "log"))
    np.testing.assert_allclose(cond[:, 2], np.log2([N, N - 2, 5]) / 8, rtol=1e-6)
    # the node count through FiLM: only the size column of the MLP's input moved
    moved = jax.tree_util.tree_map(lambda a: a, params)
    moved["params"]["film_mlp_0"]["kernel"] = params["params"]["film_mlp_0"]["kernel"].at[2].add(1.0)
    assert np.max(np.abs(np.asarray(apply(moved, adj, nm, t, lv)) - out)) > 1e-3


@pytest.mark.parametrize("remat", [False, True])
def test_ppgn_film_fused_block_equals_the_reference_block(remat):
    """With FiLM the fused block (and remat) still computes the reference block's
    outputs and gradients in float32, with padding."""
    plain = build_model("ppgn", T, hidden=8, num_blocks=2, film=True)
    fused = build_model("ppgn", T, hidden=8, num_blocks=2, film=True, fused=True, remat=remat)
    params = random_params(plain)
    adj, nm = random_batch(32, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=32)
    out_ref = plain.apply(params, adj, nm, t, lv)
    np.testing.assert_allclose(fused.apply(params, adj, nm, t, lv), out_ref, rtol=2e-5, atol=2e-5)
    loss = lambda m: (lambda p: jnp.sum(jnp.tanh(m.apply(p, adj, nm, t, lv))))
    g_ref, g = jax.grad(loss(plain))(params), jax.grad(loss(fused))(params)
    assert float(jnp.max(jnp.abs(g_ref["params"]["film_1"]["kernel"]))) > 1e-4
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g_ref))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4 * scale), g_ref, g)


def test_ppgn_film_with_the_pallas_kernels_equals_the_xla_path():
    """film=True with pallas=True in bfloat16 (interpret mode on CPU) stays within
    bfloat16 rounding of the XLA fused path."""
    bf16 = dict(hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16, film=True)
    xla = build_model("ppgn", T, fused=True, **bf16)
    fast = build_model("ppgn", T, pallas=True, **bf16)
    params = random_params(build_model("ppgn", T, hidden=16, num_blocks=2, film=True))
    adj4, nm4 = random_batch(33, [8, 6, 3, 8], 8)
    t4, lv4 = noise_inputs(4, seed=33)
    assert "pallas_call" in str(jax.make_jaxpr(lambda p: fast.apply(p, adj4, nm4, t4, lv4))(params))
    assert _relative_error(fast.apply(params, adj4, nm4, t4, lv4),
                           xla.apply(params, adj4, nm4, t4, lv4)) < 2e-2


def test_graph_transformer_reads_the_noise_level_not_t_index(setup):
    """The graph transformer is conditioned on noise_level (through FiLM and its graph
    features), not on t_index; a node_dim that is no multiple of heads is refused by name."""
    model, params, apply = setup["gt"]
    adj, nm = random_batch(43, [6, 6, 6], N)
    adj[1] = adj[2] = adj[0]
    levels = np.array([0.05, 0.45, 0.05], np.float32)
    out = np.asarray(apply(params, adj, nm, np.zeros(B, np.int32), levels))
    assert np.abs(out[0] - out[1]).max() > 1e-4
    np.testing.assert_allclose(out[0], out[2], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(apply(params, adj, nm, np.full(B, 5, np.int32),
                                                   levels)), out)
    with pytest.raises(ValueError, match="config.model.gt.node_dim"):
        build_model("gt", T, num_layers=1, node_dim=6, heads=4).init(
            jax.random.key(0), adj, nm, np.zeros(B, np.int32), levels)


def test_graph_transformer_walk_features_enter_only_through_their_input_rows(setup):
    """walk_features=K adds K rows to the node and edge embeddings (the return
    probabilities, the walk channels): those rows get gradients, and with them zeroed the
    model is the plain graph transformer with the other rows; a negative K is refused."""
    model, params, apply = setup["gt_walk"]
    plain = build_model("gt", T, **CONFIGS["gt"])
    adj, nm = random_batch(61, [8, 5, 3], N)
    t, level = noise_inputs(B, seed=62)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(model.apply(p, adj, nm, t, level) ** 2)))(
        params)
    zeroed = jax.tree_util.tree_map(lambda x: x, params)
    cut = jax.tree_util.tree_map(lambda x: x, params)
    for emb in ("embed_node", "embed_edge"):
        g = np.asarray(grads["params"][emb]["kernel"])
        chex.assert_shape(g, (2 + 3, None))
        assert np.abs(g[2:]).min(axis=1).max() > 0, f"{emb}: walk rows without gradient"
        k = params["params"][emb]["kernel"]
        zeroed["params"][emb] = dict(params["params"][emb], kernel=k.at[2:].set(0.0))
        cut["params"][emb] = dict(params["params"][emb], kernel=k[:2])
    np.testing.assert_allclose(np.asarray(apply(zeroed, adj, nm, t, level)),
                               np.asarray(jax.jit(plain.apply)(cut, adj, nm, t, level)),
                               atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="config.model.gt.walk_features"):
        build_model("gt", T, walk_features=-1, **CONFIGS["gt"]).init(
            jax.random.key(0), adj, nm, t, level)


def test_graph_transformer_pair_readout_equals_a_dense_over_the_concatenation():
    """PairReadout computes Dense_1([e_ij, x_i * x_j, x_i + x_j]) with the same kernel and
    bias, checked against the explicit concatenation in float64."""
    from ddgjax.models.transformer import PairReadout
    rng = np.random.default_rng(3)
    e = rng.standard_normal((2, 5, 5, 3))
    x = rng.standard_normal((2, 5, 4))
    params = {"params": {"kernel": rng.standard_normal((3 + 8, 1)).astype(np.float32),
                         "bias": np.array([0.3], np.float32)}}
    got = np.asarray(PairReadout().apply(params, jnp.asarray(e, jnp.float32),
                                         jnp.asarray(x, jnp.float32)))
    cat = np.concatenate([e, x[:, :, None, :] * x[:, None, :, :],
                          x[:, :, None, :] + x[:, None, :, :]], axis=-1)
    want = cat @ params["params"]["kernel"].astype(np.float64)[:, 0] + 0.3
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    shapes = jax.eval_shape(PairReadout().init, jax.random.key(0), jnp.zeros((1, 2, 2, 3)),
                            jnp.zeros((1, 2, 4)))
    assert shapes["params"]["kernel"].shape == (11, 1)


def test_masked_layer_norm_matches_numpy_and_masks():
    from ddgjax.models.common import masked_layer_norm
    rng = np.random.default_rng(3)
    x = rng.normal(2.0, 3.0, (2, 4, 4, 5)).astype(np.float32)
    mask = np.zeros((2, 4, 4), bool)
    mask[0, :3, :3] = True
    mask[1] = True
    out = np.asarray(masked_layer_norm(jnp.asarray(x), jnp.asarray(mask), 1e-5))
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out[mask], want[mask], rtol=1e-5, atol=1e-5)
    assert not np.any(out[~mask])


@pytest.mark.parametrize("remat", [False, True])
def test_ppgn_layer_norm_fused_equals_reference_is_equivariant_and_padding_free(remat):
    """norm="layer": the same parameter tree as the instance norm's, another function;
    the fused block computes the reference's outputs and gradients; the model stays
    permutation equivariant and independent of the padding; a bad name is an error."""
    plain = build_model("ppgn", T, hidden=8, num_blocks=3, norm="layer")
    fused = build_model("ppgn", T, hidden=8, num_blocks=3, norm="layer", fused=True,
                        remat=remat)
    inst = build_model("ppgn", T, hidden=8, num_blocks=3)
    params = random_params(plain)
    assert (jax.tree_util.tree_structure(params)
            == jax.tree_util.tree_structure(random_params(inst)))
    adj, nm = random_batch(7, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=3)
    out_ref = np.asarray(plain.apply(params, adj, nm, t, lv))
    assert np.max(np.abs(out_ref - np.asarray(inst.apply(params, adj, nm, t, lv)))) > 1e-3
    np.testing.assert_allclose(np.asarray(fused.apply(params, adj, nm, t, lv)), out_ref,
                               rtol=2e-5, atol=2e-5)
    loss = lambda m: (lambda p: jnp.sum(jnp.tanh(m.apply(p, adj, nm, t, lv))))
    g_ref, g = jax.grad(loss(plain))(params), jax.grad(loss(fused))(params)
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g_ref))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4 * scale), g_ref, g)
    perm = np.random.default_rng(1).permutation(N - 3)
    adj_p = np.array(adj)
    adj_p[1, :N - 3, :N - 3] = adj_p[1][np.ix_(perm, perm)]
    out_p = np.asarray(fused.apply(params, adj_p, nm, t, lv))
    np.testing.assert_allclose(out_p[1, :N - 3, :N - 3], out_ref[1][np.ix_(perm, perm)],
                               rtol=1e-4, atol=1e-4)
    adj2, nm2 = pad_to(np.asarray(adj), np.asarray(nm), N + 5)
    np.testing.assert_allclose(np.asarray(fused.apply(params, adj2, nm2, t, lv))[:, :N, :N],
                               out_ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="config.model.ppgn.norm"):
        build_model("ppgn", T, hidden=8, num_blocks=2, norm="batch").init(
            jax.random.key(0), adj, nm, t, lv)


@pytest.mark.parametrize("tile_rows,nodes_sq,tiles", [(128, 3600, 900), (64, 96, 12),
                                                      (16, 16, 5), (64, 160, 10)])
def test_graph_sums_from_tile_parts_equal_float64_sums_per_graph(tile_rows, nodes_sq, tiles):
    """The per-graph sums of per-tile parts (the mixing kernels' statistics) equal float64
    sums of each graph's parts, also with graphs whose rows do not fill whole tiles and
    tiles spanning two graphs."""
    from ddgjax.models.common import graph_sums_from_tile_parts
    assert (tiles * tile_rows) % nodes_sq == 0                    # whole graphs
    rng = np.random.default_rng(tiles)
    partial = rng.standard_normal((tiles, 4, 8)).astype(np.float32)
    graphs = tiles * tile_rows // nodes_sq
    want = np.zeros((graphs, 2, 8))
    for t in range(tiles):
        g = t * tile_rows // nodes_sq
        want[g] += partial[t, :2]
        want[min(g + 1, graphs - 1)] += partial[t, 2:]
    got = graph_sums_from_tile_parts(jnp.asarray(partial), tile_rows, nodes_sq)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=1e-5)
