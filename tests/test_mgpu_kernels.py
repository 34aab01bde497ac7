"""The Mosaic GPU (wgmma) kernels (pair MLPs; mixing layer with the norm statistics)
against their references in the Mosaic GPU interpreter (CPU; ``tests/conftest.py`` pins
the tests to the CPU backend), and through the PPGN model against the Triton kernels. The
compiled kernels were checked on H100/H200 by ``benchmarks/mgpu_kernels.py`` (relative
error against a float32 reference at 1024 x 3600 rows) and by sample quality
(docs/benchmarks.md, round 28)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.models import (build_model, mix_norm_kernel, mix_norm_mgpu, pair_mlp_kernel,
                           pair_mlp_mgpu, pallas_launch, readout_mgpu)
from helpers import random_batch
from test_models import T, noise_inputs, random_params

ON_CPU = jax.default_backend() == "cpu"


def _has_mosaic_pair_kernel(program: str) -> bool:
    """Whether a program holds the Mosaic pair-MLP kernel, plain or warp-specialized."""
    return "pair_mlps_wgmma_kernel" in program or "pair_mlps_ws_wgmma_kernel" in program


def _rel(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


@pytest.mark.parametrize("tiles, max_ctas", [(6, 3), (5, 8), (12, 2)])
def test_kernel_equals_the_reference(tiles, max_ctas):
    """Both outputs, channels first, match the XLA reference on fresh random inputs; 6 tiles
    over 3 CTAs runs the pipeline two steps per CTA, 5 tiles one step on each of 5, 12 over
    2 CTAs six steps each (the double buffers wrap around three times)."""
    args = pair_mlp_mgpu.random_inputs(pair_mlp_mgpu.TILE_ROWS * tiles, seed=tiles)
    x, w0, b0, w1, b1, scale = args
    scale = scale.at[::7].set(0)                       # masked rows, as the PPGN passes them
    got = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, max_ctas=max_ctas,
                                  interpret=ON_CPU)
    want = pair_mlp_kernel.pair_mlps_reference(x, w0, b0, w1, b1, scale)
    for g, w in zip(got, want):
        assert g.shape == w.shape == (128, x.shape[0]) and g.dtype == jnp.bfloat16
        assert np.isfinite(np.asarray(g, np.float32)).all()
        assert _rel(g, w) < 5e-3
    # float32 reference from the same bf16 inputs: bf16-level error only
    ref32 = pair_mlp_kernel.pair_mlps_reference(*(a.astype(jnp.float32) for a in
                                                  (x, w0, b0, w1, b1, scale)))
    assert max(_rel(g, w) for g, w in zip(got, ref32)) < 1e-2
    np.testing.assert_array_equal(np.asarray(got[0])[:, ::7], 0)


@pytest.mark.parametrize("warp_specialized, out_dtype, c", [
    (True, None, 128), (False, jnp.float8_e4m3fn, 128), (True, jnp.float8_e4m3fn, 16)])
def test_kernel_variants_equal_the_reference(warp_specialized, out_dtype, c):
    """The warp-specialized kernel (``DDGJAX_PAIR_WS``) and float8 outputs (the float8
    path: ``m_0`` scaled by ``FP8_A_SCALE`` through ``scale``): each output against the
    float32 reference to the output dtype's rounding (bf16 ~0.3 %, e4m3 ~3 %), with 128 and
    with the folded embedding's 16 input channels; the warp-specialized bf16 result equals
    the plain kernel's exactly (the same products in the same order)."""
    args = pair_mlp_mgpu.random_inputs(pair_mlp_mgpu.TILE_ROWS * 6, c=c, seed=c)
    x, w0, b0, w1, b1, scale = args
    scale = scale.at[::5].set(0)
    f = pair_mlp_kernel.FP8_A_SCALE if out_dtype is not None else 1.0
    got = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale * f, max_ctas=3, interpret=ON_CPU,
                                  out_dtype=out_dtype, warp_specialized=warp_specialized)
    want = pair_mlp_kernel.pair_mlps_reference(*(a.astype(jnp.float32) for a in
                                                 (x, w0, b0, w1, b1, scale)))
    tol = 1e-2 if out_dtype is None else 4e-2
    for g, w, div in zip(got, want, (f, 1.0)):
        assert g.shape == (128, x.shape[0]) and g.dtype == (out_dtype or jnp.bfloat16)
        assert _rel(np.asarray(g, np.float32) / div, w) < tol
    np.testing.assert_array_equal(np.asarray(got[0], np.float32)[:, ::5], 0)
    if warp_specialized and out_dtype is None:
        plain = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, max_ctas=3,
                                        interpret=ON_CPU)
        for g, p in zip(got, plain):
            np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(p, np.float32))


def test_cta_count_and_supported_shapes():
    assert pair_mlp_mgpu.cta_count(57600, 132) == 128
    assert pair_mlp_mgpu.cta_count(7, 132) == 7 and pair_mlp_mgpu.cta_count(133, 132) == 19
    assert pair_mlp_mgpu.supported(64 * 10, 128, 128)
    assert not pair_mlp_mgpu.supported(64 * 10 + 16, 128, 128)   # no whole tiles
    assert not pair_mlp_mgpu.supported(64 * 10, 64, 128)         # 128 channels only
    with pytest.raises(ValueError, match="multiple of 64"):
        pair_mlp_mgpu.pair_mlps(*pair_mlp_mgpu.random_inputs(100), interpret=ON_CPU)


def test_backend_choice(monkeypatch):
    """Hopper (9.x) defaults to the Mosaic kernels, everything else (Blackwell's 10.x and
    12.x have no wgmma) to Triton's; the variable overrides; a bad value is refused."""
    for capability, want in (("9.0", "mosaic"), ("9.0a", "mosaic"), ("8.0", "triton"),
                             ("10.0", "triton"), ("12.0", "triton"), ("", "triton")):
        assert pallas_launch.backend_for_capability(capability) == want
    monkeypatch.delenv("DDGJAX_PALLAS_BACKEND", raising=False)
    if ON_CPU:
        assert pallas_launch.kernel_backend() == "triton"
    for name in ("triton", "mosaic"):
        monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", name.upper())
        assert pallas_launch.kernel_backend() == name
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "cutlass")
    with pytest.raises(ValueError, match="DDGJAX_PALLAS_BACKEND"):
        pallas_launch.kernel_backend()


@pytest.mark.parametrize("graphs, nodes_sq, max_ctas", [(4, 96, 3), (3, 128, 8), (12, 64, 2),
                                                       (8, 96, 2)])
