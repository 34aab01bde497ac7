"""The Mosaic GPU (wgmma) kernels (pair MLPs; mixing layer with the norm statistics;
readout) against their references in the Mosaic GPU interpreter (CPU; ``tests/conftest.py``
pins the tests to the CPU backend), and the PPGN with each ``KernelSettings`` choice
against the Triton kernels or the XLA path: the same parameters and function. On a Hopper
GPU the same tests run the compiled kernels."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.kernels import (KernelSettings, mix_norm, mix_norm_mgpu, mgpu, pair_mlp,
                            pair_mlp_mgpu, readout_mgpu)
from ddgjax.models import build_model
from helpers import random_batch
from test_models import T, noise_inputs, random_params

ON_CPU = jax.default_backend() == "cpu"
MOSAIC = KernelSettings(backend="mosaic", interpret=True)
# The interpreter runs the warp-specialized pair kernel and the readout kernel slowly (a few
# seconds a call): the PPGN tests run them only where they test them.
PLAIN = KernelSettings(backend="mosaic", interpret=True, pair_warp_specialized=False,
                       mosaic_readout=False)


def _has_mosaic_pair_kernel(program: str) -> bool:
    """Whether a program holds the Mosaic pair-MLP kernel, plain or warp-specialized."""
    return "pair_mlps_wgmma_kernel" in program or "pair_mlps_ws_wgmma_kernel" in program


def _rel(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


@pytest.mark.parametrize("tiles, max_ctas, c", [(4, 2, 128), (6, 2, 16)])
def test_pair_kernel_equals_the_reference(tiles, max_ctas, c):
    """Both outputs, channels first, match the XLA reference on fresh random inputs, also
    with the folded embedding's 16 input channels; 4 tiles over 2 CTAs run the pipeline
    two steps per CTA, 6 three (the double buffers wrap around). The
    warp-specialized kernel gives the plain kernel's result bit for bit."""
    x, w0, b0, w1, b1, scale = jax.jit(pair_mlp_mgpu.random_inputs, static_argnums=(0, 1, 2, 3))(
        mgpu.TILE_ROWS * tiles, c, 128, tiles + c)
    scale = scale.at[::7].set(0)                       # masked rows, as the PPGN passes them
    # (each call jitted: one compile, instead of one per operation run eagerly)
    kernel = jax.jit(lambda *a, ws=False: pair_mlp_mgpu.pair_mlps(
        *a, max_ctas=max_ctas, interpret=ON_CPU, warp_specialized=ws), static_argnames="ws")
    got = kernel(x, w0, b0, w1, b1, scale)
    want, ref32 = jax.jit(lambda *a: (pair_mlp.pair_mlps_reference(*a),
                                      pair_mlp.pair_mlps_reference(
                                          *(v.astype(jnp.float32) for v in a))))(
        x, w0, b0, w1, b1, scale)
    for g, w, w32 in zip(got, want, ref32):
        assert g.shape == w.shape == (128, x.shape[0]) and g.dtype == jnp.bfloat16
        assert _rel(g, w) < 5e-3 and _rel(g, w32) < 1e-2
    np.testing.assert_array_equal(np.asarray(got[0])[:, ::7], 0)
    ws = kernel(x, w0, b0, w1, b1, scale.astype(jnp.bfloat16), ws=True)
    plain = kernel(x, w0, b0, w1, b1, scale.astype(jnp.bfloat16))
    for g, p in zip(ws, plain):
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(p, np.float32))


