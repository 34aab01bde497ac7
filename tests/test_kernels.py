"""The Pallas kernels' settings, the Triton kernels (``ddgjax.kernels.pair_mlp``,
``mix_norm``) against their XLA references in Pallas' interpret mode (CPU), and the PPGN
with ``kernels="pallas"`` against its XLA path: the same parameters and function, forward
and gradient. The Mosaic GPU kernels: tests/test_mgpu_kernels.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.kernels import KernelSettings, settings as kernel_settings
from ddgjax.kernels.common import graph_sums_from_tile_parts
from ddgjax.kernels.mix_norm import mix_with_stats, mix_with_stats_reference
from ddgjax.kernels.pair_mlp import (hidden_reference, make_forward, pair_mlps,
                                     pair_mlps_reference)
from ddgjax.models import build_model
from helpers import random_batch
from test_models import T, noise_inputs, random_params

TRITON = KernelSettings(backend="triton", interpret=True)


def _relative_error(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


def _all_close_tree(got, want, rtol, atol_rel):
    """Every leaf of ``got`` within ``rtol`` and ``atol_rel * max|want|`` of ``want``."""
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol_rel * max(np.abs(b).max(), 1e-6))


def _pair_args(seed, m, c=16, h=16):
    keys = jax.random.split(jax.random.key(seed), 6)
    return [jax.random.normal(keys[0], (m, c)), jax.random.normal(keys[1], (2, c, h)) / 4,
            jax.random.normal(keys[2], (2, h)), jax.random.normal(keys[3], (2, h, h)) / 4,
            jax.random.normal(keys[4], (2, h)), jax.random.uniform(keys[5], (m,))]


def _mix_args(seed, nodes, graphs, c=16, h=16):
    keys = jax.random.split(jax.random.key(seed), 6)
    m = graphs * nodes * nodes
    return [jax.random.normal(keys[0], (m, c)), jax.random.normal(keys[1], (h, m)),
            jax.random.normal(keys[2], (c, h)) / 4, jax.random.normal(keys[3], (h, h)) / 4,
            3.0 + jax.random.normal(keys[4], (h,)),
            (jax.random.uniform(keys[5], (m,)) < 0.7).astype(jnp.float32)]


def test_kernel_settings_are_checked_by_field_and_hashable():
    """Each field is checked where the settings are made (a one-line error naming it);
    equal settings are equal and hash alike (a jit cache keyed on the model is exact)."""
    assert KernelSettings() == KernelSettings() and hash(KernelSettings()) == hash(
        KernelSettings())
    assert KernelSettings(subtiles=2) != KernelSettings()
    for field, bad in (("backend", "cutlass"), ("interpret", 1), ("max_tile_rows", 48),
                       ("subtiles", 0), ("num_warps", True), ("fold_embed", "yes")):
        with pytest.raises(ValueError, match=f"KernelSettings.{field}"):
            KernelSettings(**{field: bad})


def test_backend_choice():
    """Hopper (9.x) takes the Mosaic kernels, everything else (Blackwell's 10.x and 12.x
    have no wgmma) Triton's; ``auto`` resolves by the device (a CPU: Triton's), a named
    backend is kept."""
    for capability, want in (("9.0", "mosaic"), ("9.0a", "mosaic"), ("8.0", "triton"),
                             ("10.0", "triton"), ("12.0", "triton"), ("", "triton")):
        assert kernel_settings.backend_for_capability(capability) == want
    if jax.default_backend() == "cpu":
        assert kernel_settings.kernel_backend(KernelSettings()) == "triton"
    for name in ("triton", "mosaic"):
        assert kernel_settings.kernel_backend(KernelSettings(backend=name)) == name
    assert kernel_settings.subtile_count(KernelSettings(subtiles=4), 18) == 3


def test_pair_mlp_kernel_equals_its_reference_and_differentiates_through_it():
    """The Pallas kernel computes pair_mlps_reference, for float32 and bfloat16, and its
    custom gradient is the reference's gradient."""
    from ddgjax.kernels.pair_mlp import supported
    assert supported(4 * 64, 32, 16, TRITON) and not supported(4 * 7, 32, 16, TRITON)
    assert not supported(256, 24, 16, TRITON)
    M, C, H = 192, 32, 16
    args = _pair_args(5, M, C, H)
    for dtype, tol in ((jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)):
        cast = [a.astype(dtype) for a in args]
        out = np.asarray(jnp.stack(jax.jit(lambda *a: pair_mlps(*a, TRITON))(*cast)), np.float32)
        ref = np.asarray(jnp.stack(jax.jit(pair_mlps_reference)(*cast)), np.float32)
        assert out.shape == (2, H, M)
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * np.abs(ref).max())
    w = jax.random.normal(jax.random.key(0), (2, H, M))
    g = jax.jit(jax.grad(lambda *a: jnp.sum(w * jnp.stack(pair_mlps(*a, TRITON))),
                         argnums=(0, 1, 3)))(*args)
    g_ref = jax.jit(jax.grad(lambda *a: jnp.sum(w * jnp.stack(pair_mlps_reference(*a))),
                             argnums=(0, 1, 3)))(*args)
    _all_close_tree(g, g_ref, 1e-5, 1e-5)