def test_mix_kernel_equals_the_reference(graphs, nodes_sq, max_ctas):
    """y and the per-graph sums match the reference; 96-entry graphs put graph boundaries
    inside 64-row tiles (both partial sums of a tile are used), 3 CTAs run two tiles each;
    on 2 CTAs six tiles each run the three pipeline buffers round twice."""
    args = mix_norm_mgpu.random_inputs(graphs, nodes_sq, seed=graphs)
    got = mix_norm_mgpu.mix_with_stats(*args, nodes_sq, max_ctas=max_ctas, interpret=ON_CPU)
    want = mix_norm_kernel.mix_with_stats_reference(*args, nodes_sq)
    assert got[0].shape == want[0].shape and got[0].dtype == jnp.bfloat16
    assert got[1].shape == want[1].shape == (graphs, 2, 128)
    assert _rel(got[0], want[0]) < 5e-3
    assert _rel(got[1], want[1]) < 1e-4               # float32 sums of the same d
    ref32 = mix_norm_kernel.mix_with_stats_reference(*(a.astype(jnp.float32) for a in args),
                                                     nodes_sq)
    assert _rel(got[0], ref32[0]) < 1e-2 and _rel(got[1], ref32[1]) < 1e-2
    split = np.asarray(mix_norm_mgpu.split_row_mask(args[-1], nodes_sq))
    np.testing.assert_array_equal(split.sum(0), np.asarray(args[-1], np.float32))


def test_mix_kernel_shapes():
    assert mix_norm_mgpu.supported(64 * 6, 96, 128, 128)
    assert not mix_norm_mgpu.supported(36 * 16, 36, 128, 128)    # graphs shorter than a tile
    assert not mix_norm_mgpu.supported(64 * 6, 96, 128, 64)
    with pytest.raises(ValueError, match="multiple of 64"):
        mix_norm_mgpu.mix_with_partial_sums(*mix_norm_mgpu.random_inputs(1, 100)[:5],
                                            jnp.ones((2, 100)), interpret=ON_CPU)


def _compare_settings(monkeypatch, variable, values, num_blocks, batch_seed, noise_seed,
                      out_tol=1e-2, grad_tol=2e-2):
    """A bfloat16 128-channel PPGN with ``pallas``, traced under ``variable`` set to each
    of ``values`` (a new function each time: a new trace). Returns per value the forward
    program and the gradient program (text), the logits, the flat parameter gradients and
    (``"f32_out"``) the float32 XLA model's logits; checks both settings' logits and
    gradients agree to bf16 (relative ``out_tol``, ``grad_tol``)."""
    model = build_model("ppgn", T, hidden=128, num_blocks=num_blocks,
                        compute_dtype=jnp.bfloat16, pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=num_blocks))
    adj, nm = random_batch(batch_seed, [8, 6, 8, 5], 8)   # 4 * 64 rows: one tile per graph
    t, lv = noise_inputs(4, seed=noise_seed)
    flat = lambda g: np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(g)])
    runs = {}
    for value in values:
        monkeypatch.setenv(variable, value)
        apply = lambda p: model.apply(p, adj, nm, t, lv)
        loss = lambda p: (apply(p) * jnp.tanh(adj)).sum()
        runs[value] = dict(program=str(jax.make_jaxpr(apply)(params)),
                           grad_program=str(jax.make_jaxpr(jax.grad(loss))(params)),
                           out=np.asarray(jax.jit(apply)(params)),
                           grad=flat(jax.jit(jax.grad(loss))(params)))
    first, second = (runs[v] for v in values)
    assert np.isfinite(second["out"]).all()
    assert _rel(second["out"], first["out"]) < out_tol
    assert _rel(second["grad"], first["grad"]) < grad_tol
    f32 = build_model("ppgn", T, hidden=128, num_blocks=num_blocks)
    f32_out = np.asarray(jax.jit(lambda p: f32.apply(p, adj, nm, t, lv))(params))
    for run in runs.values():
        run["f32_out"] = f32_out
    return runs


def test_ppgn_with_the_mosaic_kernels_equals_the_triton_kernels(monkeypatch):
    """A bfloat16 PPGN with 128 channels (the width the kernels take) gives the same logits
    and parameter gradients with either backend. Under ``mosaic`` both Mosaic kernels run in
    the forward; the gradient program runs Triton's kernels only (the pair MLPs' writes the
    hidden layers; the Mosaic mixing kernel made the train step slower)."""
    runs = _compare_settings(monkeypatch, "DDGJAX_PALLAS_BACKEND", ("triton", "mosaic"),
                             num_blocks=1, batch_seed=4, noise_seed=2)
    for name, run in runs.items():
        assert _has_mosaic_pair_kernel(run["program"]) == (name == "mosaic")
        assert ("mix_wgmma_kernel" in run["program"]) == (name == "mosaic")
        assert not _has_mosaic_pair_kernel(run["grad_program"])
        assert "mix_wgmma_kernel" not in run["grad_program"]


@pytest.mark.parametrize("readout, sizes, n_max, fold", [("0", [8, 7, 8, 4], 8, ""),
                                                        ("1", [12, 9, 11, 5], 12, ""),
                                                        ("1", [12, 9, 11, 5], 12, "0")])
def test_mosaic_ppgn_under_vmap_equals_the_batched_call(monkeypatch, readout, sizes, n_max,
                                                        fold):
    """The per-graph (vmapped) call, as the completion sampler makes it, merges the graphs'
    rows into one call of each Mosaic kernel (the readout's too, when it is on, with the
    output layer folded in, bf16's default, or not: ``fold="0"``) and matches the batched
    call. With ``n_max = 12`` one graph's 144 rows are no whole number of 64-row tiles, the
    four graphs' 576 are: the readout kernel still runs."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", readout)
    monkeypatch.setenv("DDGJAX_READOUT_FOLD", fold)
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(5, sizes, n_max)
    t, lv = noise_inputs(4, seed=3)
    one = lambda a, k, ti, l: model.apply(params, a[None], k[None], ti[None], l[None])[0]
    program = str(jax.make_jaxpr(jax.vmap(one))(adj, nm, t, lv))
    assert _has_mosaic_pair_kernel(program) and "mix_wgmma_kernel" in program
    assert ("readout_wgmma_kernel" in program) == (readout == "1")
    per_graph = jax.jit(jax.vmap(one))(adj, nm, t, lv)
    batched = jax.jit(lambda: model.apply(params, adj, nm, t, lv))()
    assert _rel(per_graph, batched) < 1e-2


def test_mosaic_takes_bfloat16_only(monkeypatch):
    """Under ``mosaic`` a float32 call (which the PPGN never makes: its kernels are for
    bfloat16) runs Triton's kernels, not the bf16-sized Mosaic ones."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    args = [a.astype(jnp.float32) for a in pair_mlp_mgpu.random_inputs(128)]
    program = str(jax.make_jaxpr(lambda *v: pair_mlp_kernel.pair_mlps(*v))(*args))
    assert "pallas_call" in program and not _has_mosaic_pair_kernel(program)
    margs = [a.astype(jnp.float32) for a in mix_norm_mgpu.random_inputs(2, 64)]
    program = str(jax.make_jaxpr(lambda *v: mix_norm_kernel.mix_with_stats(*v, 64))(*margs))
    assert "pallas_call" in program and "mix_wgmma_kernel" not in program


