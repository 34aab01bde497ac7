"""The instance norm's Mosaic GPU kernel (``norm_mgpu``, ``DDGJAX_NORM_KERNEL=1``) against
its XLA reference in the Mosaic GPU interpreter, and through the PPGN against the XLA
norm it replaces: the same function (FiLM folded in), under ``vmap`` and under
differentiation too."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.models import build_model, mix_norm_mgpu, norm_mgpu, pallas_launch, pair_mlp_mgpu
from ddgjax.models.common import instance_norm_from_sums
from ddgjax.models.ppgn import film_modulate
from helpers import random_batch
from test_models import T, noise_inputs, random_params

FP8 = pair_mlp_mgpu.FP8


def _rel(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


def _inputs(graphs: int, nodes_sq: int, seed: int = 0):
    ks = jax.random.split(jax.random.key(seed), 4)
    m = graphs * nodes_sq
    y = 3.0 * jax.random.normal(ks[0], (m, 128)) + 1.0
    affine = jnp.stack([jax.random.uniform(ks[1], (graphs, 128), minval=0.2, maxval=2.0),
                        jax.random.normal(ks[2], (graphs, 128))], axis=1)
    mask = (jax.random.uniform(ks[3], (m,)) < 0.8).astype(jnp.float32)
    return y, affine, mask


@pytest.mark.parametrize("y_dtype, out_dtype, graphs, nodes_sq, max_ctas", [
    (jnp.bfloat16, FP8, 4, 96, 3),            # 6 tiles, two of them span two graphs
    (FP8, FP8, 3, 128, 2),                    # tiles within graphs
    (jnp.bfloat16, jnp.bfloat16, 16, 100, 5)])
def test_norm_kernel_equals_the_reference(y_dtype, out_dtype, graphs, nodes_sq, max_ctas):
    """Each row takes its own graph's map (also in the tiles that span two graphs), the
    padding rows are 0, a float8 output saturates at +-448 (a large offset here)."""
    y, affine, mask = _inputs(graphs, nodes_sq)
    affine = affine.at[1, 1, :4].set(1000.0)                           # saturates
    y = y.astype(y_dtype)
    got = norm_mgpu.normalize_rows(y.T, affine, mix_norm_mgpu.split_row_mask(mask, nodes_sq),
                                   nodes_sq, out_dtype, max_ctas=max_ctas, interpret=True)
    want = norm_mgpu.normalize_reference(y, affine, mask, nodes_sq, out_dtype)
    assert got.dtype == jnp.dtype(out_dtype) and got.shape == y.shape
    got, want = (np.asarray(v.astype(jnp.float32)) for v in (got, want))
    # the same products and sums, up to one rounding of the output dtype
    tol = 2.0 ** -3 if out_dtype is FP8 else 2.0 ** -7
    np.testing.assert_allclose(got, want, rtol=tol, atol=1e-2)
    assert np.mean(got == want) > 0.99
    assert (got[np.asarray(mask) == 0] == 0).all()
    if out_dtype is FP8:
        assert np.abs(got).max() == 448.0


@pytest.mark.parametrize("with_film", [False, True])
def test_affine_from_sums_is_the_instance_norm(with_film):
    """The map from the sums gives ``instance_norm_from_sums`` (then FiLM's scale and
    shift) on the real entries."""
    graphs, n = 3, 6
    ks = jax.random.split(jax.random.key(1), 3)
    y = 2.0 * jax.random.normal(ks[0], (graphs, n, n, 128)) + 0.5
    sizes = jnp.array([6, 4, 5])
    node = jnp.arange(n)[None] < sizes[:, None]
    mask = node[:, :, None] & node[:, None, :]
    shift = jnp.linspace(-1.0, 1.0, 128)
    d = (y - shift) * mask[..., None]
    sums = jnp.stack([d.sum((1, 2)), (d * d).sum((1, 2))], axis=1)     # [G, 2, H]
    film = 0.3 * jax.random.normal(ks[1], (graphs, 256)) if with_film else None
    want = film_modulate(instance_norm_from_sums(y, sums, shift, mask), film, mask,
                         jnp.float32)
    affine = norm_mgpu.affine_from_sums(sums, shift, mask.sum((1, 2)), film=film)
    got = norm_mgpu.normalize_reference(y.reshape(-1, 128), affine,
                                        mask.reshape(-1).astype(jnp.float32), n * n,
                                        jnp.float32).reshape(y.shape)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


def _ppgn_outputs(monkeypatch, mode: str, film: bool = False, blocks: int = 2):
    """The logits of a PPGN (``blocks`` blocks) under ``mosaic`` with the XLA norm and with
    the kernel, with each program's text."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    monkeypatch.setenv("DDGJAX_FP8_ACTIVATIONS", mode)
    model = build_model("ppgn", T, hidden=128, num_blocks=blocks, compute_dtype=jnp.bfloat16,
                        pallas=True, film=film)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=blocks, film=film))
    if film:                          # FiLM's heads start at zero: give them something
        params = jax.tree_util.tree_map_with_path(
            lambda path, v: (0.05 * jax.random.normal(jax.random.key(len(path)), v.shape)
                             if "film_" in jax.tree_util.keystr(path) else v), params)
    adj, nm = random_batch(9, [8, 6, 8, 5], 8)                # 4 x 64 rows: one tile each
    t, lv = noise_inputs(4, seed=7)
    out, program = {}, {}
    for flag in ("0", "1"):
        monkeypatch.setenv("DDGJAX_NORM_KERNEL", flag)
        apply = lambda p: model.apply(p, adj, nm, t, lv)      # a new function per setting
        program[flag] = str(jax.make_jaxpr(apply)(params))
        out[flag] = np.asarray(jax.jit(apply)(params))
    return model, params, (adj, nm, t, lv), out, program