def test_cta_count_and_supported_shapes():
    assert mgpu.cta_count(57600, 132) == 128
    assert mgpu.cta_count(7, 132) == 7 and mgpu.cta_count(133, 132) == 19
    assert pair_mlp_mgpu.supported(64 * 10, 128, 128)
    assert pair_mlp_mgpu.supported(64 * 10, 16, 128)
    assert not pair_mlp_mgpu.supported(64 * 10 + 16, 128, 128)   # no whole tiles
    assert not pair_mlp_mgpu.supported(64 * 10, 64, 128)         # 128 or 16 channels only
    assert mix_norm_mgpu.supported(64 * 6, 96, 128, 128)
    assert mix_norm_mgpu.supported(64 * 6, 96, 16, 128)
    assert not mix_norm_mgpu.supported(36 * 16, 36, 128, 128)    # graphs shorter than a tile
    assert not mix_norm_mgpu.supported(64 * 6, 96, 128, 64)
    with pytest.raises(ValueError, match="multiple of 64"):
        pair_mlp_mgpu.pair_mlps(*pair_mlp_mgpu.random_inputs(100), interpret=ON_CPU)
    with pytest.raises(ValueError, match="multiple of 64"):
        mix_norm_mgpu.mix_with_partial_sums(*mix_norm_mgpu.random_inputs(1, 100)[:5],
                                            jnp.ones((2, 100)), interpret=ON_CPU)


@pytest.mark.parametrize("graphs, nodes_sq, max_ctas, c", [(4, 96, 3, 128), (12, 64, 2, 16)])
def test_mix_kernel_equals_the_reference(graphs, nodes_sq, max_ctas, c):
    """y and the per-graph sums match the reference; 96-entry graphs put graph boundaries
    inside 64-row tiles (both partial sums of a tile are used), 3 CTAs run two tiles each;
    on 2 CTAs six tiles each run the three pipeline buffers round twice; 16 input channels
    are the folded embedding's."""
    x, prod, wx, wp, b, mask = jax.jit(mix_norm_mgpu.random_inputs, static_argnums=(0, 1, 2))(
        graphs, nodes_sq, graphs)
    args = (x[:, :c], prod, wx[:c], wp, b, mask)
    # (each call jitted: one compile, instead of one per operation run eagerly)
    got = jax.jit(lambda *a: mix_norm_mgpu.mix_with_stats(*a, nodes_sq, max_ctas=max_ctas,
                                                          interpret=ON_CPU))(*args)
    want = jax.jit(lambda *a: mix_norm.mix_with_stats_reference(*a, nodes_sq))(*args)
    assert got[0].shape == want[0].shape and got[0].dtype == jnp.bfloat16
    assert got[1].shape == want[1].shape == (graphs, 2, 128)
    assert _rel(got[0], want[0]) < 5e-3
    assert _rel(got[1], want[1]) < 1e-4               # float32 sums of the same d
    split = np.asarray(mix_norm_mgpu.split_row_mask(mask, nodes_sq))
    np.testing.assert_array_equal(split.sum(0), np.asarray(mask, np.float32))


def _compare_settings(settings, num_blocks=1, seed=4, grads=False):
    """A bfloat16 128-channel PPGN with ``kernels="pallas"`` under each of ``settings`` (a
    dict name -> KernelSettings), on two graphs of 64 pair rows (a tile each). Returns per
    name the forward and gradient programs (text), the logits and (``grads``) the flat
    parameter gradients, with (``"f32_out"``) the float32 XLA model's logits; checks that
    every setting's logits are the float32 model's to bf16 (2 %), and that the gradients
    agree with the first setting's to bf16."""
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=num_blocks))
    adj, nm = random_batch(seed, [8, 6], 8)
    t, lv = noise_inputs(2, seed=seed)
    flat = lambda g: np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(g)])
    f32 = build_model("ppgn", T, hidden=128, num_blocks=num_blocks)
    f32_out = np.asarray(jax.jit(lambda p: f32.apply(p, adj, nm, t, lv))(params))
    runs = {}
    for name, s in settings.items():
        model = build_model("ppgn", T, hidden=128, num_blocks=num_blocks,
                            compute_dtype=jnp.bfloat16, kernels="pallas", kernel_settings=s)
        apply = lambda p: model.apply(p, adj, nm, t, lv)
        loss = lambda p: (apply(p) * jnp.tanh(adj)).sum()
        run = runs[name] = dict(program=str(jax.make_jaxpr(apply)(params)),
                                grad_program=str(jax.make_jaxpr(jax.grad(loss))(params)),
                                out=np.asarray(jax.jit(apply)(params)), f32_out=f32_out)
        assert np.isfinite(run["out"]).all() and _rel(run["out"], f32_out) < 2e-2, name
        if grads:
            run["grad"] = flat(jax.jit(jax.grad(loss))(params))
    if grads:
        first, *others = runs.values()
        for run in others:
            assert _rel(run["grad"], first["grad"]) < 2e-2
    return runs


