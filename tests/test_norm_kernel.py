"""The instance norm's Mosaic GPU kernel (``norm_mgpu``, ``KernelSettings.norm_kernel``)
against its XLA reference in the Mosaic GPU interpreter, and through the PPGN against the
XLA norm it replaces: the same function, under ``vmap`` and under differentiation too."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.kernels import KernelSettings, mix_norm_mgpu, mgpu, norm_mgpu
from ddgjax.kernels.common import instance_norm_from_sums
from ddgjax.models import build_model
from helpers import random_batch
from test_models import T, noise_inputs, random_params


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


@pytest.mark.parametrize("graphs, nodes_sq, max_ctas", [(4, 96, 3), (3, 128, 2)])
def test_norm_kernel_equals_the_reference(graphs, nodes_sq, max_ctas):
    """Each row takes its own graph's map (also in the tiles that span two graphs: 96-row
    graphs), the padding rows are 0."""
    y, affine, mask = _inputs(graphs, nodes_sq)
    y = y.astype(jnp.bfloat16)
    got = norm_mgpu.normalize_rows(y.T, affine, mix_norm_mgpu.split_row_mask(mask, nodes_sq),
                                   nodes_sq, max_ctas=max_ctas, interpret=True)
    want = norm_mgpu.normalize_reference(y, affine, mask, nodes_sq)
    assert got.dtype == jnp.bfloat16 and got.shape == y.shape
    got, want = (np.asarray(v.astype(jnp.float32)) for v in (got, want))
    # the same products and sums, up to one rounding of bfloat16
    np.testing.assert_allclose(got, want, rtol=2.0 ** -7, atol=1e-2)
    assert np.mean(got == want) > 0.99
    assert (got[np.asarray(mask) == 0] == 0).all()


def test_affine_from_sums_is_the_instance_norm():
    """The map from the sums gives ``instance_norm_from_sums`` on the real entries."""
    graphs, n = 3, 6
    y = 2.0 * jax.random.normal(jax.random.key(1), (graphs, n, n, 128)) + 0.5
    sizes = jnp.array([6, 4, 5])
    node = jnp.arange(n)[None] < sizes[:, None]
    mask = node[:, :, None] & node[:, None, :]
    shift = jnp.linspace(-1.0, 1.0, 128)
    d = (y - shift) * mask[..., None]
    sums = jnp.stack([d.sum((1, 2)), (d * d).sum((1, 2))], axis=1)     # [G, 2, H]
    want = instance_norm_from_sums(y, sums, shift, mask)
    affine = norm_mgpu.affine_from_sums(sums, shift, mask.sum((1, 2)))
    got = norm_mgpu.normalize_reference(y.reshape(-1, 128), affine,
                                        mask.reshape(-1).astype(jnp.float32),
                                        n * n).reshape(y.shape)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_ppgn_with_the_norm_kernel_equals_the_xla_norm_also_under_vmap_and_grad():
    """``norm_kernel=True`` (under ``mosaic``) puts the kernel in the program and gives the
    XLA norm's logits; the per-graph (vmapped) call merges the graphs' rows into one kernel
    call; under differentiation the kernel's reference runs (its custom VJP)."""
    kw = dict(backend="mosaic", interpret=True, mosaic_readout=False,
              pair_warp_specialized=False)
    models = {flag: build_model("ppgn", T, hidden=128, num_blocks=1, compute_dtype=jnp.bfloat16,
                                kernels="pallas",
                                kernel_settings=KernelSettings(norm_kernel=flag, **kw))
              for flag in (False, True)}
    params = random_params(build_model("ppgn", T, hidden=128, num_blocks=1))
    adj, nm = random_batch(9, [8, 6, 8, 5], 8)                # 4 x 64 rows: one tile each
    t, lv = noise_inputs(4, seed=7)
    program = {f: str(jax.make_jaxpr(lambda p: m.apply(p, adj, nm, t, lv))(params))
               for f, m in models.items()}
    assert "norm_kernel" in program[True] and "norm_kernel" not in program[False]
    out = {f: np.asarray(jax.jit(lambda p: m.apply(p, adj, nm, t, lv))(params))
           for f, m in models.items()}
    assert np.isfinite(out[True]).all() and _rel(out[True], out[False]) < 2e-2
    one = lambda a, k, ti, l: models[True].apply(params, a[None], k[None], ti[None], l[None])[0]
    assert str(jax.make_jaxpr(jax.vmap(one))(adj, nm, t, lv)).count("norm_kernel") == 1
    assert _rel(jax.jit(jax.vmap(one))(adj, nm, t, lv), out[True]) < 1e-2
    loss = lambda p: jnp.sum(models[True].apply(p, adj, nm, t, lv) ** 2)
    assert "norm_kernel" not in str(jax.make_jaxpr(jax.grad(loss))(params))


def test_norm_kernel_shapes_are_the_mixing_kernels():
    """``norm_mgpu.supported`` is the mixing kernel's condition at 128 input channels (the
    norm reads that kernel's ``y^T``); other shapes and dtypes are refused by name."""
    sms = mgpu.sm_count()
    cases = [(1024 * 3600, 3600, 128), (64 * 4096, 4096, 128), (4 * 3600, 3600, 128),
             (1024 * 3600, 3600, 64), (1024 * 32, 32, 128), (1000 * 3600 + 64, 3600, 128),
             (sms * 64 * 4, 64, 128)]
    for m, nodes_sq, h in cases:
        assert norm_mgpu.supported(m, nodes_sq, h) == mix_norm_mgpu.supported(
            m, nodes_sq, 128, h), (m, nodes_sq, h)
    assert norm_mgpu.supported(1024 * 3600, 3600, 128)
    assert not norm_mgpu.supported(1024 * 32, 32, 128)               # graphs under a tile
    y, affine, mask = _inputs(16, 32)
    with pytest.raises(ValueError, match="at least 64 rows"):
        norm_mgpu.normalize_rows(y.T.astype(jnp.bfloat16), affine,
                                 mix_norm_mgpu.split_row_mask(mask, 32), 32, interpret=True)
    y, affine, mask = _inputs(2, 64)
    with pytest.raises(ValueError, match="bfloat16"):
        norm_mgpu.normalize_rows(y.T, affine, mix_norm_mgpu.split_row_mask(mask, 64), 64,
                                 interpret=True)
