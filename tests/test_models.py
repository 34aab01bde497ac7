"""Tests of the denoisers (ddgjax.models): output convention, symmetries, padding,
dtypes, noise conditioning, the parameter tree old runs load, and the registry. Tiny
sizes, CPU, the XLA path (the Pallas kernels: tests/test_kernels.py)."""
import re

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from ddgjax.graphs import edge_mask
from ddgjax.models import (EDPGNN, MODELS, PPGN, KernelSettings, build_model, model_fields,
                           model_from_config)
from ddgjax.models.ppgn import PPGNBlock, padded_nodes

from helpers import random_batch

T = 8
CONFIGS = {
    "ppgn": dict(hidden=8, num_blocks=2),
    "edp": dict(num_layers=2, gin_steps=2, channels=3, hidden=8),
}
NAMES = sorted(CONFIGS)
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
        model = build_model(name, T, **CONFIGS[name])
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
    model16 = build_model(name, T, compute_dtype=jnp.bfloat16, **CONFIGS[name])
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
    assert set(MODELS) == {"ppgn", "edp"}
    m = build_model("ppgn", 32, hidden=16, num_blocks=3)
    assert isinstance(m, PPGN) and m.hidden == 16 and m.num_blocks == 3
    assert m.kernels == "xla" and m.kernel_settings == KernelSettings()
    e = build_model("edp", 32)
    assert isinstance(e, EDPGNN) and e.num_levels == 33
    assert (e.num_layers, e.gin_steps, e.channels, e.hidden) == (5, 4, 4, 16)
    assert "num_levels" not in model_fields("edp")
    assert {"kernels", "kernel_settings", "remat", "pad_multiple"} <= set(model_fields("ppgn"))
    with pytest.raises(ValueError, match="valid names.*edp.*ppgn"):
        build_model("gt", 32)
    with pytest.raises(TypeError, match="hiden"):
        build_model("ppgn", 32, hiden=16)
    with pytest.raises(TypeError, match="num_levels"):
        build_model("edp", 32, num_levels=10)
    with pytest.raises(TypeError, match="gin_steps"):
        build_model("ppgn", 32, gin_steps=4)
    with pytest.raises(TypeError, match="fused"):          # a removed field
        build_model("ppgn", 32, fused=True)
    with pytest.raises(ValueError, match="num_timesteps"):
        build_model("edp", 0)


def _config(name="ppgn", dtype="float32", **fields):
    return ml_collections.ConfigDict(dict(
        diffusion=dict(num_timesteps=T),
        model=dict(name=name, compute_dtype=dtype, ppgn=dict(hidden=8, num_blocks=2, **fields),
                   edp=dict(hidden=8))))


def test_model_from_config_reads_the_model_fields_and_kernels():
    """``config.model.ppgn`` holds the PPGN's fields, ``kernels`` among them; the kernel
    settings come from the caller; bad names, dtypes and kernels are errors naming the
    config field."""
    model = model_from_config(_config(dtype="bfloat16", kernels="pallas"))
    assert (model.kernels, model.compute_dtype, model.hidden) == ("pallas", jnp.bfloat16, 8)
    assert model.kernel_settings == KernelSettings()
    settings = KernelSettings(backend="triton", interpret=True)
    assert model_from_config(_config(), settings).kernel_settings == settings
    assert model_from_config(_config()).kernels == "xla"
    assert isinstance(model_from_config(_config("edp")), EDPGNN)
    with pytest.raises(ValueError, match="kernel settings are the PPGN's"):
        model_from_config(_config("edp"), settings)
    with pytest.raises(ValueError, match="config.model.name"):
        model_from_config(_config("gt"))
    with pytest.raises(ValueError, match="config.model.compute_dtype"):
        model_from_config(_config(dtype="float16"))
    adj, nm = random_batch(0, [4, 3], 4)
    with pytest.raises(ValueError, match="config.model.ppgn.kernels"):
        model_from_config(_config(kernels="cuda")).init(jax.random.key(0), adj, nm,
                                                        *noise_inputs(2))