def test_ppgn_with_the_mosaic_kernels_equals_the_triton_kernels():
    """A bfloat16 PPGN with 128 channels (the width the kernels take) gives the XLA model's
    logits and the same parameter gradients with either backend. Under ``mosaic`` the
    Mosaic kernels run in the forward (by default the warp-specialized pair kernel and the
    readout kernel); the gradient program runs Triton's kernels only (the pair MLPs' writes
    the hidden layers) and the readout's XLA reference."""
    runs = _compare_settings({"triton": KernelSettings(backend="triton", interpret=True),
                              "mosaic": PLAIN}, grads=True)
    for name, run in runs.items():
        mosaic = name == "mosaic"
        assert ("pair_mlps_wgmma_kernel" in run["program"]) == mosaic
        assert ("mix_wgmma_kernel" in run["program"]) == mosaic
        assert not _has_mosaic_pair_kernel(run["grad_program"])
        assert "mix_wgmma_kernel" not in run["grad_program"]
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        kernels="pallas", kernel_settings=MOSAIC)
    params = random_params(model)
    adj, nm = random_batch(4, [8, 6], 8)
    apply = lambda p: model.apply(p, adj, nm, *noise_inputs(2))
    program = str(jax.make_jaxpr(apply)(params))
    assert "pair_mlps_ws_wgmma_kernel" in program and "readout_wgmma_kernel" in program
    grad_program = str(jax.make_jaxpr(jax.grad(lambda p: apply(p).sum()))(params))
    assert not _has_mosaic_pair_kernel(grad_program)
    assert "readout_wgmma_kernel" not in grad_program


def test_mosaic_ppgn_under_vmap_equals_the_batched_call():
    """The per-graph (vmapped) call, as the completion sampler makes it, merges the graphs'
    rows into one call of each Mosaic kernel, the readout's included, and matches the
    batched call. One graph's 144 rows are no whole number of 64-row tiles, the four
    graphs' 576 are: the readout kernel still runs. (The readout without the output layer
    under vmap: ``test_readout_kernel_under_vmap``; the norm kernel's: test_norm_kernel.py.)"""
    settings = KernelSettings(backend="mosaic", interpret=True, pair_warp_specialized=False)
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        kernels="pallas", kernel_settings=settings)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(5, [12, 9, 11, 5], 12)
    t, lv = noise_inputs(4, seed=3)
    one = lambda a, k, ti, l: model.apply(params, a[None], k[None], ti[None], l[None])[0]
    program = str(jax.make_jaxpr(jax.vmap(one))(adj, nm, t, lv))
    assert _has_mosaic_pair_kernel(program) and "mix_wgmma_kernel" in program
    assert program.count("readout_wgmma_kernel") == 1
    per_graph = jax.jit(jax.vmap(one))(adj, nm, t, lv)
    batched = jax.jit(lambda: model.apply(params, adj, nm, t, lv))()
    assert _rel(per_graph, batched) < 1e-2


def test_mosaic_takes_bfloat16_only():
    """Under ``mosaic`` a float32 call (which the PPGN never makes: its kernels are for
    bfloat16) runs Triton's kernels, not the bf16-sized Mosaic ones."""
    args = [a.astype(jnp.float32) for a in pair_mlp_mgpu.random_inputs(128)]
    program = str(jax.make_jaxpr(lambda *v: pair_mlp.pair_mlps(*v, MOSAIC))(*args))
    assert "pallas_call" in program and not _has_mosaic_pair_kernel(program)
    margs = [a.astype(jnp.float32) for a in mix_norm_mgpu.random_inputs(2, 64)]
    program = str(jax.make_jaxpr(lambda *v: mix_norm.mix_with_stats(*v, 64, MOSAIC))(*margs))
    assert "pallas_call" in program and "mix_wgmma_kernel" not in program