def test_pair_mlp_kernel_under_vmap_merges_the_examples():
    """vmap over examples (the per-graph sampler) gives the per-example results, with
    the weights shared or per example (e.g. vmap over seeds)."""
    V, M = 3, 16
    x, w0, b0, w1, b1, _ = _pair_args(6, M)
    x = jnp.stack([x, -x, 2 * x])
    s = jax.random.uniform(jax.random.key(1), (V, M))
    run = lambda *a: pair_mlps(*a, TRITON)
    out = jax.jit(jax.vmap(run, in_axes=(0, None, None, None, None, 0)))(x, w0, b0, w1, b1, s)
    for v in range(V):
        _all_close_tree([o[v] for o in out], pair_mlps_reference(x[v], w0, b0, w1, b1, s[v]),
                        1e-5, 1e-5)
    w0s = jnp.stack([w0, 2 * w0, -w0])
    out = jax.jit(jax.vmap(run, in_axes=(0, 0, None, None, None, 0)))(x, w0s, b0, w1, b1, s)
    _all_close_tree(out[0][1], pair_mlps_reference(x[1], w0s[1], b0, w1, b1, s[1])[0],
                    1e-5, 1e-5)


def test_pair_mlp_kernel_gradient_from_residuals_equals_autodiff_of_the_reference():
    """Under differentiation the kernel also writes the hidden layers, and the backward
    (``pair_mlps_backward``, no forward recomputed) gives autodiff's cotangents of the
    reference for all six arguments (the scale's included), in float32 to rounding and in
    bfloat16 to its precision."""
    M, H = 128, 16
    args = _pair_args(11, M)
    w = jax.random.normal(jax.random.key(6), (2, H, M))
    loss = lambda f: lambda *a: jnp.sum(w * jnp.stack(f(*a)).astype(jnp.float32))
    kernel = lambda *a: pair_mlps(*a, TRITON)
    for dtype, rtol, atol in ((jnp.float32, 1e-5, 1e-5), (jnp.bfloat16, 5e-2, 2e-2)):
        cast = [a.astype(dtype) for a in args]
        every = tuple(range(len(args)))
        g = jax.jit(jax.grad(loss(kernel), argnums=every))(*cast)
        assert [x.dtype for x in g] == [dtype] * len(args)
        _all_close_tree(g, jax.jit(jax.grad(loss(pair_mlps_reference), argnums=every))(*cast),
                        rtol, atol)
    m0, m1, hidden = jax.jit(make_forward(True, TRITON))(*args)  # the residuals' kernel
    _all_close_tree((m0, m1), jax.jit(pair_mlps_reference)(*args), 1e-5, 1e-5)
    assert hidden.shape == (M, 2 * H)
    _all_close_tree(hidden, jax.jit(hidden_reference)(*args[:3]), 1e-5, 1e-5)