@pytest.mark.parametrize("blocks, max_ctas, tile_rows",
                         [(8, 3, 64), (2, 2, 64), (1, 2, 64), (8, 3, 128), (1, 1, 128)])
def test_readout_kernel_equals_the_reference(blocks, max_ctas, tile_rows):
    """The readout and residual layer, channels first: 384 rows in tiles of 64 (ring of
    three) or 128 (ring of two) over 1-3 CTAs, with 8, 2 or 1 block outputs (with fewer
    blocks than ring buffers the loads run a tile or two ahead)."""
    args = readout_mgpu.random_inputs(64 * 6, k_blocks=blocks, seed=blocks)
    got = readout_mgpu.readout(*args, max_ctas=max_ctas, interpret=ON_CPU,
                               tile_rows=tile_rows)
    want = readout_mgpu.readout_reference(*args)
    assert got.shape == (128, 64 * 6) and got.dtype == jnp.bfloat16
    assert np.isfinite(np.asarray(got, np.float32)).all()
    assert _rel(got, want) < 5e-3


def test_readout_kernel_takes_the_reference_where_rows_do_not_fit(monkeypatch):
    """A batched call whose rows are no whole number of tiles (3 graphs x 144 rows) runs
    the readout's XLA reference inside ``readout_differentiable`` (no kernel), with the
    ``Linear`` path's logits."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(9, [12, 10, 7], 12)
    t, lv = noise_inputs(3, seed=8)
    out = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("DDGJAX_MGPU_READOUT", flag)
        apply = lambda: model.apply(params, adj, nm, t, lv)
        assert "readout_wgmma_kernel" not in str(jax.make_jaxpr(apply)())
        out[flag] = np.asarray(jax.jit(apply)())
    assert _rel(out["1"], out["0"]) < 1e-2


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


def test_ppgn_with_the_readout_kernel_equals_the_linear_path(monkeypatch):
    """DDGJAX_MGPU_READOUT=1 (with the mosaic backend) runs the readout kernel in the
    forward, with the same parameters, and gives the Linear path's logits; under
    differentiation the XLA reference runs, with the Linear path's gradients to bf16."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    runs = _compare_settings(monkeypatch, "DDGJAX_MGPU_READOUT", ("0", "1"),
                             num_blocks=2, batch_seed=6, noise_seed=4)
    for flag, run in runs.items():
        assert ("readout_wgmma_kernel" in run["program"]) == (flag == "1")
        assert "readout_wgmma_kernel" not in run["grad_program"]
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "yes")
    with pytest.raises(ValueError, match="DDGJAX_MGPU_READOUT"):
        pallas_launch.mosaic_readout()


@pytest.mark.parametrize("fp8", [False, True])
def test_readout_kernel_with_the_output_layer_folded_in(fp8):
    """``w_out``: the kernel writes the logits ``out @ w_out`` (float32 ``[M]``) from the
    ``out`` it stages in bf16: equal to the output layer applied to the unfolded kernel's
    ``out^T`` to ~2^-17 (``split_hi_lo``: bf16 ``hi + lo``), and to the float32 reference to
    bf16 precision; bf16 block outputs, and float8 ones with float8 weights (two CTAs)."""
    f32 = lambda v: v.astype(jnp.float32)
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(64 * 4, k_blocks=3, seed=31)
    w_out = jax.random.normal(jax.random.key(32), (128,)) / 11
    if fp8:
        xs = tuple(pair_mlp_mgpu.to_fp8_saturated(v * 2) for v in xs)
        ws = pair_mlp_mgpu.round_weights_to_fp8(ws.reshape(-1, 128)).reshape(ws.shape)
    args = (x0, xs, w0, ws, b, wr, br)
    got = readout_mgpu.readout(*args, max_ctas=2, interpret=ON_CPU, fp8_weights=fp8,
                               w_out=w_out)
    out_t = readout_mgpu.readout(*args, max_ctas=2, interpret=ON_CPU, fp8_weights=fp8)
    assert got.shape == (64 * 4,) and got.dtype == jnp.float32
    assert _rel(got, jnp.einsum("hm,h->m", f32(out_t), w_out)) < 2e-5
    want = readout_mgpu.readout_logits_reference(f32(x0), tuple(f32(v) for v in xs), f32(w0),
                                                 f32(ws), f32(b), f32(wr), f32(br), w_out)
    assert _rel(got, want) < 5e-3
    hi, lo = jax.jit(readout_mgpu.split_hi_lo)(w_out)
    assert _rel(f32(hi) + f32(lo), w_out) < 2e-5 < _rel(f32(hi), w_out)
    np.testing.assert_array_equal(np.asarray(f32(hi)), np.asarray(f32(hi.astype(jnp.float32)
                                                                        .astype(jnp.bfloat16))))