@pytest.mark.parametrize("mode, film", [("0", True), ("weights_y", False)])
def test_ppgn_with_the_norm_kernel_equals_the_xla_norm(monkeypatch, mode, film):
    """bfloat16 activations (with FiLM folded into the map) and float8 ones (the mixing
    layer's float8 output read by the kernel): the kernel is in the program and the logits
    match the XLA norm's."""
    model, params, args, out, program = _ppgn_outputs(monkeypatch, mode, film, blocks=1)
    assert "norm_kernel" in program["1"] and "norm_kernel" not in program["0"]
    assert np.isfinite(out["1"]).all()
    if mode == "0":
        assert _rel(out["1"], out["0"]) < 2e-2
        return
    # float8: the kernel rounds the float32 result once, the XLA path through bfloat16
    # (twice), which moves random-weight logits by a few % (5.5 % at two blocks); with the
    # kernel's own reference in its place the logits are the kernel's to the bit
    assert _rel(out["1"], out["0"]) < 0.1
    monkeypatch.setattr(norm_mgpu, "normalize", lambda y, a, m, n, o:
                        norm_mgpu.normalize_reference(y, a, m, n, o))
    ref = np.asarray(jax.jit(lambda p: model.apply(p, *args))(params))
    assert _rel(out["1"], ref) < 1e-6


def test_norm_kernel_under_vmap_and_grad(monkeypatch):
    """The per-graph (vmapped) call merges the graphs' rows into one kernel call and
    matches the batched call; the gradient is the XLA norm's (the reference runs)."""
    model, params, (adj, nm, t, lv), out, _ = _ppgn_outputs(monkeypatch, "0", blocks=1)
    monkeypatch.setenv("DDGJAX_NORM_KERNEL", "1")
    one = lambda a, k, ti, l: model.apply(params, a[None], k[None], ti[None], l[None])[0]
    program = str(jax.make_jaxpr(jax.vmap(one))(adj, nm, t, lv))
    assert program.count("norm_kernel") == 1                     # one call for all graphs
    per_graph = np.asarray(jax.jit(jax.vmap(one))(adj, nm, t, lv))
    assert _rel(per_graph, out["1"]) < 1e-2
    grads = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("DDGJAX_NORM_KERNEL", flag)
        loss = lambda p: jnp.sum(model.apply(p, adj, nm, t, lv) ** 2)
        grads[flag] = jax.jit(jax.grad(loss))(params)
    flat = lambda g: np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(g)])
    assert _rel(flat(grads["1"]), flat(grads["0"])) < 2e-2
    monkeypatch.setenv("DDGJAX_NORM_KERNEL", "maybe")
    with pytest.raises(ValueError, match="DDGJAX_NORM_KERNEL"):
        pallas_launch.norm_kernel()