def test_pair_mlp_backward_drops_the_scale_gemm_when_the_scale_needs_no_gradient():
    """The scale's cotangent costs one GEMM (``m_0`` before scaling); the PPGN's scale
    is no function of parameters, so its compiled gradient must not run that GEMM."""
    x, w0, _, w1, _, s = _pair_args(12, 128)
    b = jnp.zeros((2, 16))

    def dots(argnums):
        loss = lambda x, w0, w1, s: jnp.sum(jnp.stack(pair_mlps(x, w0, b, w1, b, s, TRITON)) ** 2)
        hlo = jax.jit(jax.grad(loss, argnums)).lower(x, w0, w1, s).compile().as_text()
        return sum(hlo.count(op) for op in (" dot(", "__cublas$gemm", "__cublas$lt$matmul"))

    assert dots((0, 1, 2)) == dots((0, 1, 2, 3)) - 1


@pytest.mark.parametrize("nodes,G", [(4, 6), (6, 8)])
def test_mix_norm_kernel_equals_its_reference_under_vmap_and_grad(nodes, G):
    """The mixing kernel's output and per-graph sums equal the XLA reference, with tiles
    spanning two graphs (6 nodes: 36 rows per graph in 32-row tiles) and masked rows;
    under vmap the examples' rows are merged; the backward (from the inputs and ``y``)
    gives autodiff's cotangents of the reference for every input, through ``y`` and the
    sums."""
    nsq = nodes * nodes
    args = _mix_args(13, nodes, G)
    x, prod, wx, wp, b, mask = args
    kernel = lambda *a: mix_with_stats(*a, nsq, TRITON)
    reference = lambda *a: mix_with_stats_reference(*a, nsq)
    got, want = jax.jit(kernel)(*args), jax.jit(reference)(*args)
    assert got[1].shape == (G, 2, 16)
    _all_close_tree(got, want, 1e-5, 1e-5)
    M = G * nsq
    xs, ps, ms = x.reshape(2, M // 2, -1), jnp.stack([prod[:, :M // 2], prod[:, M // 2:]]), \
        mask.reshape(2, M // 2)
    got = jax.jit(jax.vmap(lambda a, p, m: kernel(a, p, wx, wp, b, m)))(xs, ps, ms)
    for v in range(2):
        _all_close_tree([g[v] for g in got], reference(xs[v], ps[v], wx, wp, b, ms[v]),
                        1e-5, 1e-5)
    wy = jax.random.normal(jax.random.key(6), (M, 16))
    w_sums = jax.random.normal(jax.random.key(7), (G, 2, 16)) / nsq

    def loss(f):
        def run(*a):
            y, sums = f(*a)
            return jnp.sum(wy * y.astype(jnp.float32)) + jnp.sum(w_sums * sums)
        return run

    every = tuple(range(len(args)))
    for dtype, rtol, atol in ((jnp.float32, 1e-5, 1e-5), (jnp.bfloat16, 5e-2, 3e-2)):
        cast = [a.astype(dtype) for a in args]
        _all_close_tree(jax.jit(jax.grad(loss(kernel), argnums=every))(*cast),
                        jax.jit(jax.grad(loss(reference), argnums=every))(*cast), rtol, atol)


@pytest.mark.parametrize("subtiles", [2, 3])
def test_kernels_running_several_tiles_per_program_equal_their_references(subtiles):
    """``KernelSettings.subtiles``: each program loads the weights once and runs several
    row tiles (the largest count <= the setting that divides the tiles); outputs,
    per-graph sums (tiles spanning two graphs) and the gradient's hidden layers equal the
    references. ``max_tile_rows=32`` caps the pair kernel's tiles (16 of them here)."""
    settings = KernelSettings(backend="triton", interpret=True, subtiles=subtiles,
                              max_tile_rows=32)
    args = _pair_args(17, 512)
    ref = jax.jit(lambda *a: pair_mlps_reference(*a) + (hidden_reference(*a[:3]),))(*args)
    _all_close_tree(jax.jit(lambda *a: pair_mlps(*a, settings))(*args), ref[:2], 1e-5, 1e-5)
    _all_close_tree(jax.jit(make_forward(True, settings))(*args), ref, 1e-5, 1e-5)
    margs = _mix_args(18, 6, 16)                        # 6 nodes: 18 tiles of 32 rows
    _all_close_tree(jax.jit(lambda *a: mix_with_stats(*a, 36, settings))(*margs),
                    jax.jit(lambda *a: mix_with_stats_reference(*a, 36))(*margs), 1e-5, 1e-5)


@pytest.mark.parametrize("tile_rows,nodes_sq,tiles", [(128, 3600, 900), (64, 96, 12),
                                                      (16, 16, 5)])
def test_graph_sums_from_tile_parts_equal_float64_sums_per_graph(tile_rows, nodes_sq, tiles):
    """The per-graph sums of per-tile parts (the mixing kernels' statistics) equal float64
    sums of each graph's parts, also with tiles spanning two graphs."""
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


def _pallas_and_xla_models(batch_seed, node_counts, noise_seed, settings=TRITON):
    """A bfloat16 PPGN 2 x 16 with the Pallas kernels and with XLA, the same random
    parameters, and a padded batch (8 nodes at most) with noise inputs."""
    bf16 = dict(hidden=16, num_blocks=2, compute_dtype=jnp.bfloat16)
    fast = build_model("ppgn", T, kernels="pallas", kernel_settings=settings, **bf16)
    xla = build_model("ppgn", T, **bf16)
    params = random_params(build_model("ppgn", T, hidden=16, num_blocks=2))
    adj, nm = random_batch(batch_seed, node_counts, 8)
    return fast, xla, params, adj, nm, *noise_inputs(len(node_counts), seed=noise_seed)


def test_ppgn_with_the_pallas_kernels_equals_the_xla_path():
    """kernels="pallas" in bfloat16: the kernels run (pallas_call in the program), with the
    same parameters, and give the XLA path's outputs up to bfloat16 rounding (with padding),
    also per graph under vmap; a shape the kernels can't tile, float32, and a CPU without
    ``interpret`` take the XLA path."""
    fast, xla, params, adj, nm, t, lv = _pallas_and_xla_models(10, [8, 6, 3, 8], 6)
    program = lambda m, *a: str(jax.make_jaxpr(lambda p: m.apply(p, *a))(params))
    assert "pallas_call" in program(fast, adj, nm, t, lv)
    batched = jax.jit(fast.apply)(params, adj, nm, t, lv)
    assert _relative_error(batched, jax.jit(xla.apply)(params, adj, nm, t, lv)) < 2e-2
    per_graph = jax.jit(jax.vmap(lambda a, k, ti, l: fast.apply(
        params, a[None], k[None], ti[None], l[None])[0]))(adj, nm, t, lv)
    assert _relative_error(per_graph, batched) < 1e-2
    adj3, nm3 = random_batch(9, [7, 4, 3], 7)  # 3 * 49 rows: no tile of 16 or more divides it
    assert "pallas_call" not in program(fast, adj3, nm3, *noise_inputs(3, seed=5))
    f32 = fast.clone(compute_dtype=jnp.float32)
    assert "pallas_call" not in program(f32, adj, nm, t, lv)
    off = fast.clone(kernel_settings=KernelSettings())     # interpret=False: XLA on a CPU
    if jax.default_backend() == "cpu":
        assert "pallas_call" not in program(off, adj, nm, t, lv)


def test_ppgn_trains_with_the_pallas_kernels_like_the_xla_path(monkeypatch):
    """kernels="pallas" in bfloat16 under jax.grad: the gradient program runs the kernels
    (the pair-MLP one that writes its hidden layers, and the mixing one, in every block)
    and no second forward pass; its parameter gradients equal the XLA path's up to
    bfloat16 rounding, with padding."""
    from ddgjax.kernels import mix_norm, pair_mlp
    fast, xla, params, adj, nm, t, lv = _pallas_and_xla_models(12, [8, 6, 3, 8], 8)
    w = jax.random.normal(jax.random.key(2), adj.shape)
    loss = lambda m: lambda p: jnp.sum(w * m.apply(p, adj, nm, t, lv))
    jaxpr = str(jax.make_jaxpr(jax.grad(loss(fast)))(params))
    assert jaxpr.count("pallas_call") == 2 * 2                     # 2 kernels x 2 blocks
    assert jaxpr.count("ShapedArray(bfloat16[256,32])") == 2       # the hidden layers [M, 2h]

    def recomputed(*args, **kwargs):
        raise AssertionError("the backward recomputed a kernel's forward")

    with monkeypatch.context() as patch:           # the backward calls no XLA reference
        patch.setattr(pair_mlp, "pair_mlps_reference", recomputed)
        patch.setattr(mix_norm, "mix_with_stats_reference", recomputed)
        g = jax.jit(jax.grad(loss(fast)))(params)
    flat = lambda tree: np.concatenate([np.ravel(np.asarray(x, np.float32))
                                        for x in jax.tree_util.tree_leaves(tree)])
    assert _relative_error(flat(g), flat(jax.jit(jax.grad(loss(xla)))(params))) < 3e-2


def test_without_pallas_triton_the_triton_kernels_run_their_references(monkeypatch):
    """A JAX without Pallas' Triton backend (deprecated in JAX 0.11): kernels="pallas"
    still samples and trains, the Triton kernels' places taken by their XLA references
    (no pallas_call; the same outputs and gradients up to bfloat16 rounding), and one
    RuntimeWarning says so."""
    fast, _, params, adj, nm, t, lv = _pallas_and_xla_models(12, [8, 6, 3, 8], 8)
    w = jax.random.normal(jax.random.key(2), adj.shape)
    loss = lambda p: jnp.sum(w * fast.apply(p, adj, nm, t, lv))
    want, want_g = jax.jit(fast.apply)(params, adj, nm, t, lv), jax.jit(jax.grad(loss))(params)
    monkeypatch.setattr(kernel_settings, "_triton_importable", lambda: False)
    kernel_settings._warn_no_triton.cache_clear()                   # warn in this test
    # a new model (other settings): JAX reuses what it traced of the same functions
    fast = fast.clone(kernel_settings=KernelSettings(backend="triton", interpret=True,
                                                     num_stages=2))
    with pytest.warns(RuntimeWarning, match="no Pallas Triton backend"):
        program = str(jax.make_jaxpr(lambda p: fast.apply(p, adj, nm, t, lv))(params))
    assert "pallas_call" not in program
    assert "pallas_call" not in str(jax.make_jaxpr(jax.grad(loss))(params))
    assert _relative_error(jax.jit(fast.apply)(params, adj, nm, t, lv), want) < 2e-2
    flat = lambda tree: np.concatenate([np.ravel(np.asarray(x, np.float32))
                                        for x in jax.tree_util.tree_leaves(tree)])
    assert _relative_error(flat(jax.jit(jax.grad(loss))(params)), flat(want_g)) < 3e-2


def test_init_params_never_runs_the_pallas_kernels(monkeypatch):
    """A model with kernels="pallas" initialises without its kernels, to the parameters of
    the same model without them. On a GPU machine the kernels count as available while
    ``init_params`` runs on the host CPU, where they would be lowered for the CPU and
    crash; here that machine is simulated: the kernel fails if called."""
    from ddgjax import models
    from ddgjax.kernels import pair_mlp

    def no_kernel(*args, **kwargs):
        raise AssertionError("init_params ran the Pallas kernel")

    monkeypatch.setattr(pair_mlp, "pair_mlps", no_kernel)
    kw = dict(num_timesteps=T, hidden=16, num_blocks=1, compute_dtype=jnp.bfloat16)
    fast = models.build_model("ppgn", kernels="pallas", kernel_settings=TRITON, **kw)
    with pytest.raises(AssertionError, match="ran the Pallas kernel"):  # the kernel path is live
        fast.init(jax.random.key(3), *models._dummy_inputs(models.INIT_NODES))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")          # as on a GPU machine
    params = models.init_params(fast, jax.random.key(3), 8)
    plain = models.build_model("ppgn", **kw)
    np.testing.assert_equal(jax.device_get(params),
                            jax.device_get(models._init_here(plain, jax.random.key(3), 8)))
