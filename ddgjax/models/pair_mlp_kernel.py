"""A Pallas kernel for the two per-entry MLPs of a PPGN block, fused.

``pair_mlps(x, w0, b0, w1, b1, scale)`` computes, for every entry (row) of ``x``,

    m_j = leaky_relu(x @ w0[j] + b0[j]) @ w1[j] + b1[j]          j = 0, 1 (m1, m2)
    m_0 = m_0 * scale                                            (padding mask, 1/sqrt(n))

and writes both channels first, two ``[H, M]`` arrays, which is the layout the per-channel
product reads. XLA runs the same work as four GEMMs and three elementwise passes, each
a round trip of a ``[M, H]`` tensor through device memory; the kernel reads a tile of
``x`` once and writes ``m_1, m_2`` once, the hidden layer staying on chip.

Gradients (``jax.custom_vjp``): under differentiation the forward runs a second kernel
that also writes the hidden layers ``[M, 2H]`` (one more write, no more reads), and the
backward is the XLA gradient of the fused block's pair MLPs written out from those
residuals (``pair_mlps_backward``: the same GEMMs as autodiff of the XLA path, the
block-diagonal second layer included, without recomputing the forward). On CPU the
kernels run in Pallas' interpret mode when ``DDGJAX_PALLAS_INTERPRET=1`` (the tests);
see ``pallas_launch``.

On Hopper GPUs the forward without hidden layers (sampling) runs ``pair_mlp_mgpu``
instead, a persistent wgmma kernel (``pallas_launch.kernel_backend``).
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ddgjax.models import pair_mlp_mgpu, pallas_launch
from ddgjax.models.common import channel_matmul

NEGATIVE_SLOPE = 0.01
TILE_ROWS = (128, 64, 32, 16)
FP8 = pair_mlp_mgpu.FP8      # float8 e4m3, the dtype of every float8 tensor here
FP8_A_SCALE = 8.0   # a power of two: lifts m_0 (scaled by 1/sqrt(n)) out of e4m3's subnormals


def pair_mlps_reference(x, w0, b0, w1, b1, scale):
    """The function the kernel computes, in XLA.

    Args:
      x: ``[M, C]`` entries by input channels (compute dtype).
      w0: ``[2, C, H]``; b0: ``[2, H]``; w1: ``[2, H, H]``; b1: ``[2, H]`` (compute dtype).
      scale: ``[M]`` multiplier of ``m_0`` (compute dtype).
    Returns: ``(m_0, m_1)``, each ``[H, M]`` in the dtype of ``x`` (a float8 ``x``, the
      PPGN's float8 activations, is read exactly in bfloat16).
    """
    x = pair_mlp_mgpu.exact_bf16(x)
    h = jnp.einsum("mc,jch->jmh", x, w0, preferred_element_type=jnp.float32) + b0[:, None]
    h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
    m = jnp.einsum("jmh,jhk->jkm", h, w1, preferred_element_type=jnp.float32) + b1[:, :, None]
    m = m.at[0].multiply(scale[None, :].astype(jnp.float32))
    return m[0].astype(x.dtype), m[1].astype(x.dtype)


def tile_rows(m: int) -> int | None:
    """The largest row tile in ``TILE_ROWS`` dividing ``m`` (None: the kernel can't tile it).
    ``DDGJAX_PAIR_MLP_TILE`` caps the tile (for tuning)."""
    cap = int(os.environ.get("DDGJAX_PAIR_MLP_TILE", max(TILE_ROWS)))
    for t in TILE_ROWS:
        if t > cap:
            continue
        if m % t == 0:
            return t
    return None


def supported(m: int, c: int, h: int) -> bool:
    """Shapes the kernel takes: rows tile evenly, channel widths powers of two >= 16."""
    pow2 = lambda v: v >= 16 and (v & (v - 1)) == 0
    return pallas_launch.available() and tile_rows(m) is not None and pow2(c) and pow2(h)


def _kernel(x_ref, w0_ref, b0_ref, w1_ref, b1_ref, s_ref, o0_ref, o1_ref, h_ref=None, *,
            tm: int, subtiles: int):
    """``subtiles`` consecutive tiles of ``tm`` rows, the weights loaded once; with ``h_ref``
    (the gradient's forward) it also writes the hidden layers, ``[rows, 2H]`` (``m1``'s
    then ``m2``'s)."""
    hidden = w0_ref.shape[-1]
    w0, b0, w1, b1 = ([ref[j] for j in range(2)] for ref in (w0_ref, b0_ref, w1_ref, b1_ref))
    for t in range(subtiles):
        rows = pl.ds(t * tm, tm)
        x = x_ref[rows, :]                                           # [TM, C]
        for j, o_ref in enumerate((o0_ref, o1_ref)):
            h = jnp.dot(x, w0[j], preferred_element_type=jnp.float32) + b0[j][None, :]
            h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
            if h_ref is not None:
                h_ref[rows, pl.ds(j * hidden, hidden)] = h
            m = jnp.dot(h, w1[j], preferred_element_type=jnp.float32) + b1[j][None, :]
            if j == 0:
                m = m * s_ref[rows].astype(jnp.float32)[:, None]
            o_ref[:, rows] = m.T.astype(o_ref.dtype)                 # [H, TM]


def _pallas_forward(x, w0, b0, w1, b1, scale, with_hidden: bool = False,
                    backend: str = "triton", out_dtype=None, warp_specialized: bool = False,
                    fp8_weights: bool = False):
    m_rows, c = x.shape
    hidden = w0.shape[-1]
    if (backend == "mosaic" and not with_hidden
            and pair_mlp_mgpu.exact_bf16(x).dtype == jnp.bfloat16
            and pair_mlp_mgpu.supported(m_rows, c, hidden)):
        w8 = fp8_weights and warp_specialized and pair_mlp_mgpu.is_fp8(x.dtype)
        return pair_mlp_mgpu.pair_mlps(x, w0, b0, w1, b1, scale, out_dtype=out_dtype,
                                       warp_specialized=warp_specialized,
                                       interpret=jax.default_backend() == "cpu",
                                       fp8_weights=w8)
    x = pair_mlp_mgpu.exact_bf16(x)                       # the other kernels read bf16
    if out_dtype is not None and jnp.dtype(out_dtype) != x.dtype:
        return tuple(m.astype(out_dtype) for m in _pallas_forward(
            x, w0, b0, w1, b1, scale, with_hidden, backend))
    if not pallas_launch.triton_available():      # a JAX without Pallas' Triton backend
        out = pair_mlps_reference(x, w0, b0, w1, b1, scale)
        return out + (hidden_reference(x, w0, b0),) if with_hidden else out
    tm = tile_rows(m_rows)
    sub = pallas_launch.subtiles("DDGJAX_PAIR_MLP", m_rows // tm)
    rows = tm * sub                                                  # rows per program
    # Two outputs, not one [2, H, M]: XLA copies a slice of a custom call's output.
    out_specs = [pl.BlockSpec((hidden, rows), lambda i: (0, i))] * 2
    out_shape = [jax.ShapeDtypeStruct((hidden, m_rows), x.dtype)] * 2
    if with_hidden:
        out_specs.append(pl.BlockSpec((rows, 2 * hidden), lambda i: (i, 0)))
        out_shape.append(jax.ShapeDtypeStruct((m_rows, 2 * hidden), x.dtype))
    return tuple(pl.pallas_call(
        functools.partial(_kernel, tm=tm, subtiles=sub),
        grid=(m_rows // rows,),
        in_specs=[pl.BlockSpec((rows, c), lambda i: (i, 0)),
                  pl.BlockSpec((2, c, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((2, hidden, hidden), lambda i: (0, 0, 0)),
                  pl.BlockSpec((2, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((rows,), lambda i: (i,))],
        out_specs=out_specs,
        out_shape=out_shape,
        **pallas_launch.call_options("DDGJAX_PAIR_MLP"),
    )(x, w0, b0, w1, b1, scale))


def hidden_reference(x, w0, b0):
    """The hidden layers the gradient kernel writes: ``[M, 2H]`` in the dtype of ``x``."""
    x = pair_mlp_mgpu.exact_bf16(x)
    h = jnp.einsum("mc,jch->mjh", x, w0, preferred_element_type=jnp.float32) + b0[None]
    h = jnp.where(h >= 0, h, NEGATIVE_SLOPE * h).astype(x.dtype)
    return h.reshape(x.shape[0], -1)


def _make_forward(with_hidden: bool, backend: str = "triton", out_dtype=None,
                  warp_specialized: bool = False, fp8_weights: bool = False):
    """The kernel call, batched under ``vmap`` by merging the examples' rows; ``backend``
    picks the forward's kernel where no hidden layers are written (``warp_specialized``:
    the Mosaic kernel's variant); ``out_dtype`` (None: the input's) is ``m_0, m_1``'s
    dtype. Every setting is a function of its own: JAX 0.11 reuses what it traced of a
    ``custom_vmap``/``custom_vjp`` function for the same shapes, whatever the environment
    says on the second trace."""

    def reference(x, w0, b0, w1, b1, scale):
        out = pair_mlps_reference(x, w0, b0, w1, b1, scale)
        if out_dtype is not None:
            out = tuple(m.astype(out_dtype) for m in out)
        return out + (hidden_reference(x, w0, b0),) if with_hidden else out

    @jax.custom_batching.custom_vmap
    def forward(x, w0, b0, w1, b1, scale):
        return _pallas_forward(x, w0, b0, w1, b1, scale, with_hidden, backend, out_dtype,
                               warp_specialized, fp8_weights)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, x, w0, b0, w1, b1, scale):
        """Under ``vmap`` (e.g. the per-graph completion sampler, which vmaps the model)
        the rows of all examples are one kernel call, so the tile stays large:
        ``x [V, M, C]`` -> ``[V * M, C]``."""
        x_b, *weights_b, s_b = in_batched
        hidden = w0.shape[-1]
        rows = axis_size * x.shape[-2]
        n_out = 3 if with_hidden else 2
        if any(weights_b) or not supported(rows, x.shape[-1], hidden):
            axes = tuple(0 if b else None for b in in_batched)
            return jax.vmap(reference, in_axes=axes)(x, w0, b0, w1, b1, scale), (True,) * n_out
        x = x if x_b else jnp.broadcast_to(x, (axis_size,) + x.shape)
        scale = scale if s_b else jnp.broadcast_to(scale, (axis_size,) + scale.shape)
        out = forward(x.reshape(rows, x.shape[-1]), w0, b0, w1, b1, scale.reshape(rows))
        unmerge = lambda m: jnp.swapaxes(m.reshape(hidden, axis_size, -1), 0, 1)  # [V, H, M]
        out = (unmerge(out[0]), unmerge(out[1])) + tuple(
            h.reshape(axis_size, -1, 2 * hidden) for h in out[2:])
        return out, (True,) * n_out

    return forward


_forward_with_hidden = _make_forward(with_hidden=True)


def pair_mlps_backward(x, w0, w1, b1, scale, hidden, g0, g1):
    """The gradient of ``pair_mlps_reference`` from its residuals, without its forward.

    Args: ``x, w0, w1, b1, scale`` as in ``pair_mlps_reference``; ``hidden`` ``[M, 2H]``
      (``hidden_reference``); ``g0, g1`` ``[H, M]``, the cotangents of ``m_0, m_1``.
    Returns: the cotangents of ``(x, w0, b0, w1, b1, scale)``, each in its input's dtype.

    The GEMMs are those of autodiff of the fused block's XLA path (the two first layers
    as one ``[C, 2H]`` kernel, the second layers as one block-diagonal ``[2H, 2H]``), whose
    layouts XLA runs fastest (docs/benchmarks.md, round 23). The scale's cotangent needs
    ``m_0`` before scaling, one more GEMM, which XLA drops where nothing uses it (the PPGN's
    scale is a mask and a constant per graph, not a function of parameters; checked on the
    compiled gradient by ``tests/test_models.py``).
    """
    f32 = jnp.float32
    hidden_w = w0.shape[-1]
    gm0 = g0.astype(f32) * scale.astype(f32)[None, :]
    gm = jnp.concatenate([gm0, g1.astype(f32)]).astype(x.dtype)      # [2H, M]
    zeros = jnp.zeros((hidden_w, hidden_w), w1.dtype)
    k1 = jnp.block([[w1[0], zeros], [zeros, w1[1]]])                  # [2H, 2H]
    k0 = jnp.concatenate([w0[0], w0[1]], axis=1)                      # [C, 2H]
    dk1 = jnp.einsum("md,em->de", hidden, gm, preferred_element_type=f32)
    dhid = jnp.einsum("em,de->md", gm, k1, preferred_element_type=f32)  # [M, 2H]
    dpre = jnp.where(hidden >= 0, dhid, NEGATIVE_SLOPE * dhid)
    dpre_c = dpre.astype(x.dtype)
    dk0 = jnp.einsum("mc,md->cd", x, dpre_c, preferred_element_type=f32)
    dx = jnp.einsum("md,cd->mc", dpre_c, k0, preferred_element_type=f32)
    split = lambda a: jnp.stack([a[..., :hidden_w], a[..., hidden_w:]])
    dw0 = split(dk0)                                                  # [2, C, H]
    dw1 = jnp.stack([dk1[:hidden_w, :hidden_w], dk1[hidden_w:, hidden_w:]])
    db0 = split(dpre.sum(0))
    db1 = split(gm.astype(f32).sum(1))
    m0 = (jnp.einsum("mh,hk->km", hidden[:, :hidden_w], w1[0], preferred_element_type=f32)
          + b1[0].astype(f32)[:, None])
    dscale = jnp.sum(g0.astype(f32) * m0, axis=0)
    return (dx.astype(x.dtype), dw0.astype(w0.dtype), db0.astype(b1.dtype),
            dw1.astype(w1.dtype), db1.astype(b1.dtype), dscale.astype(scale.dtype))


def pair_mlps(x, w0, b0, w1, b1, scale):
    """``pair_mlps_reference`` through the fused kernels (shapes as there). The forward's
    kernel is ``pallas_launch.kernel_backend()`` (with ``pair_warp_specialized()``), read
    when the program is traced; the gradient's forward always runs the Triton kernel,
    which writes the hidden layers."""
    return _PAIR_MLPS[_forward_setting()](x, w0, b0, w1, b1, scale)


def _forward_setting() -> tuple[str, bool]:
    backend = pallas_launch.kernel_backend()
    return backend, backend == "mosaic" and pallas_launch.pair_warp_specialized()


def _fwd(x, w0, b0, w1, b1, scale):
    m0, m1, hidden = _forward_with_hidden(x, w0, b0, w1, b1, scale)
    return (m0, m1), (x, w0, b0, w1, b1, scale, hidden)


def _bwd(res, g):
    x, w0, b0, w1, b1, scale, hidden = res
    out = pair_mlps_backward(x, w0, w1, b1, scale, hidden, *g)
    return (out[0], out[1], out[2].astype(b0.dtype)) + out[3:]


def _make_pair_mlps(backend: str, warp_specialized: bool = False):
    """One differentiable function per forward kernel (JAX caches what it traces of a
    ``custom_vjp`` by function, so the kernel must not change under one function)."""
    forward = _make_forward(with_hidden=False, backend=backend,
                            warp_specialized=warp_specialized)

    @jax.custom_vjp
    def pair_mlps_with(x, w0, b0, w1, b1, scale):
        return forward(x, w0, b0, w1, b1, scale)

    pair_mlps_with.defvjp(_fwd, _bwd)
    return pair_mlps_with


_PAIR_MLPS = {(backend, ws): _make_pair_mlps(backend, ws)
              for backend, ws in (("triton", False), ("mosaic", False), ("mosaic", True))}


# ---- float8 storage of the pair MLPs' outputs for the per-channel product (sampling) ----

def product_from_fp8(a8, b8, out_dtype=jnp.bfloat16):
    """The per-channel product from float8 operands: ``[C, B, N, N]`` x2 (``a8`` stored as
    ``m_0 * FP8_A_SCALE``) -> ``a8 @ b8 / FP8_A_SCALE`` in ``out_dtype`` (bfloat16, or
    float8 e4m3 saturated at +-448 for the float8 activations), accumulated in float32.
    The operands are converted to bfloat16 in the program, which XLA fuses into its bf16
    GEMM: 0.79 ms against 1.06 for the bf16 product and 1.13 for XLA's float8 GEMM at the
    Planar-60 sampling shape (H200, round 37, docs/benchmarks.md); float8 values are exact
    in bfloat16, so this equals a float8 GEMM up to the summation order."""
    out = jnp.einsum("cbik,cbkj->cbij", a8.astype(jnp.bfloat16), b8.astype(jnp.bfloat16),
                     preferred_element_type=jnp.float32) * (1.0 / FP8_A_SCALE)
    if pair_mlp_mgpu.is_fp8(out_dtype):
        return pair_mlp_mgpu.to_fp8_saturated(out)
    return out.astype(out_dtype)


def _pair_product_bf16(x, w0, b0, w1, b1, scale, graphs_shape):
    """What ``pair_product_fp8`` approximates, differentiably: ``pair_mlps`` then the
    bf16 per-channel product. Shapes as ``pair_product_fp8``."""
    m0, m1 = pair_mlps(x, w0, b0, w1, b1, scale)
    shape = (w0.shape[-1],) + tuple(graphs_shape)
    return channel_matmul(m0.reshape(shape), m1.reshape(shape))


def pair_product_fp8(x, w0, b0, w1, b1, scale, graphs_shape, fp8_out: bool = False,
                     fp8_weights: bool = False):
    """A PPGN block's pair MLPs and per-channel product, ``m_0, m_1`` stored in float8.

    Args: ``x, w0, b0, w1, b1, scale`` as ``pair_mlps`` (``x`` ``[M, C]`` bf16 with
      ``M = B * N * N`` rows); ``graphs_shape`` ``(B, N, N)``.
    Returns: ``[H, B, N, N]`` bf16 (float8 e4m3 with ``fp8_out``, the float8 activations:
      ``pallas_launch.fp8_activations``), ``m_0 @ m_1`` per channel and graph.

    The Mosaic pair kernel (warp-specialized with ``pallas_launch.pair_warp_specialized``)
    writes float8 (``m_0`` times ``FP8_A_SCALE``; where it does not take the shapes, the
    Triton kernel's bf16 outputs are cast) and ``product_from_fp8`` reads them: a third
    fewer bytes than the bf16 path for the kernel and the product. The gradient is the
    bf16 path's (``_pair_product_bf16``): float8 is a sampling setting
    (``pallas_launch.fp8_product``). ``fp8_weights``: a float8 ``x`` is multiplied by
    ``w0`` stored in float8 (``pair_mlp_mgpu.pair_mlps``, warp-specialized kernel only);
    the caller passes ``w0`` rounded already (``pair_mlp_mgpu.round_weights_to_fp8``), so
    every path computes the same."""
    ws = pallas_launch.pair_warp_specialized()
    return _PAIR_PRODUCT_FP8[ws, fp8_out, fp8_weights](x, w0, b0, w1, b1, scale,
                                                       tuple(graphs_shape))


def _make_pair_product_fp8(warp_specialized: bool, fp8_out: bool, fp8_weights: bool = False):
    """``pair_product_fp8`` with one pair kernel and output dtype (one function per setting:
    ``_make_forward``)."""
    forward = _make_forward(with_hidden=False, backend="mosaic", out_dtype=FP8,
                            warp_specialized=warp_specialized, fp8_weights=fp8_weights)

    @functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
    def pair_product(x, w0, b0, w1, b1, scale, graphs_shape):
        m0, m1 = forward(x, w0, b0, w1, b1, scale * FP8_A_SCALE)
        shape = (w0.shape[-1],) + graphs_shape
        return product_from_fp8(m0.reshape(shape), m1.reshape(shape),
                                FP8 if fp8_out else jnp.bfloat16)

    def fwd(x, w0, b0, w1, b1, scale, graphs_shape):
        if fp8_out:
            raise NotImplementedError("pair_product_fp8: float8 activations are a sampling "
                                      "setting, not differentiable")
        return jax.vjp(functools.partial(_pair_product_bf16, graphs_shape=graphs_shape),
                       x, w0, b0, w1, b1, scale)

    def bwd(graphs_shape, vjp_fn, g):
        del graphs_shape
        return vjp_fn(g)

    pair_product.defvjp(fwd, bwd)
    return pair_product


_PAIR_PRODUCT_FP8 = {(ws, out8, w8): _make_pair_product_fp8(ws, out8, w8)
                     for ws in (False, True) for out8 in (False, True) for w8 in (False, True)}