@pytest.mark.parametrize("blocks, max_ctas, tile_rows", [(8, 3, 64), (1, 2, 64), (2, 3, 128)])
def test_readout_kernel_equals_the_reference(blocks, max_ctas, tile_rows):
    """The readout and residual layer, channels first: 384 rows in tiles of 64 (ring of
    three) or 128 (ring of two) over 2-3 CTAs, with 8, 2 or 1 block outputs (with fewer
    blocks than ring buffers the loads run a tile or two ahead)."""
    args = jax.jit(readout_mgpu.random_inputs, static_argnums=(0, 1, 2, 3))(64 * 6, 3, blocks,
                                                                           blocks)
    # (each call jitted: one compile, instead of one per operation run eagerly)
    got = jax.jit(lambda *a: readout_mgpu.readout(*a, max_ctas=max_ctas, interpret=ON_CPU,
                                                  tile_rows=tile_rows))(*args)
    want = jax.jit(readout_mgpu.readout_reference)(*args)
    assert got.shape == (128, 64 * 6) and got.dtype == jnp.bfloat16
    assert np.isfinite(np.asarray(got, np.float32)).all()
    assert _rel(got, want) < 5e-3


def test_readout_kernel_with_the_output_layer_folded_in():
    """``w_out``: the kernel writes the logits ``out @ w_out`` (float32 ``[M]``) from the
    ``out`` it stages in bf16: equal to the output layer applied to the unfolded kernel's
    ``out^T`` to ~2^-17 (``split_hi_lo``: bf16 ``hi + lo``), and to the float32 reference to
    bf16 precision."""
    f32 = lambda v: v.astype(jnp.float32)
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(64 * 4, k_blocks=3, seed=31)
    w_out = jax.random.normal(jax.random.key(32), (128,)) / 11
    args = (x0, xs, w0, ws, b, wr, br)
    # (each call jitted: one compile, instead of one per operation run eagerly)
    kernel = jax.jit(lambda *a, w_out=None: readout_mgpu.readout(*a, max_ctas=2,
                                                                 interpret=ON_CPU, w_out=w_out))
    got = kernel(*args, w_out=w_out)
    out_t = kernel(*args)
    assert got.shape == (64 * 4,) and got.dtype == jnp.float32
    assert _rel(got, jnp.einsum("hm,h->m", f32(out_t), w_out)) < 2e-5
    want = jax.jit(readout_mgpu.readout_logits_reference)(
        f32(x0), tuple(f32(v) for v in xs), f32(w0), f32(ws), f32(b), f32(wr), f32(br), w_out)
    assert _rel(got, want) < 5e-3
    hi, lo = jax.jit(readout_mgpu.split_hi_lo)(w_out)
    assert _rel(f32(hi) + f32(lo), w_out) < 2e-5 < _rel(f32(hi), w_out)
    np.testing.assert_array_equal(np.asarray(f32(hi)), np.asarray(f32(hi.astype(jnp.float32)
                                                                        .astype(jnp.bfloat16))))


def test_readout_kernel_shapes():
    assert readout_mgpu.supported(64 * 10, 3, [128] * 8, 128)
    assert not readout_mgpu.supported(64 * 10, 17, [128] * 8, 128)     # too many inputs
    assert not readout_mgpu.supported(64 * 10, 3, [128, 64], 128)
    assert not readout_mgpu.supported(64 * 10 + 8, 3, [128] * 8, 128)
    assert readout_mgpu.supported_widths(3, [128] * 8, 128)
    assert not readout_mgpu.supported_widths(3, [128, 64], 128)
    with pytest.raises(ValueError, match="multiple of 64"):
        readout_mgpu.readout(*readout_mgpu.random_inputs(100, k_blocks=1), interpret=ON_CPU)
    with pytest.raises(ValueError, match="tile_rows"):
        readout_mgpu.readout(*readout_mgpu.random_inputs(256, k_blocks=1), interpret=ON_CPU,
                             tile_rows=256)
    with pytest.raises(ValueError, match="ring must be at least 2"):
        readout_mgpu.readout(*readout_mgpu.random_inputs(128, k_blocks=1), interpret=ON_CPU,
                             ring=1)