def test_ppgn_parameter_tree_is_the_one_earlier_runs_saved():
    """The names and shapes of every parameter, as runs trained by earlier versions (with
    the plain or the fused block, with or without the kernels) saved them: checkpoints
    restore into this tree (tests/data/run_v0_1: tests/test_sampling.py)."""
    h, c0 = 8, 2
    dense = lambda i, o: {"kernel": (i, o), "bias": (o,)}
    mlp = lambda i: {"dense_0": dense(i, h), "dense_1": dense(h, h)}
    block = {"m1": mlp(h), "m2": mlp(h), "mix": dense(2 * h, h)}
    want = {"embed": dense(c0, h), "block_0": block, "block_1": block,
            "readout": dense(c0 + 2 * h, h), "residual": dense(h, h), "out": dense(h, 1)}
    for kw in (dict(), dict(kernels="pallas", compute_dtype=jnp.bfloat16), dict(remat=True)):
        model = build_model("ppgn", T, hidden=h, num_blocks=2, **kw)
        shapes = jax.eval_shape(model.init, jax.random.key(0), *random_batch(0, [N] * B, N),
                                *noise_inputs(B))
        assert jax.tree_util.tree_map(lambda a: a.shape, shapes["params"]) == want, kw


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
    from ddgjax.models.common import noise_channels
    np.testing.assert_allclose(noise_channels(jnp.asarray([0.0, 1e-8, 1e-4, 0.5]), "log")[:, 1],
                               [0.0, 0.0, 0.5, 1 + np.log10(0.5) / 8], rtol=1e-6, atol=1e-7)
    assert noise_channels(jnp.asarray([0.1, 0.2]), "linear").shape == (2, 1)
    adj, nm = random_batch(3, [4, 3], 4)
    with pytest.raises(ValueError, match="config.model.ppgn.noise_features"):
        build_model("ppgn", T, noise_features="cubic", hidden=8, num_blocks=1).init(
            jax.random.key(0), adj, nm, np.zeros(2, np.int32), np.full(2, 0.1, np.float32))
    model = build_model("ppgn", T, hidden=8, num_blocks=2, noise_features="log")
    params = random_params(model)
    apply = jax.jit(model.apply)
    assert params["params"]["embed"]["kernel"].shape[0] == 3  # adj + two noise channels
    adj, nm = random_batch(5, [N, N - 2, 3], N)
    levels = jnp.asarray([1e-5, 1e-3, 0.3], jnp.float32)
    out = apply(params, adj, nm, jnp.ones(B, jnp.int32), levels)
    perm = np.random.default_rng(0).permutation(N - 2)
    adj_p = np.array(adj)
    adj_p[1, :N - 2, :N - 2] = adj_p[1][np.ix_(perm, perm)]
    out_p = apply(params, adj_p, nm, jnp.ones(B, jnp.int32), levels)
    np.testing.assert_allclose(np.asarray(out_p)[1, :N - 2, :N - 2],
                               np.asarray(out)[1][np.ix_(perm, perm)], rtol=1e-4, atol=1e-4)
    low = apply(params, adj, nm, jnp.ones(B, jnp.int32), jnp.full((B,), 1e-6))
    lowish = apply(params, adj, nm, jnp.ones(B, jnp.int32), jnp.full((B,), 1e-3))
    assert float(jnp.max(jnp.abs(low - lowish))) > 1e-3


@pytest.mark.parametrize("options, m", [(dict(), 6), (dict(), 4),
                                        (dict(noise_features="log", remat=True), 16)])
def test_ppgn_pad_multiple_is_the_same_function_and_gradient(options, m):
    """pad_multiple = m runs the blocks on N rounded up to a multiple of m inside the call:
    the same parameters, outputs ([B, N, N]) and gradients as without it (N = 8 -> 12 and
    -> 16; m dividing N pads nothing); a bad m is an error naming the config field."""
    plain = build_model("ppgn", T, hidden=8, num_blocks=2, **options)
    padded = plain.clone(pad_multiple=m)
    params = random_params(plain)
    adj, nm = random_batch(31, [N, 6, 3], N)
    t, level = noise_inputs(B, seed=32)

    def run(model):
        def loss(p):
            logits = model.apply(p, adj, nm, t, level)
            return jnp.sum(jnp.sin(logits) * (np.arange(N * N).reshape(N, N) % 5)), logits
        (_, logits), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
        return logits, grad

    want_out, want_grad = run(plain)
    out, grad = run(padded)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
        jax.eval_shape(padded.init, jax.random.key(0), adj, nm, t, level))
    chex.assert_shape(out, (B, N, N))
    width = padded_nodes(N, m)     # the blocks run on the padded width, and only there
    jaxpr = str(jax.make_jaxpr(padded.apply)(params, adj, nm, t, level))
    widths = {int(w) for w in re.findall(rf"\[{B},(\d+),\1,8\]", jaxpr)} - {1}
    assert widths == {width}, (m, widths)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
    chex.assert_trees_all_close(grad, want_grad, rtol=1e-4, atol=2e-4)