def test_ppgn_with_the_output_layer_folded_into_the_readout(monkeypatch):
    """DDGJAX_READOUT_FOLD=1 (with the readout kernel) gives the unfolded kernel's logits
    and gradients; the forward program then holds one readout kernel (the vmapped call:
    ``test_mosaic_ppgn_under_vmap_equals_the_batched_call``)."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "1")
    runs = _compare_settings(monkeypatch, "DDGJAX_READOUT_FOLD", ("0", "1"),
                             num_blocks=1, batch_seed=7, noise_seed=5, out_tol=1e-4,
                             grad_tol=1e-5)
    for run in runs.values():
        assert run["program"].count("readout_wgmma_kernel") == 1
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    # unset, a bf16 readout folds (the program of "1", the same logits bit for bit)
    monkeypatch.delenv("DDGJAX_READOUT_FOLD")
    adj6, nm6 = random_batch(7, [8, 6, 8, 5], 8)
    t6, lv6 = noise_inputs(4, seed=5)
    default = np.asarray(jax.jit(lambda p: model.apply(p, adj6, nm6, t6, lv6))(params))
    if ON_CPU:
        np.testing.assert_array_equal(default, runs["1"]["out"])
    else:                        # (a GPU's reductions need not repeat bit for bit)
        assert _rel(default, runs["1"]["out"]) < 1e-4
    monkeypatch.setenv("DDGJAX_READOUT_FOLD", "on")
    with pytest.raises(ValueError, match="DDGJAX_READOUT_FOLD"):
        pallas_launch.readout_fold()


def test_mosaic_kernels_take_16_input_channels():
    """The first block's folded input (16 channels, ``PPGNBlockFused``'s ``embed``): both
    Mosaic kernels against their references, the pair MLPs over 3 CTAs with masked rows,
    the mixing layer with tiles that span two graphs."""
    x, w0, b0, w1, b1, scale = pair_mlp_mgpu.random_inputs(64 * 6, c=16, seed=3)
    scale = scale.at[::5].set(0)
    got = pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, max_ctas=3, interpret=ON_CPU)
    want = pair_mlp_kernel.pair_mlps_reference(x, w0, b0, w1, b1, scale)
    for g, w in zip(got, want):
        assert g.shape == w.shape == (128, 64 * 6)
        assert _rel(g, w) < 5e-3
    x, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(4, 96, seed=5)
    x, wx = x[:, :16], wx[:16]
    got = mix_norm_mgpu.mix_with_stats(x, prod, wx, wp, b, mask, 96, max_ctas=3,
                                       interpret=ON_CPU)
    want = mix_norm_kernel.mix_with_stats_reference(x, prod, wx, wp, b, mask, 96)
    assert _rel(got[0], want[0]) < 5e-3 and _rel(got[1], want[1]) < 1e-4
    assert pair_mlp_mgpu.supported(64 * 10, 16, 128)
    assert mix_norm_mgpu.supported(64 * 6, 96, 16, 128)
    assert not pair_mlp_mgpu.supported(64 * 10, 32, 128)


@pytest.mark.parametrize("backend", ["mosaic", "triton"])
def test_ppgn_with_the_embedding_folded_into_the_first_block(monkeypatch, backend):
    """DDGJAX_FOLD_EMBED=1 (the default) folds the input embedding into the first block's
    kernels (16 input channels instead of the 128-channel embedding) with either backend:
    the same parameters, logits and gradients (to bf16) as the unfolded model, and the
    folded program's first kernels read the 16-channel input. A bad value is refused."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", backend)
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    runs = _compare_settings(monkeypatch, "DDGJAX_FOLD_EMBED", ("0", "1"),
                             num_blocks=2, batch_seed=8, noise_seed=6, out_tol=2e-2)
    # the two round at different places (the embedding's output against the folded
    # weights): each is as close to the float32 model as the other (here ~0.9 % apart)
    err = {v: _rel(run["out"], run["f32_out"]) for v, run in runs.items()}
    assert err["1"] < 1.25 * err["0"] and err["0"] < 1.5e-2, err
    # the unfolded embedding is a [.., 3] x [3, 128] dot; folded, the first kernel reads
    # the input padded to 16 channels
    assert "bf16[256,16]" in runs["1"]["program"] and "bf16[256,16]" not in runs["0"]["program"]
    monkeypatch.delenv("DDGJAX_FOLD_EMBED")
    assert pallas_launch.fold_embed()
    monkeypatch.setenv("DDGJAX_FOLD_EMBED", "on")
    with pytest.raises(ValueError, match="DDGJAX_FOLD_EMBED"):
        pallas_launch.fold_embed()


def test_fp8_product_under_triton(monkeypatch):
    """DDGJAX_FP8_PRODUCT=1 (off by default) under the ``triton`` backend casts the pair
    MLPs' outputs to float8 e4m3 for the per-channel product: its program holds float8
    operands, its logits stay close to the bfloat16 model's (float8 keeps 3 mantissa
    bits), and the product alone is within a few per cent of float32's. A bad value is
    refused."""
    from ddgjax.models.ppgn import channel_matmul_fp8

    a = jax.random.normal(jax.random.key(0), (4, 2, 12, 12)) / 12 ** 0.5   # m1: 1/sqrt(n)
    b = jax.random.normal(jax.random.key(1), (4, 2, 12, 12))
    want = np.einsum("cbik,cbkj->cbij", np.asarray(a), np.asarray(b))
    got = channel_matmul_fp8(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))
    assert got.dtype == jnp.bfloat16 and 5e-3 < _rel(got, want) < 6e-2
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    runs = _compare_settings(monkeypatch, "DDGJAX_FP8_PRODUCT", ("0", "1"), num_blocks=2,
                             batch_seed=9, noise_seed=7, out_tol=5e-2, grad_tol=1e-1)
    assert "f8_e4m3fn" in runs["1"]["program"] and "f8_e4m3fn" not in runs["0"]["program"]
    monkeypatch.delenv("DDGJAX_FP8_PRODUCT")
    assert not pallas_launch.fp8_product()
    monkeypatch.setenv("DDGJAX_FP8_PRODUCT", "true")
    with pytest.raises(ValueError, match="DDGJAX_FP8_PRODUCT"):
        pallas_launch.fp8_product()