def test_norm_kernel_by_default_exactly_under_float8_block_outputs(monkeypatch):
    """With ``DDGJAX_NORM_KERNEL`` unset the kernel runs where the block outputs are float8
    (``1``, ``weights``, ``weights_y``) and not otherwise (bf16, ``prod``)."""
    monkeypatch.setenv("DDGJAX_PALLAS_BACKEND", "mosaic")
    monkeypatch.setenv("DDGJAX_MGPU_READOUT", "0")
    monkeypatch.delenv("DDGJAX_NORM_KERNEL", raising=False)
    model = build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                        pallas=True)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(9, [8, 6, 8, 5], 8)
    t, lv = noise_inputs(4, seed=7)
    for mode, want in (("0", False), ("prod", False), ("1", True), ("weights_y", True)):
        monkeypatch.setenv("DDGJAX_FP8_ACTIVATIONS", mode)
        program = str(jax.make_jaxpr(lambda p: model.apply(p, adj, nm, t, lv))(params))
        assert ("norm_kernel" in program) == want, mode


def test_launch_settings_are_checked_and_part_of_the_trace_key(monkeypatch):
    """``DDGJAX_{NORM,MIX,READOUT}_CTAS_PER_SM``: the kernel's default when unset, a whole
    number >= 1 or a ValueError naming the variable; each is in the trace settings (the
    sampler's cache key). Shapes the kernels cannot take are refused by name."""
    for kernel in ("NORM", "MIX", "READOUT"):
        name = f"DDGJAX_{kernel}_CTAS_PER_SM"
        monkeypatch.delenv(name, raising=False)
        assert pallas_launch.ctas_per_sm(kernel, default=3) == 3
        before = pallas_launch.trace_settings()
        monkeypatch.setenv(name, "2")
        assert pallas_launch.ctas_per_sm(kernel, default=3) == 2
        assert pallas_launch.trace_settings() != before
        for bad in ("0", "two", "-1"):
            monkeypatch.setenv(name, bad)
            with pytest.raises(ValueError, match=name):
                pallas_launch.ctas_per_sm(kernel)
        monkeypatch.delenv(name)
    y, affine, mask = _inputs(16, 32)                               # graphs shorter than a tile
    with pytest.raises(ValueError, match="at least 64 rows"):
        norm_mgpu.normalize_rows(y.T.astype(jnp.bfloat16), affine,
                                 mix_norm_mgpu.split_row_mask(mask, 32), 32, FP8,
                                 interpret=True)
    from ddgjax.models import readout_mgpu
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(128, seed=5)
    with pytest.raises(ValueError, match="ring must be at least 2"):
        readout_mgpu.readout(x0, xs, w0, ws, b, wr, br, interpret=True, ring=1)


def test_norm_kernel_takes_the_shapes_the_mixing_kernel_hands_it():
    """``norm_mgpu.supported`` is the mixing kernel's condition at 128 input channels (the
    norm reads that kernel's ``y^T``): whole tiles no longer than a graph, 128 channels."""
    sms = pair_mlp_mgpu.sm_count()
    cases = [(1024 * 3600, 3600, 128), (64 * 3600, 3600, 128), (64 * 4096, 4096, 128),
             (4 * 3600, 3600, 128), (1024 * 3600, 3600, 64), (1024 * 32, 32, 128),
             (1000 * 3600 + 64, 3600, 128), (sms * 64 * 4, 64, 128)]
    for m, nodes_sq, h in cases:
        assert norm_mgpu.supported(m, nodes_sq, h) == mix_norm_mgpu.supported(
            m, nodes_sq, 128, h), (m, nodes_sq, h)
    assert norm_mgpu.supported(1024 * 3600, 3600, 128)
    assert not norm_mgpu.supported(1024 * 3600, 3600, 64)            # 128 channels only
    assert not norm_mgpu.supported(1024 * 32, 32, 128)               # graphs under a tile
    assert not norm_mgpu.supported(1000 * 3600 + 64, 3600, 128)      # not whole graphs
