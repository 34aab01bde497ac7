"""The Mosaic GPU (wgmma) pair-MLP kernel against its reference, in the Mosaic GPU
interpreter on CPU, and through the PPGN model against the Triton kernel. On a Hopper GPU
the same tests run the compiled kernel (the interpreter only where the backend is CPU)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.models import build_model, pair_mlp_kernel, pair_mlp_mgpu, pallas_launch
from helpers import random_batch
from test_models import T, noise_inputs, random_params

ON_CPU = jax.default_backend() == "cpu"


def _rel(out, want):
    out, want = np.asarray(out, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(out - want) / np.linalg.norm(want)


@pytest.mark.parametrize("tiles, max_ctas", [(6, 3), (5, 8)])
def test_kernel_equals_the_reference(tiles, max_ctas):
    """Both outputs, channels first, match the XLA reference on fresh random inputs; 6 tiles
    over 3 CTAs runs the pipeline two steps per CTA, 5 tiles one step on each of 5."""
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


def test_cta_count_and_supported_shapes():
    assert pair_mlp_mgpu.cta_count(57600, 132) == 128
    assert pair_mlp_mgpu.cta_count(7, 132) == 7 and pair_mlp_mgpu.cta_count(133, 132) == 19
    assert pair_mlp_mgpu.supported(64 * 10, 128, 128)
    assert not pair_mlp_mgpu.supported(64 * 10 + 16, 128, 128)   # no whole tiles
    assert not pair_mlp_mgpu.supported(64 * 10, 64, 128)         # 128 channels only
    with pytest.raises(ValueError, match="multiple of 64"):
        pair_mlp_mgpu.pair_mlps(*pair_mlp_mgpu.random_inputs(100), interpret=ON_CPU)


def test_backend_choice(monkeypatch):
    monkeypatch.delenv("DDGJAX_PAIR_MLP_BACKEND", raising=False)
    if ON_CPU:
        assert pallas_launch.pair_mlp_backend() == "triton"
    for name in ("triton", "mosaic"):
        monkeypatch.setenv("DDGJAX_PAIR_MLP_BACKEND", name.upper())
        assert pallas_launch.pair_mlp_backend() == name
    monkeypatch.setenv("DDGJAX_PAIR_MLP_BACKEND", "cutlass")
    with pytest.raises(ValueError, match="DDGJAX_PAIR_MLP_BACKEND"):
        pallas_launch.pair_mlp_backend()


def test_ppgn_with_the_mosaic_kernel_equals_the_triton_kernel(monkeypatch):
    """A bfloat16 PPGN with 128 channels (the width the kernel takes) gives the same logits
    with either pair-MLP kernel, and the Mosaic one is what runs when chosen; its gradient
    program (training) keeps the Triton kernel, which writes the hidden layers."""
    kw = dict(hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16, pallas=True)
    model = build_model("ppgn", T, **kw)
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(4, [8, 6, 8, 5], 8)         # 4 * 64 rows: 4 tiles
    t, lv = noise_inputs(4, seed=2)
    outs = {}
    for name in ("triton", "mosaic"):
        monkeypatch.setenv("DDGJAX_PAIR_MLP_BACKEND", name)
        apply = lambda p: model.apply(p, adj, nm, t, lv)  # a new function: a new trace
        program = str(jax.make_jaxpr(apply)(params))
        assert ("pair_mlps_wgmma_kernel" in program) == (name == "mosaic")
        outs[name] = np.asarray(jax.jit(apply)(params))
        grad_program = str(jax.make_jaxpr(jax.grad(lambda p: apply(p).sum()))(params))
        assert "pair_mlps_wgmma_kernel" not in grad_program
    assert np.isfinite(outs["mosaic"]).all()
    assert _rel(outs["mosaic"], outs["triton"]) < 1e-2