@pytest.mark.parametrize("fold", [True, False])
def test_readout_kernel_under_vmap(fold):
    """Under ``vmap`` (the per-graph samplers) the examples' rows are one kernel call (four
    of 144 rows: no example alone fills whole tiles), with the output layer folded in or
    not: the per-example references' results."""
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(4 * 144, k_blocks=2, seed=41)
    w_out = jax.random.normal(jax.random.key(42), (128,)) / 11
    per = lambda v: v.reshape((4, 144) + v.shape[1:])
    run = lambda a, bs: readout_mgpu.readout_differentiable(
        a, bs, w0, ws, b, wr, br, w_out=w_out if fold else None, interpret=ON_CPU)
    program = str(jax.make_jaxpr(jax.vmap(run))(per(x0), tuple(per(x) for x in xs)))
    assert program.count("readout_wgmma_kernel") == 1
    got = jax.jit(jax.vmap(run))(per(x0), tuple(per(x) for x in xs))
    ref = (readout_mgpu.readout_logits_reference if fold else readout_mgpu.readout_reference)
    for v in range(4):
        want = ref(per(x0)[v], tuple(per(x)[v] for x in xs), w0, ws, b, wr, br,
                   *((w_out,) if fold else ()))
        assert _rel(got[v], want) < 5e-3


def test_ppgn_readout_kernel_settings_give_the_xla_readout():
    """``mosaic_readout`` with the output layer folded into the kernel (the default) or not:
    the same parameters and the float32 model's logits to bf16, the two within ~1e-4 of
    each other; under differentiation the XLA reference runs. A batch whose rows are no
    whole number of tiles (3 graphs x 144 rows) runs no readout kernel (and Triton's
    block kernels, whose tiles are smaller)."""
    kw = dict(backend="mosaic", interpret=True, pair_warp_specialized=False)
    runs = _compare_settings({"fold": KernelSettings(**kw),
                              "unfolded": KernelSettings(readout_fold=False, **kw)})
    assert _rel(runs["fold"]["out"], runs["unfolded"]["out"]) < 1e-4
    for run in runs.values():
        assert run["program"].count("readout_wgmma_kernel") == 1
        assert "readout_wgmma_kernel" not in run["grad_program"]
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        kernels="pallas", kernel_settings=KernelSettings(**kw))
    adj, nm = random_batch(9, [12, 10, 7], 12)
    program = str(jax.make_jaxpr(lambda p: model.apply(p, adj, nm, *noise_inputs(3)))(
        random_params(model)))
    assert "pallas_call" in program and "readout_wgmma_kernel" not in program


@pytest.mark.parametrize("backend", ["mosaic", "triton"])
def test_ppgn_with_the_embedding_folded_into_the_first_block(backend):
    """``fold_embed`` (the default) folds the input embedding into the first block's kernels
    (16 input channels instead of the 128-channel embedding) with either backend: the same
    parameters, logits and gradients (to bf16) as the unfolded model, and the folded
    program's first kernels read the 16-channel input, in training's gradient too (whose
    forward is Triton's under either backend: its gradients are compared under triton)."""
    kw = dict(backend=backend, interpret=True, pair_warp_specialized=False,
              mosaic_readout=False)
    runs = _compare_settings({"unfolded": KernelSettings(fold_embed=False, **kw),
                              "folded": KernelSettings(**kw)}, seed=8,
                             grads=backend == "triton")
    # the two round at different places (the embedding's output against the folded
    # weights): each is as close to the float32 model as the other
    err = {v: _rel(run["out"], run["f32_out"]) for v, run in runs.items()}
    assert err["folded"] < 1.25 * err["unfolded"] + 1e-3, err
    for program in ("program", "grad_program"):
        assert "bf16[128,16]" in runs["folded"][program]
        assert "bf16[128,16]" not in runs["unfolded"][program]