def test_fp8_product_under_mosaic(monkeypatch):
    """DDGJAX_FP8_PRODUCT=1 under ``mosaic``: the pair kernel itself writes float8 (no cast
    pass) and the product reads it (``pair_product_fp8``), forward only. The logits stay
    within float8 rounding of the bf16 model's and as close to the float32 model's as a
    few per cent; the parameter gradients are the bf16 path's exactly (its VJP is the bf16
    path's); the per-graph (vmapped) call equals the batched one."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    runs = _compare_settings(monkeypatch, "DDGJAX_FP8_PRODUCT", ("0", "1"), num_blocks=2,
                             batch_seed=9, noise_seed=7, out_tol=5e-2, grad_tol=1e-6)
    fp8, bf16 = runs["1"], runs["0"]
    assert "f8_e4m3fn[128,256]" in fp8["program"]            # the kernel's float8 outputs
    assert "f8_e4m3fn" not in bf16["program"] and "f8_e4m3fn" not in fp8["grad_program"]
    assert fp8["grad_program"] == bf16["grad_program"]
    np.testing.assert_array_equal(fp8["grad"], bf16["grad"])
    assert _rel(fp8["out"], fp8["f32_out"]) < 5e-2
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(5, [8, 7, 8, 4], 8)
    t, lv = noise_inputs(4, seed=3)
    one = lambda a, k, ti, l: model.apply(params, a[None], k[None], ti[None], l[None])[0]
    per_graph = jax.jit(jax.vmap(one))(adj, nm, t, lv)
    batched = jax.jit(lambda: model.apply(params, adj, nm, t, lv))()
    assert _rel(per_graph, batched) < 1e-2


def test_round_to_fp8_rounds_like_float8_and_saturates():
    from ddgjax.models.pair_mlp_mgpu import round_to_fp8

    exact = jnp.array([0.0, 1.0, -1.5, 0.109375, 448.0], jnp.bfloat16)   # e4m3 values
    np.testing.assert_array_equal(np.asarray(round_to_fp8(exact)), np.asarray(exact))
    big = jnp.array([1000.0, -1e4], jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(round_to_fp8(big), np.float32), [448.0, -448.0])
    x = jax.random.normal(jax.random.key(0), (4096,), jnp.float32)
    err = np.abs(np.asarray(round_to_fp8(x)) - np.asarray(x)) / np.abs(np.asarray(x))
    big_enough = np.abs(np.asarray(x)) > 2.0 ** -6                   # e4m3's normal range
    assert round_to_fp8(x).dtype == jnp.float32
    assert 0.0 < err[big_enough].max() <= 2.0 ** -4 + 1e-7             # 3 mantissa bits


@pytest.mark.parametrize("backend", ["triton", "mosaic"])
def test_fp8_activations_probe(monkeypatch, backend):
    """DDGJAX_FP8_ACTIVATIONS_PROBE=1 (off by default, a quality probe): every block's
    product and output pass through float8 in the program, and the logits move by float8
    rounding, not more: within a few per cent of the bf16 model's and of float32's. A bad
    value is refused."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", backend)
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    runs = _compare_settings(monkeypatch, "DDGJAX_FP8_ACTIVATIONS_PROBE", ("0", "1"),
                             num_blocks=2, batch_seed=9, noise_seed=7, out_tol=8e-2,
                             grad_tol=3e-1)
    probe, bf16 = runs["1"], runs["0"]
    assert "f8_e4m3fn" not in bf16["program"]
    assert probe["program"].count("f8_e4m3fn") >= 4           # 2 blocks x (prod, output)
    assert _rel(probe["out"], bf16["out"]) > 1e-3              # the rounding is there
    assert _rel(probe["out"], probe["f32_out"]) < 8e-2
    monkeypatch.setenv("DDGJAX_FP8_ACTIVATIONS_PROBE", "yes")
    with pytest.raises(ValueError, match="DDGJAX_FP8_ACTIVATIONS_PROBE"):
        pallas_launch.fp8_activations_probe()