def test_padded_nodes_rounds_up_and_checks_the_multiple():
    assert [padded_nodes(n, m) for n, m in ((187, 32), (192, 32), (27, 4), (60, 1))] == [
        192, 192, 28, 60]
    adj, nm = random_batch(31, [4, 3], 4)
    for bad in (0, -4, 2.5, True, "8"):
        with pytest.raises(ValueError, match="config.model.ppgn.pad_multiple"):
            build_model("ppgn", T, hidden=8, num_blocks=2, pad_multiple=bad).init(
                jax.random.key(0), adj, nm, *noise_inputs(2))


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
    np.testing.assert_allclose(jax.jit(plain.apply)(params, adj, nm, t, lv),
                               jax.jit(remat.apply)(params, adj, nm, t, lv), rtol=1e-6, atol=1e-6)
    g_plain = jax.jit(jax.grad(loss(plain)))(params)
    g_remat = jax.jit(jax.grad(loss(remat)))(params)
    # float32 sums in another order: compare against each leaf's scale (the biases before
    # an instance norm have gradients that are zero up to rounding)
    scale = max(float(jnp.max(jnp.abs(g))) for g in jax.tree_util.tree_leaves(g_plain))
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale),
        g_plain, g_remat)


def test_ppgn_mixing_bias_cannot_change_the_output_and_gets_a_zero_gradient():
    """The mixing layer's bias is cancelled by the instance norm's mean: moving it leaves
    the logits unchanged (float32 rounding), and its gradient is an exact zero (autodiff's
    would be rounding noise that Adam scales up to full-size steps)."""
    adj, nm = random_batch(7, [N, N - 3, 4], N)
    t, lv = noise_inputs(B, seed=3)
    model = build_model("ppgn", T, hidden=8, num_blocks=2)
    params = random_params(model)
    moved = jax.tree_util.tree_map(lambda x: x, params)
    for k in range(2):
        bias = moved["params"][f"block_{k}"]["mix"]["bias"]
        moved["params"][f"block_{k}"]["mix"]["bias"] = bias + 3.0 + jnp.arange(8.0)
    apply = jax.jit(model.apply)
    out, out_moved = apply(params, adj, nm, t, lv), apply(moved, adj, nm, t, lv)
    np.testing.assert_allclose(out_moved, out, rtol=1e-4, atol=1e-4)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(jnp.tanh(model.apply(p, adj, nm, t, lv)))))(
        params)
    for k in range(2):
        np.testing.assert_array_equal(grads["params"][f"block_{k}"]["mix"]["bias"], 0.0)
    assert float(jnp.max(jnp.abs(grads["params"]["block_0"]["mix"]["kernel"]))) > 1e-2


def test_masked_instance_norm_equals_float64_statistics_and_masks():
    """The one-pass norm's shifted statistics equal float64 two-pass ones, also for a
    channel whose mean is 1e3 times its spread; padding entries come out 0, and a graph
    without nodes gives zeros."""
    from ddgjax.models.common import masked_instance_norm
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 6, 4)).astype(np.float32)
    x[..., 1] = 1e3 + 1e-0 * x[..., 1]
    counts = np.array([6, 4, 1, 0])
    nm = np.arange(6)[None, :] < counts[:, None]
    sq = nm[:, :, None] & nm[:, None, :]
    got = np.asarray(masked_instance_norm(jnp.asarray(x), jnp.asarray(sq)))
    for b, n in enumerate(counts[:3]):
        real = x[b, :n, :n].astype(np.float64)
        want = (real - real.mean((0, 1))) / np.sqrt(real.var((0, 1)) + 1e-5)
        np.testing.assert_allclose(got[b, :n, :n], want, rtol=1e-4, atol=1e-4)
    assert np.all(got[~sq] == 0)


@pytest.mark.parametrize("name,options", [
    ("ppgn", dict(hidden=8, num_blocks=2, noise_features="log")),
    ("edp", dict(hidden=8, num_layers=2))])
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