def test_warp_specialized_pair_kernel_in_the_ppgn(monkeypatch):
    """DDGJAX_PAIR_WS=1 (the default) runs the warp-specialized pair kernel in a Mosaic
    PPGN's forward:
    the same logits as the plain kernel (bit for bit: the same products in the same order)
    and the same gradients. A bad value is refused."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    runs = _compare_settings(monkeypatch, "DDGJAX_PAIR_WS", ("0", "1"), num_blocks=2,
                             batch_seed=3, noise_seed=5)
    assert "pair_mlps_ws_wgmma_kernel" in runs["1"]["program"]
    assert "pair_mlps_ws_wgmma_kernel" not in runs["0"]["program"]
    np.testing.assert_array_equal(runs["1"]["out"], runs["0"]["out"])
    np.testing.assert_array_equal(runs["1"]["grad"], runs["0"]["grad"])
    monkeypatch.delenv("DDGJAX_PAIR_WS")
    assert pallas_launch.pair_warp_specialized()
    monkeypatch.setenv("DDGJAX_PAIR_WS", "yes")
    with pytest.raises(ValueError, match="DDGJAX_PAIR_WS"):
        pallas_launch.pair_warp_specialized()


F8 = jnp.float8_e4m3fn


@pytest.mark.parametrize("warp_specialized", [False, True])
def test_pair_kernel_reads_float8_activations(warp_specialized):
    """A float8 ``x`` (``DDGJAX_FP8_ACTIVATIONS``' block outputs): both pair kernels take it
    into registers as float16 for the first layers and match the float32 reference of the
    same float8 values, to bf16 (bf16 or float8 outputs)."""
    x, w0, b0, w1, b1, scale = pair_mlp_mgpu.random_inputs(64 * 2, seed=11)
    x8 = pair_mlp_mgpu.to_fp8_saturated(x * 3)
    f32 = lambda v: v.astype(jnp.float32)
    want = pair_mlp_kernel.pair_mlps_reference(*(f32(v) for v in (x8, w0, b0, w1, b1, scale)))
    for out_dtype, tol in ((None, 1e-2), (F8, 6e-2)):
        got = pair_mlp_mgpu.pair_mlps(x8, w0, b0, w1, b1, scale, max_ctas=1, interpret=ON_CPU,
                                      warp_specialized=warp_specialized, out_dtype=out_dtype)
        assert got[0].dtype == (out_dtype or jnp.bfloat16)
        for g, w in zip(got, want):
            assert _rel(g.astype(jnp.float32), w) < tol


@pytest.mark.parametrize("x_fp8, prod_fp8", [(True, True), (False, True)])
def test_mix_kernel_reads_float8_activations(x_fp8, prod_fp8):
    """Float8 ``x`` and ``prod`` (the first block reads its bf16 input with a float8
    product): the mixing kernel converts each float8 tile to float16 on chip; ``y`` (bf16)
    and the norm sums match the float32 reference of the same values."""
    x, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(2, 64, seed=12)
    x = pair_mlp_mgpu.to_fp8_saturated(x) if x_fp8 else x
    prod = pair_mlp_mgpu.to_fp8_saturated(prod) if prod_fp8 else prod
    y, sums = mix_norm_mgpu.mix_with_stats(x, prod, wx, wp, b, mask, 64, max_ctas=1,
                                           interpret=ON_CPU)
    f32 = lambda v: v.astype(jnp.float32)
    y_want, sums_want = mix_norm_kernel.mix_with_stats_reference(
        *(f32(v) for v in (x, prod, wx, wp, b, mask)), 64)
    assert y.dtype == jnp.bfloat16
    assert _rel(f32(y), y_want) < 1e-2 and _rel(sums, sums_want) < 1e-4


def test_mix_kernel_writes_its_output_less_the_bias_in_float8():
    """``fp8_out`` (``DDGJAX_FP8_ACTIVATIONS=weights_y``): the mixing kernel writes ``y - b``
    in float8 (saturated), the reference path rounds the same (``float8_shifted``), and the
    norm sums are those of the bf16 output; the setting has no gradient."""
    x, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(2, 64, seed=14)
    x8, p8 = (pair_mlp_mgpu.to_fp8_saturated(v) for v in (x, prod))
    y8, sums8 = mix_norm_mgpu.mix_with_stats(x8, p8, wx, wp, b, mask, 64, max_ctas=1,
                                             interpret=ON_CPU, fp8_out=True)
    y, sums = mix_norm_mgpu.mix_with_stats(x8, p8, wx, wp, b, mask, 64, max_ctas=1,
                                           interpret=ON_CPU)
    f32 = lambda v: v.astype(jnp.float32)
    y_want, sums_want = mix_norm_kernel.mix_with_stats_reference(
        *(f32(v) for v in (x8, p8, wx, wp, b, mask)), 64)
    want8 = mix_norm_kernel.float8_shifted(y_want, b)
    assert y8.dtype == F8 and y8.shape == y.shape
    # float8's rounding of the same d (ties apart): within one e4m3 step of each other
    assert _rel(f32(y8), f32(want8)) < 2e-2
    assert _rel(f32(y8), f32(y) - f32(b)) < 4e-2            # float8 against bf16 rounding
    np.testing.assert_array_equal(np.asarray(sums8), np.asarray(sums))
    assert _rel(sums8, sums_want) < 1e-4
    with pytest.raises(NotImplementedError, match="sampling setting"):
        jax.grad(lambda w: f32(mix_norm_kernel.mix_with_stats(
            x, prod, w, wp, b, mask, 64, fp8_out=True)[0]).sum())(wx)


def test_readout_kernel_reads_float8_activations():
    """Float8 block outputs stream into the readout kernel as float8 and are converted to
    float16 in two alternating buffers; the result matches the float32 reference of the
    same values. Mixed float8 and bf16 block outputs, and float8 at 128-row tiles, are
    refused by name."""
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(64 * 2, k_blocks=3, seed=13)
    xs8 = tuple(pair_mlp_mgpu.to_fp8_saturated(x) for x in xs)
    got = readout_mgpu.readout(x0, xs8, w0, ws, b, wr, br, max_ctas=1, interpret=ON_CPU)
    f32 = lambda v: v.astype(jnp.float32)
    want = readout_mgpu.readout_reference(f32(x0), tuple(f32(x) for x in xs8), w0, ws, b, wr,
                                          br)
    assert got.dtype == jnp.bfloat16 and _rel(f32(got), want) < 1e-2
    with pytest.raises(ValueError, match="all float8 or none"):
        readout_mgpu.readout(x0, (xs8[0], xs[1]), w0, ws[:2], b, wr, br, interpret=ON_CPU)
    with pytest.raises(ValueError, match="tile_rows=64"):
        readout_mgpu.readout(x0, xs8, w0, ws, b, wr, br, interpret=ON_CPU, tile_rows=128)


def test_fp8_weights_round_to_powers_of_two_scales_and_are_stable():
    """``to_fp8_columns``: one power-of-two scale per output column that puts the column's
    largest entry in (224, 448]; all-zero columns get 1; rounding rounded weights again
    changes nothing (what lets the model round and the kernels store the same values)."""
    w = jax.random.normal(jax.random.key(3), (2, 64, 32)) * jnp.logspace(-4, 2, 32)
    w = w.at[1, :, 7].set(0.0)
    w8, scale = pair_mlp_mgpu.to_fp8_columns(w)
    assert w8.dtype == F8 and scale.shape == (2, 32)
    mantissa, _ = np.frexp(np.asarray(scale))
    np.testing.assert_array_equal(mantissa, 0.5)                        # powers of two
    top = np.abs(np.asarray(w)).max(axis=-2) / np.asarray(scale)
    assert (top[np.asarray(scale) != 1.0] > 224).all() and (top <= 448).all()
    assert float(scale[1, 7]) == 1.0
    q = pair_mlp_mgpu.round_weights_to_fp8(w)
    np.testing.assert_array_equal(np.asarray(pair_mlp_mgpu.round_weights_to_fp8(q)),
                                  np.asarray(q))
    np.testing.assert_array_equal(np.asarray(q), np.asarray(
        w8.astype(jnp.float32) * scale[:, None, :]))
    assert 5e-3 < _rel(q, w) < 5e-2                                      # e4m3's rounding


@pytest.mark.parametrize("kernel", ["pair", "mix", "readout", "readout128"])
def test_kernels_with_float8_weights_equal_the_reference_with_rounded_weights(kernel):
    """``fp8_weights=True``: float8 block outputs multiplied by float8 weights (power-of-two
    column scales) in float8 x float8 MMAs. Each kernel equals its float32 reference with
    those weights rounded (``round_weights_to_fp8``; the readout's over all blocks) to bf16
    precision, and differs from the unrounded weights' by about e4m3's rounding. Without
    float8 inputs the setting is refused by name."""
    f32 = lambda v: v.astype(jnp.float32)
    rnd = pair_mlp_mgpu.round_weights_to_fp8
    if kernel == "pair":
        x, w0, b0, w1, b1, scale = pair_mlp_mgpu.random_inputs(64 * 2, seed=21)
        x8 = pair_mlp_mgpu.to_fp8_saturated(x * 3)
        got = pair_mlp_mgpu.pair_mlps(x8, w0, b0, w1, b1, scale, max_ctas=1,
                                      interpret=ON_CPU, warp_specialized=True,
                                      fp8_weights=True)
        ref = lambda w: pair_mlp_kernel.pair_mlps_reference(f32(x8), w, *(
            f32(v) for v in (b0, w1, b1, scale)))
        want, unrounded = ref(rnd(w0)), ref(f32(w0))
        with pytest.raises(ValueError, match="fp8_weights needs a float8 x"):
            pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, interpret=ON_CPU,
                                    warp_specialized=True, fp8_weights=True)
    elif kernel == "mix":
        x, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(2, 64, seed=22)
        # one column of wx a millionth of the rest: a scale of ~2^-27 for it, with which
        # wp / s would overflow float16 in a shared accumulator
        wx = wx.at[:, 3].multiply(1e-6)
        x8, p8 = (pair_mlp_mgpu.to_fp8_saturated(v) for v in (x * 2, prod))
        got = mix_norm_mgpu.mix_with_stats(x8, p8, wx, wp, b, mask, 64, max_ctas=1,
                                           interpret=ON_CPU, fp8_weights=True)
        ref = lambda w: mix_norm_kernel.mix_with_stats_reference(
            f32(x8), f32(p8), w, f32(wp), f32(b), f32(mask), 64)
        want, unrounded = ref(rnd(wx)), ref(f32(wx))
        with pytest.raises(ValueError, match="fp8_weights needs a float8 x"):
            mix_norm_mgpu.mix_with_stats(x, p8, wx, wp, b, mask, 64, interpret=ON_CPU,
                                         fp8_weights=True)
    else:
        x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(64 * 2, k_blocks=3, seed=23)
        xs8 = tuple(pair_mlp_mgpu.to_fp8_saturated(v * 2) for v in xs)
        # (128-row tiles too: without float16 copies of the tiles they fit shared memory)
        got = (readout_mgpu.readout(x0, xs8, w0, ws, b, wr, br, max_ctas=1, interpret=ON_CPU,
                                    fp8_weights=True,
                                    tile_rows=128 if kernel == "readout128" else 64),)
        ref = lambda w: (readout_mgpu.readout_reference(
            f32(x0), tuple(f32(v) for v in xs8), f32(w0), w, f32(b), f32(wr), f32(br)),)
        want, unrounded = ref(rnd(ws.reshape(-1, 128)).reshape(ws.shape)), ref(f32(ws))
        with pytest.raises(ValueError, match="fp8_weights needs float8 block outputs"):
            readout_mgpu.readout(x0, xs, w0, ws, b, wr, br, interpret=ON_CPU,
                                 fp8_weights=True)
    for g, w, u in zip(got, want, unrounded):
        assert np.isfinite(np.asarray(f32(g))).all()
        assert _rel(f32(g), w) < 5e-3, kernel
        assert _rel(f32(g), u) > 3 * _rel(f32(g), w), kernel


def test_mixing_scales_keep_the_product_weights_inside_float16():
    """``mixing_fp8_column_scales``: ``fp8_column_scales(wx)`` wherever ``wp / s`` fits
    float16 (every column of these random weights but the one made tiny), raised where a
    column of ``wx`` is tiny against ``wp``'s; the rounding it defines is
    ``round_weights_to_fp8``'s on the other columns and idempotent."""
    _, _, wx, wp, _, _ = mix_norm_mgpu.random_inputs(1, 64, seed=24)
    wx = wx.at[:, 3].multiply(1e-6)
    own = np.asarray(pair_mlp_mgpu.fp8_column_scales(wx))
    joint = np.asarray(pair_mlp_mgpu.mixing_fp8_column_scales(wx, wp))
    others = np.arange(wx.shape[1]) != 3
    np.testing.assert_array_equal(joint[others], own[others])
    assert joint[3] > own[3] * 1e3
    assert (np.abs(np.asarray(wp, np.float32)) / joint).max() <= pair_mlp_mgpu.F16_OPERAND_LIMIT
    assert (np.abs(np.asarray(wp, np.float32)) / own).max() > 65504           # the overflow
    q = pair_mlp_mgpu.round_mixing_x_weights_to_fp8(wx, wp)
    np.testing.assert_array_equal(np.asarray(q)[:, others],
                                  np.asarray(pair_mlp_mgpu.round_weights_to_fp8(wx))[:, others])
    np.testing.assert_array_equal(
        np.asarray(pair_mlp_mgpu.round_mixing_x_weights_to_fp8(q, wp)), np.asarray(q))


@pytest.mark.parametrize("tiny_column", [False, True])
def test_one_accumulator_mixing_kernel_equals_the_reference(tiny_column):
    """The mixing kernel's one-accumulator float8-weight form (``one_accumulator=True``)
    equals its float32 reference with ``wx`` rounded by ``round_mixing_x_weights_to_fp8``,
    with a column of ``wx`` a millionth of the rest too (where ``wp / s`` with ``wx``'s own
    scale would overflow float16), and the two-accumulator form within bf16 rounding."""
    f32 = lambda v: v.astype(jnp.float32)
    x, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(2, 64, seed=25)
    if tiny_column:
        wx = wx.at[:, 3].multiply(1e-6)
    x8, p8 = (pair_mlp_mgpu.to_fp8_saturated(v) for v in (x * 2, prod))
    run = lambda one: mix_norm_mgpu.mix_with_stats(
        x8, p8, wx, wp, b, mask, 64, max_ctas=1, interpret=ON_CPU, fp8_weights=True,
        one_accumulator=one)
    got, two = run(True), run(False)
    want = mix_norm_kernel.mix_with_stats_reference(
        f32(x8), f32(p8), pair_mlp_mgpu.round_mixing_x_weights_to_fp8(wx, wp), f32(wp),
        f32(b), f32(mask), 64)
    for g, w, t in zip(got, want, two):
        assert np.isfinite(np.asarray(f32(g))).all()
        assert _rel(f32(g), w) < 5e-3
        assert _rel(f32(g), f32(t)) < 1e-2


_FP8_SETTINGS = {
    "plain": {"DDGJAX_MGPU_READOUT": "0"},
    "probe": {"DDGJAX_FP8_ACTIVATIONS_PROBE": "1", "DDGJAX_FP8_PRODUCT": "1",
              "DDGJAX_MGPU_READOUT": "0"},
    "fast": {"DDGJAX_FP8_ACTIVATIONS": "1", "DDGJAX_MGPU_READOUT": "1"},
    "prod": {"DDGJAX_FP8_ACTIVATIONS": "prod", "DDGJAX_MGPU_READOUT": "1"},
    "weights": {"DDGJAX_FP8_ACTIVATIONS": "weights", "DDGJAX_MGPU_READOUT": "1"},
    "weights_y": {"DDGJAX_FP8_ACTIVATIONS": "weights_y", "DDGJAX_MGPU_READOUT": "1"}}
_FP8_VARS = ("DDGJAX_FP8_ACTIVATIONS_PROBE", "DDGJAX_FP8_PRODUCT", "DDGJAX_FP8_ACTIVATIONS",
             "DDGJAX_MGPU_READOUT")


def _set_fp8(monkeypatch, name):
    for var in _FP8_VARS:
        monkeypatch.setenv(var, _FP8_SETTINGS[name].get(var, "0"))


def _fp8_ppgn_runs(monkeypatch, names):
    """A bf16 PPGN of 2 blocks x 128 channels through the Mosaic kernels under each float8
    setting in ``names`` (``_FP8_SETTINGS``), 4 graphs of 64 pair rows (one tile each):
    ``(model, params, inputs, {name: logits}, {name: jaxpr text}, float32 logits)``."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    model = build_model("ppgn", T, hidden=128, num_blocks=2, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=2))
    adj, nm = random_batch(9, [8, 6, 8, 5], 8)           # 4 * 64 rows: one tile per graph
    t, lv = noise_inputs(4, seed=7)
    out, program = {}, {}
    for name in names:
        _set_fp8(monkeypatch, name)
        # a new function per setting: JAX reuses what it traced of the same function
        apply = lambda p: model.apply(p, adj, nm, t, lv)
        program[name] = str(jax.make_jaxpr(apply)(params))
        out[name] = np.asarray(jax.jit(apply)(params))
    f32 = build_model("ppgn", T, hidden=128, num_blocks=2)
    f32_out = np.asarray(jax.jit(lambda p: f32.apply(p, adj, nm, t, lv))(params))
    return model, params, (adj, nm, t, lv), out, program, f32_out


def test_fp8_activations_in_the_ppgn(monkeypatch):
    """DDGJAX_FP8_ACTIVATIONS=1 (off by default) under ``mosaic``: the blocks hand each
    other, and the readout kernel, float8 tensors (the kernels' float8 inputs are in the
    program), and the logits carry the float8 probe's error (``DDGJAX_FP8_ACTIVATIONS_PROBE``,
    the same roundings in XLA, from bfloat16 instead of float16 weights): as far from
    float32's as the probe's, and far from the bf16 model's.
    The per-graph (vmapped) call equals the batched one within that rounding.
    ``prod`` stores only the product in float8 and lands between the two.
    Differentiating it is refused by name (a sampling setting); a bad value too.
    (The reference settings are XLA's readout: the interpreter can stall on the bf16
    readout kernel after the probe's passes; the readout kernel's own tests cover it.)"""
    model, params, (adj, nm, t, lv), out, program, f32_out = _fp8_ppgn_runs(
        monkeypatch, ("plain", "probe", "fast", "prod"))
    assert np.isfinite(out["fast"]).all()
    # block 1's input and the readout's block outputs, as float8 kernel operands
    assert "f8_e4m3fn[256,128]" in program["fast"] and "readout_wgmma_kernel" in program["fast"]
    assert "f8_e4m3fn[256,128]" not in program["probe"]
    # ``prod``: the product alone in float8 (the mixing kernel's [128, 256] operand)
    assert "f8_e4m3fn[256,128]" not in program["prod"] and "f8_e4m3fn[128,256]" in program["prod"]
    err = {name: _rel(o, f32_out) for name, o in out.items()}
    # float8 rounding moves the logits by ~6 % here (random weights); the two paths round
    # the same tensors from slightly different values (float16 against bfloat16 weights),
    # so they land apart by about as much, each as far from float32 as the other
    assert err["plain"] < 2e-2 and err["fast"] < 1.5 * err["probe"] < 0.15, err
    assert err["plain"] < err["prod"] < err["fast"], err
    assert _rel(out["fast"], out["plain"]) > 1e-2
    _set_fp8(monkeypatch, "fast")                  # the per-graph call under ``1``'s settings
    one = lambda a, k, ti, l: model.apply(params, a[None], k[None], ti[None], l[None])[0]
    per_graph = jax.jit(jax.vmap(one))(adj, nm, t, lv)
    # (float8 amplifies summation-order differences: on an H200 the two programs' fusions
    # differ and the logits land 3.8 % apart, within the rounding's own size)
    assert _rel(per_graph, out["fast"]) < err["probe"]
    with pytest.raises(NotImplementedError, match="sampling setting"):
        jax.grad(lambda p: model.apply(p, adj, nm, t, lv).sum())(params)
    monkeypatch.setenv("DDGJAX_FP8_ACTIVATIONS", "2")
    with pytest.raises(ValueError, match="DDGJAX_FP8_ACTIVATIONS"):
        pallas_launch.fp8_activations()


def test_fp8_weights_in_the_ppgn(monkeypatch):
    """``weights`` adds float8 weights to ``1`` (float8 operands of all three kernels) and
    its own rounding, which moves the logits by about as much again as ``1``'s; ``weights_y``
    stores the mixing kernels' outputs (``y - b``, ``[128, 256]`` per call) in float8 too.
    (Its own test, apart from ``test_fp8_activations_in_the_ppgn``, so that the two run in
    parallel; the bounds are that test's, from the same inputs.)"""
    _, _, _, out, program, f32_out = _fp8_ppgn_runs(
        monkeypatch, ("fast", "weights", "weights_y"))
    err = {name: _rel(o, f32_out) for name, o in out.items()}
    assert "f8_e4m3fn[2,128,128]" in program["weights"]          # pair w0, readout blocks
    assert "f8_e4m3fn[128,128]" in program["weights"]            # the mixing layer's wx
    assert "f8_e4m3fn[2,128,128]" not in program["fast"]
    # on the CPU: 0.057 for ``1`` (the probe's, within 1.5x: the test above), 0.080 for
    # ``weights``, 0.105 for ``weights_y``
    assert err["fast"] < err["weights"] < 2 * err["fast"], err
    f8_outs = lambda name: program[name].count("f8_e4m3fn[128,256]")
    assert f8_outs("weights_y") > f8_outs("weights")
    assert np.isfinite(out["weights_y"]).all()
    assert err["weights"] < err["weights_y"] < 2.5 * err["fast"], err


def test_fp8_trained_weights_are_what_the_float8_kernels_store(monkeypatch):
    """A PPGN trained with ``fp8_weights`` (its float8-rounded weights everywhere) gives,
    under ``weights`` (the kernels' float8 weights), exactly what the plain model gives
    with the same parameters: the kernels store the very values it trained with (rounding
    twice changes nothing); and through the bf16 kernels, exactly the plain model with
    the rounded weights. Sampling a model not trained so under the float8 weights warns."""
    import warnings

    from ddgjax.models.ppgn import fp8_rounded_params
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    kw = dict(hidden=128, num_blocks=2, compute_dtype=jnp.bfloat16, pallas=True)
    plain, qat = build_model("ppgn", T, **kw), build_model("ppgn", T, fp8_weights=True, **kw)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=2))
    adj, nm = random_batch(9, [8, 6, 8, 5], 8)           # 4 * 64 rows: one tile per graph
    t, lv = noise_inputs(4, seed=7)
    run = lambda m, p: np.asarray(jax.jit(lambda q: m.apply(q, adj, nm, t, lv))(p))
    _set_fp8(monkeypatch, "weights")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trained = run(qat, params)
    assert not [w for w in caught if "fp8_weights=true" in str(w.message)]   # trained so
    with pytest.warns(UserWarning, match="fp8_weights=true"):
        untrained = run(plain, params)
    np.testing.assert_array_equal(trained, untrained)
    _set_fp8(monkeypatch, "plain")
    got = run(qat, params)
    np.testing.assert_array_equal(got, run(plain, fp8_rounded_params(params, 128, 2)))
    assert _rel(got, run(plain, params)) > 1e-3
