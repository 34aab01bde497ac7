"""The PPGN block's two pair MLPs as a persistent Mosaic GPU kernel (Hopper ``wgmma``).

Computes what ``pair_mlp_kernel.pair_mlps_reference`` computes,

    m_j = leaky_relu(x @ w0[j] + b0[j]) @ w1[j] + b1[j]          j = 0, 1
    m_0 = m_0 * scale

written channels first (two ``[H, M]`` arrays), in bfloat16. Why another kernel: the
Triton kernel (``pair_mlp_kernel``) loads all four weight matrices (128 KB) for each
128-row tile (32 KB of input), one tile per program, and runs at ~1.7 TB/s where a copy
runs at 2.8 (docs/benchmarks.md). Here each CTA loads the weights into shared memory
once and then streams its share of the row tiles through a double-buffered TMA pipeline;
the matrix products run on Hopper's asynchronous warpgroup MMA.

Everything is computed transposed, so the result comes out channels first without a
transpose: ``h^T = w0[j]^T x^T`` (the ``x`` tile is read through a transposed view of its
shared-memory buffer), ``m_j^T = w1[j]^T h^T`` (``h^T`` staged in shared memory), both
with ``M = H`` rows and the tile's rows as columns.

A float8 ``x`` (``pallas_launch.fp8_activations``) is read as float8 and converted to
float16 in registers (``fp8_tile_as_f16``): the first layers then run rows first, ``h = x
w0[j]`` with ``x`` as the MMA's register operand and float16 weights, and ``h`` is staged
rows first for the second layers, which read it through a transposed view. The mixing and
readout kernels share the conversion helpers here (``fp8_tile_to_f16_smem``).

With float8 weights as well (``fp8_weights``: ``to_fp8_columns``, power-of-two scales per
output channel) the first layers stay channels first and multiply float8 by float8
(Hopper's float8 ``wgmma`` needs both operands K-major, which ``x``'s rows-first tile is
for ``w0^T x^T``), with no conversion; the scale multiplies the accumulator.

GPU only (Hopper: wgmma is sm_90a's instruction). On CPU it runs in Pallas' Mosaic GPU
interpreter when asked (``interpret=True``, the tests); the interpreter has no transposed
MMA operands, so there the ``x`` tile is transposed into a scratch buffer first: the only
place the two paths differ. The interpreter runs the warp-specialized kernel's three
warpgroups side by side on host threads: on a 2-core machine with XLA's default CPU client
it hangs, with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (which
``tests/conftest.py`` sets) it runs.
"""
from __future__ import annotations

import inspect
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

NEGATIVE_SLOPE = 0.01
TILE_ROWS = 64          # rows (entries) per tile: the MMAs' N; SMEM holds 128 KB of weights


def smem_transforms(cols: int, dtype=jnp.bfloat16):
    """Tiling and swizzle of a shared-memory buffer whose minor axis has ``cols`` entries."""
    swizzle = plgpu.find_swizzle(cols * jnp.dtype(dtype).itemsize * 8)
    return (plgpu.TilingTransform((8, swizzle // jnp.dtype(dtype).itemsize)),
            plgpu.SwizzleTransform(swizzle))


def cta_count(tiles: int, max_ctas: int) -> int:
    """The largest CTA count <= ``max_ctas`` that divides ``tiles`` (equal shares)."""
    return max(d for d in range(1, min(tiles, max_ctas) + 1) if tiles % d == 0)


def supported(m: int, c: int, h: int) -> bool:
    """Shapes the kernel takes: whole tiles, 128 channels out and 128 in (the weights fill
    128 KB of shared memory) or 16 (the first block's folded input channels,
    ``PPGNBlockFused``'s ``embed``), and enough tiles to give most SMs an equal share."""
    if c not in (16, 128) or h != 128 or m % TILE_ROWS:
        return False
    tiles = m // TILE_ROWS
    sms = sm_count()
    return cta_count(tiles, sms) >= 0.75 * min(sms, tiles)


def sm_count() -> int:
    """The first device's SM count (132 where the device does not say: an H100/H200)."""
    dev = jax.devices()[0]
    return int(getattr(dev, "core_count", 0) or 132)


def tile_plan(m_rows: int, max_ctas: int | None, kernel: str,
              tile_rows: int = TILE_ROWS) -> tuple[int, int, int]:
    """``(tiles, ctas, tiles_per_cta)`` for ``m_rows`` rows in tiles of ``tile_rows``:
    every CTA takes the same number of consecutive tiles (``cta_count``)."""
    if m_rows % tile_rows:
        raise ValueError(f"{kernel}: {m_rows} rows are not a multiple of {tile_rows}")
    tiles = m_rows // tile_rows
    ctas = cta_count(tiles, max_ctas or sm_count())
    return tiles, ctas, tiles // ctas


def _load_takes_index() -> bool:
    """Whether ``plgpu.load`` wants the index as an argument (JAX 0.10) or takes it from the
    ref (JAX 0.11 deprecates the argument; ``ref.at[idx]`` instead)."""
    idx = inspect.signature(plgpu.load).parameters.get("idx")
    return idx is not None and idx.default is inspect.Parameter.empty


_LOAD_TAKES_INDEX = _load_takes_index()


def load_vector(ref, layout, interpret: bool):
    """A 1-D shared-memory vector in the register layout it will be broadcast from (the
    interpreter takes no layouts)."""
    if interpret:
        return ref[...]
    return (plgpu.load(ref, (), layout=layout) if _LOAD_TAKES_INDEX
            else plgpu.load(ref, layout=layout))


def transposed(ref):
    """A transposed view of a 2-D shared-memory ref (``plgpu.transpose_ref``, which JAX
    0.11 deprecates, is this method)."""
    return ref.transpose((1, 0))


FP8 = jnp.float8_e4m3fn


def is_fp8(dtype) -> bool:
    """Whether ``dtype`` is the float8 (e4m3) that the activations are stored in."""
    return jnp.dtype(dtype) == jnp.dtype(FP8)


def to_fp8_saturated(x):
    """``x`` in float8 e4m3, clipped to its largest finite value (+-448) first (a plain
    cast turns what lies beyond into NaN). Any shape."""
    limit = float(jnp.finfo(FP8).max)
    return jnp.clip(x, -limit, limit).astype(FP8)


def fp8_column_scales(w):
    """Per-output-column scales for storing ``w`` ``[..., K, N]`` in float8 e4m3: powers of
    two ``s [..., N]`` with ``max_k |w[k, n]| / s`` in ``(224, 448]`` (1 for an all-zero
    column), so that ``w / s`` uses the top of e4m3's range and multiplying by ``s`` is
    exact in any float format. float32."""
    top = jnp.max(jnp.abs(w.astype(jnp.float32)), axis=-2)
    limit = float(jnp.finfo(FP8).max)
    exponent = jnp.ceil(jnp.log2(jnp.where(top > 0, top / limit, 1.0)))
    # (ldexp: exp2 of an integer is not exact on every backend)
    return jnp.ldexp(jnp.ones_like(top), exponent.astype(jnp.int32))


def to_fp8_columns(w):
    """``w`` ``[..., K, N]`` as float8 e4m3 values and their column scales:
    ``(to_fp8_saturated(w / s), s)`` with ``s = fp8_column_scales(w)`` ``[..., N]``."""
    scale = fp8_column_scales(w)
    return to_fp8_saturated(w.astype(jnp.float32) / scale[..., None, :]), scale


F16_OPERAND_LIMIT = 2.0 ** 15    # |wp / s| stays below this (float16's largest: 65504)


def mixing_fp8_column_scales(wx, wp):
    """Per-output-column scales for the mixing layer's float8 ``x`` weights when the
    product's weights share their accumulator (``mix_norm_mgpu``'s one-accumulator form,
    which multiplies ``prod`` by ``wp / s`` in float16): ``fp8_column_scales(wx)``, raised
    to the power of two that keeps ``|wp / s| <= F16_OPERAND_LIMIT`` where a column of
    ``wx`` is so small against ``wp``'s (about 146 times) that ``wp / s`` would overflow
    float16. Elsewhere the scales are ``fp8_column_scales(wx)``'s: on four trained
    checkpoints (rounds 69 and 76, Planar-60 and SPECTRE SBM; docs/benchmarks.md, round 80)
    no column came within 1/146 (the smallest ratio was 0.47), so none was raised.
    ``wx`` ``[..., C, N]``, ``wp`` ``[..., H, N]``; float32 ``[..., N]``."""
    own = fp8_column_scales(wx)
    top = jnp.max(jnp.abs(wp.astype(jnp.float32)), axis=-2)
    exponent = jnp.ceil(jnp.log2(jnp.where(top > 0, top / F16_OPERAND_LIMIT, 1.0)))
    floor = jnp.ldexp(jnp.ones_like(top), exponent.astype(jnp.int32))
    return jnp.maximum(own, floor)


def round_mixing_x_weights_to_fp8(wx, wp):
    """``wx`` rounded as the one-accumulator mixing kernel stores it
    (``to_fp8_saturated(wx / s)`` with ``s = mixing_fp8_column_scales(wx, wp)``), back in
    float32. Equal to ``round_weights_to_fp8(wx)`` wherever the scales are
    ``fp8_column_scales(wx)``'s; rounding again changes nothing."""
    scale = mixing_fp8_column_scales(wx, wp)
    w8 = to_fp8_saturated(wx.astype(jnp.float32) / scale[..., None, :])
    return w8.astype(jnp.float32) * scale[..., None, :]


def round_weights_to_fp8(w):
    """``w`` rounded as ``to_fp8_columns`` stores it, back in float32: the weights a kernel
    with float8 weights multiplies by. Rounding again changes nothing (the scales are
    powers of two), so a kernel given these weights stores exactly these values."""
    w8, scale = to_fp8_columns(w)
    return w8.astype(jnp.float32) * scale[..., None, :]


@jax.custom_jvp
def round_weights_to_fp8_trainable(w):
    """``round_weights_to_fp8(w)`` (exactly: the same float32 values) with a
    straight-through gradient (the identity), for training a model whose weights are
    their float8 roundings (quantisation-aware training, ``PPGN.fp8_weights``). ``w``
    ``[..., K, N]``; float32 out."""
    return round_weights_to_fp8(w)


@round_weights_to_fp8_trainable.defjvp
def _round_weights_to_fp8_trainable_jvp(primals, tangents):
    (w,), (w_dot,) = primals, tangents
    return round_weights_to_fp8(w), jnp.asarray(w_dot, jnp.float32)


def round_to_fp8(x):
    """``x`` rounded to float8 e4m3 as the float8 sampling settings store activations
    (``to_fp8_saturated``: saturating at +-448, no scale) and back to ``x``'s dtype: what a
    kernel reading a float8 copy of ``x`` sees. Any shape."""
    return to_fp8_saturated(x).astype(x.dtype)


@jax.custom_jvp
def round_to_fp8_trainable(x):
    """``round_to_fp8(x)`` with a straight-through gradient (the identity): for training a
    model whose block outputs are their float8 roundings (``PPGN.fp8_activations``). Any
    shape."""
    return round_to_fp8(x)


@round_to_fp8_trainable.defjvp
def _round_to_fp8_trainable_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return round_to_fp8_trainable(x), x_dot


def exact_bf16(x):
    """A float8 array as bfloat16 (exact: every e4m3 value is a bfloat16 value); any other
    array as it is. What the XLA references and the Triton kernels read."""
    return x.astype(jnp.bfloat16) if is_fp8(x.dtype) else x


def fp8_tile_as_f16(ref, interpret: bool, staging=None):
    """A float8 ``[64 k, C]`` shared-memory tile as float16, as a ``wgmma`` takes its left
    operand: in registers, loaded in the layout meant for upcasts (``WGMMA_UPCAST_2X``,
    32-bit shared-memory reads), converted (Hopper converts e4m3 to float16 in hardware,
    not to bfloat16; every e4m3 value is exact in float16) and moved to the ``WGMMA``
    layout by a warp shuffle. The interpreter takes no operand from registers: there the
    tile is converted into ``staging`` (a float16 ``[64 k, C]`` ref), which is returned."""
    if interpret:
        staging[...] = ref[...].astype(jnp.float16)
        return staging
    tile = (plgpu.load(ref, (), layout=plgpu.Layout.WGMMA_UPCAST_2X) if _LOAD_TAKES_INDEX
            else plgpu.load(ref, layout=plgpu.Layout.WGMMA_UPCAST_2X))
    return plgpu.layout_cast(tile.astype(jnp.float16), plgpu.Layout.WGMMA)


# The register layout a float8 tile passes through on its way to a float16 tile in shared
# memory (``fp8_tile_to_f16_smem``): any layout stores correctly; ``WGMMA_8BIT`` reads and
# converts four entries per 32-bit load with no shuffle between threads.
CONVERT_LAYOUT = "WGMMA_8BIT"


def fp8_tile_to_f16_smem(src, dst, interpret: bool) -> None:
    """Converts a float8 shared-memory tile ``src`` into the float16 tile ``dst`` (same
    shape) through registers in ``CONVERT_LAYOUT``; the caller commits the writes
    (``plgpu.commit_smem``) before an MMA reads ``dst``."""
    if interpret:
        dst[...] = src[...].astype(jnp.float16)
        return
    layout = getattr(plgpu.Layout, CONVERT_LAYOUT)
    tile = (plgpu.load(src, (), layout=layout) if _LOAD_TAKES_INDEX
            else plgpu.load(src, layout=layout))
    dst[...] = tile.astype(jnp.float16)


def _kernel_plan(x, w0, w1, max_ctas, out_dtype, w0_fp8=None):
    """What both pair kernels derive from their arguments: the sizes ``(M, C, H)``, the
    compute and output dtypes, the tile rows, the CTA plan (``tile_plan``) and the weights
    transposed for the ``w^T x^T`` products (``[2, H, C]``, ``[2, H, H]``). For a float8
    ``x`` the compute dtype is bfloat16 and the first layers' weights are float16 as they
    lie, ``[2, C, H]``: the first products are ``x w0[j]`` with ``x`` in registers
    (``fp8_tile_as_f16``); with ``w0_fp8`` (float8 weights: ``to_fp8_columns(w0)[0]``,
    ``w0[j] / s0[j]``) they are those, transposed (``[2, H, C]``), for float8 x float8
    products ``h^T = w0^T x^T``."""
    m_rows, c = x.shape
    dt = jnp.dtype(jnp.bfloat16) if is_fp8(x.dtype) else x.dtype
    _, ctas, per_cta = tile_plan(m_rows, max_ctas, "pair_mlp_mgpu")
    if w0_fp8 is not None:
        w0k = jnp.swapaxes(w0_fp8, 1, 2)
    else:
        w0k = (w0.astype(jnp.float16) if is_fp8(x.dtype)
               else jnp.swapaxes(w0, 1, 2).astype(dt))
    return (m_rows, c, w0.shape[-1], dt, TILE_ROWS, jnp.dtype(out_dtype or dt), ctas, per_cta,
            w0k, jnp.swapaxes(w1, 1, 2).astype(dt))


def _hidden_scratch(x8: bool, c: int, h: int, tm: int, dt, mlps: int | None,
                    w0_dtype=None):
    """Shared memory of the first layers' weights and of the hidden layers (``mlps``
    staging buffers, or one where None): channels first ``[H, TM]`` behind ``w0^T``
    ``[H, C]`` (in ``w0_dtype``, default ``dt``: float8 for float8 weights), or, for a
    float8 ``x`` with float16 weights, rows first ``[TM, H]`` behind float16 ``w0``
    ``[C, H]`` (read through a transposed view by the second layer)."""
    lead = () if mlps is None else (mlps,)
    if x8:
        return (plgpu.SMEM((2, c, h), jnp.float16, transforms=smem_transforms(h, jnp.float16)),
                plgpu.SMEM(lead + (tm, h), dt, transforms=smem_transforms(h)))
    wdt = w0_dtype or dt
    return (plgpu.SMEM((2, h, c), wdt, transforms=smem_transforms(c, w0_dtype or jnp.bfloat16)),
            plgpu.SMEM(lead + (h, tm), dt, transforms=smem_transforms(tm)))


def _first_layer(x_s, x_regs, w0, b0, h_s, h_t, tm, h, dt, interpret, w0_scale=None):
    """One pair MLP's first layer on a tile, leaky ReLU'd into ``h_s``; returns the ref
    the second layer reads as ``h^T`` ``[H, TM]``.

    ``x_regs`` None: ``h^T = w0^T x^T`` with ``x`` through a transposed view of ``x_s``
    (``h_t``: the interpreter's scratch for it), ``h_s`` channels first. Otherwise
    ``x_regs`` is the float8 tile in registers as float16 and ``h = x w0`` is staged rows
    first, read back through a transposed view (``h_t``: the interpreter's scratch).
    ``w0_scale``: None, or the ``[H]`` column scales of float8 weights ``w0``, applied to
    the accumulator before the bias."""
    rows_first = x_regs is not None
    if rows_first:
        a, b, shape, axis = x_regs, w0, (tm, h), 1            # h = x w0: [TM, H]
    else:
        if interpret:
            h_t[...] = x_s[...].T
        a, b, shape, axis = w0, h_t if interpret else transposed(x_s), (h, tm), 0  # h^T

    def first_layer(acc):
        plgpu.wgmma(acc, a, b)
        return acc[...]
    acc = pl.run_scoped(first_layer, plgpu.ACC(shape, jnp.float32))
    if w0_scale is not None:
        col = load_vector(w0_scale, plgpu.Layout.WGMMA.reduce(1 - axis), interpret)
        acc = acc * lax.broadcast_in_dim(col.astype(jnp.float32), shape, [axis])
    bias = load_vector(b0, plgpu.Layout.WGMMA.reduce(1 - axis), interpret)
    acc = acc + lax.broadcast_in_dim(bias.astype(jnp.float32), shape, [axis])
    h_s[...] = jnp.maximum(acc, NEGATIVE_SLOPE * acc).astype(dt)        # leaky ReLU
    plgpu.commit_smem()
    if not rows_first:
        return h_s
    if interpret:
        h_t[...] = h_s[...].T
        return h_t
    return transposed(h_s)


def pair_mlps(x, w0, b0, w1, b1, scale, *, max_concurrent_steps: int = 2,
              max_ctas: int | None = None, interpret: bool = False, out_dtype=None,
              warp_specialized: bool = False, fp8_weights: bool = False):
    """``pair_mlps_reference`` through the kernel.

    Args:
      x: ``[M, C]`` bf16; w0 ``[2, C, H]``; b0 ``[2, H]``; w1 ``[2, H, H]``; b1 ``[2, H]``;
        scale ``[M]`` (any float dtypes; weights are cast to ``x``'s dtype, biases and
        scale used in float32, or rounded to ``x``'s dtype by the warp-specialized kernel:
        the PPGN passes them in bf16, where the two kernels agree bit for bit).
      out_dtype: the outputs' dtype (default ``x``'s); ``float8_e4m3fn`` rounds the float32
        results once to float8 (the caller scales ``m_0`` into float8's range through
        ``scale``; ``ppgn.FP8_A_SCALE``).
      warp_specialized: two compute warpgroups, one per MLP, on the same ``x`` tile, and a
        third that only issues the TMA loads (``emit_pipeline_warp_specialized``), so one
        warpgroup's epilogue overlaps the other's MMAs (``_pair_mlps_warp_specialized``).
        No faster on an H100 (1.522 against 1.525 ms, round 28); on an H200 1.386 against
        1.48-1.54 ms (round 37).
      fp8_weights: (a float8 ``x`` and ``warp_specialized`` only) the first layers' weights
        are stored in float8 too, ``w0[j] / s0[j]`` with power-of-two scales per output
        channel (``to_fp8_columns``), and the first products are float8 x float8 MMAs
        (``h^T = w0^T x^T``, no conversion), scaled by ``s0`` before the bias: the result
        is ``pair_mlps_reference`` with ``w0`` rounded by ``round_weights_to_fp8``.
    Returns: ``(m_0, m_1)``, each ``[H, M]`` in ``out_dtype``.
    """
    if fp8_weights and not (warp_specialized and is_fp8(x.dtype)):
        raise ValueError("pair_mlps: fp8_weights needs a float8 x and the warp-specialized "
                         "kernel (warp_specialized=True)")
    if warp_specialized:
        return _pair_mlps_warp_specialized(
            x, w0, b0, w1, b1, scale, max_concurrent_steps=max_concurrent_steps,
            max_ctas=max_ctas, interpret=interpret, out_dtype=out_dtype,
            fp8_weights=fp8_weights)
    (m_rows, c, h, dt, tm, odt, ctas, per_cta, w0t, w1t) = _kernel_plan(x, w0, w1, max_ctas,
                                                                         out_dtype)
    x8 = is_fp8(x.dtype)
    wgmma_layout = plgpu.Layout.WGMMA

    def pair_mlps_wgmma_kernel(x_g, w0_g, b0_g, w1_g, b1_g, s_g, o0_g, o1_g,
                               w0_s, w1_s, b0_s, b1_s, h_s, o_s, bars, *xt_s):
        for k, (src, dst) in enumerate(((w0_g, w0_s), (w1_g, w1_s), (b0_g, b0_s), (b1_g, b1_s))):
            plgpu.copy_gmem_to_smem(src, dst, bars.at[k])
        for k in range(4):
            plgpu.barrier_wait(bars.at[k])
        first_tile = lax.axis_index("cta") * per_cta

        def step(index, x_s, s_s):
            (i,) = index
            cols = pl.ds((first_tile + i) * tm, tm)
            s = load_vector(s_s, wgmma_layout.reduce(0), interpret)      # [TM]
            x_regs = (fp8_tile_as_f16(x_s, interpret, xt_s[1] if interpret else None)
                      if x8 else None)
            for j, o_g in ((0, o0_g), (1, o1_g)):
                h_t = _first_layer(x_s, x_regs, w0_s.at[j], b0_s.at[j], h_s,
                                   xt_s[0] if interpret else None, tm, h, dt, interpret)

                def second_layer(acc):
                    plgpu.wgmma(acc, w1_s.at[j], h_t)
                    return acc[...]
                mt = pl.run_scoped(second_layer, plgpu.ACC((h, tm), jnp.float32))
                bias = load_vector(b1_s.at[j], wgmma_layout.reduce(1), interpret)
                mt = mt + lax.broadcast_in_dim(bias, (h, tm), [0])
                if j == 0:
                    mt = mt * lax.broadcast_in_dim(s, (h, tm), [1])
                # o_s[j] is free once the previous step's copy of it has been read
                plgpu.wait_smem_to_gmem(1, wait_read_only=True)
                o_s[j] = mt.astype(odt)
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(o_s.at[j], o_g.at[:, cols])

        plgpu.emit_pipeline(
            step, grid=(per_cta,),
            in_specs=[plgpu.BlockSpec((tm, c), lambda i: (first_tile + i, 0),
                                      transforms=smem_transforms(c, x.dtype)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,))],
            max_concurrent_steps=max_concurrent_steps)(x_g, s_g)
        plgpu.wait_smem_to_gmem(0)

    options = {}
    w0_scratch, h_scratch = _hidden_scratch(x8, c, h, tm, dt, None)
    scratch = [w0_scratch,
               plgpu.SMEM((2, h, h), dt, transforms=smem_transforms(h)),
               plgpu.SMEM((2, h), jnp.float32),
               plgpu.SMEM((2, h), jnp.float32),
               h_scratch,
               plgpu.SMEM((2, h, tm), odt, transforms=smem_transforms(tm, odt)),
               plgpu.Barrier(num_barriers=4)]
    if interpret:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
        options["interpret"] = InterpretGPUParams()
        # the transposed operand: x^T [C, TM], or h^T [H, TM] for a float8 x
        scratch.append(plgpu.SMEM((h if x8 else c, tm), dt, transforms=smem_transforms(tm)))
        scratch.append(plgpu.SMEM((tm, c), jnp.float16))       # fp8_tile_as_f16's staging
    kernel = plgpu.kernel(pair_mlps_wgmma_kernel,
                          out_type=[jax.ShapeDtypeStruct((h, m_rows), odt)] * 2,
                          scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    out = kernel(x, w0t, b0.astype(jnp.float32), w1t, b1.astype(jnp.float32),
                 scale.astype(jnp.float32))
    return tuple(out)


def _pair_mlps_warp_specialized(x, w0, b0, w1, b1, scale, *, max_concurrent_steps: int,
                                max_ctas: int | None, interpret: bool, out_dtype=None,
                                fp8_weights: bool = False):
    """``pair_mlps`` with warpgroup ``j`` (of two) computing MLP ``j`` and a third issuing
    the loads. Biases and scales travel in ``x``'s dtype (as the PPGN passes them; the
    shared memory they save holds the second staging buffer; float8 weights' column scales
    too: powers of two, exact in it). Same arguments and result."""
    w8 = fp8_weights
    w0_fp8, w0_scale = to_fp8_columns(w0) if w8 else (None, None)
    (m_rows, c, h, dt, tm, odt, ctas, per_cta, w0t, w1t) = _kernel_plan(
        x, w0, w1, max_ctas, out_dtype, w0_fp8)
    # row j: MLP j's multiplier of its output's columns (m_0 scaled, m_1 not)
    scales = jnp.stack([scale.astype(dt), jnp.ones((m_rows,), dt)])
    x8 = is_fp8(x.dtype) and not w8        # float8 x converted to float16 on chip
    wgmma_layout = plgpu.Layout.WGMMA

    def pair_mlps_ws_wgmma_kernel(x_g, w0_g, w1_g, b_g, s_g, o0_g, o1_g,
                                  w0_s, w1_s, b_s, h_s, o_s, bars, *xt_s):
        @pl.when(lax.axis_index("wg") == 0)
        def _load_weights():
            for k, (src, dst) in enumerate(((w0_g, w0_s), (w1_g, w1_s), (b_g, b_s))):
                plgpu.copy_gmem_to_smem(src, dst, bars.at[k])

        first_tile = lax.axis_index("cta") * per_cta

        def step(index, x_s, s_s):
            (i,) = index
            j = lax.axis_index("wg")                                 # this warpgroup's MLP

            @pl.when(i == 0)
            def _weights_arrived():
                for k in range(3):
                    plgpu.barrier_wait(bars.at[k])

            cols = pl.ds((first_tile + i) * tm, tm)
            x_regs = (fp8_tile_as_f16(x_s, interpret, xt_s[1].at[j] if interpret else None)
                      if x8 else None)
            h_t = _first_layer(x_s, x_regs, w0_s.at[j], b_s.at[0, j], h_s.at[j],
                               xt_s[0].at[j] if interpret else None, tm, h, dt, interpret,
                               b_s.at[2, j] if w8 else None)

            def second_layer(acc):
                plgpu.wgmma(acc, w1_s.at[j], h_t)
                return acc[...]
            mt = pl.run_scoped(second_layer, plgpu.ACC((h, tm), jnp.float32))
            bias = load_vector(b_s.at[1, j], wgmma_layout.reduce(1), interpret)
            sj = load_vector(s_s.at[j], wgmma_layout.reduce(0), interpret)
            mt = (mt + lax.broadcast_in_dim(bias.astype(jnp.float32), (h, tm), [0])) * \
                lax.broadcast_in_dim(sj.astype(jnp.float32), (h, tm), [1])
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)          # last step's copy
            o_s.at[j][...] = mt.astype(odt)
            plgpu.commit_smem()
            for k, o_g in enumerate((o0_g, o1_g)):
                @pl.when(j == k)
                def _store():
                    plgpu.copy_smem_to_gmem(o_s.at[k], o_g.at[:, cols])

            @pl.when(i == per_cta - 1)
            def _drain():
                plgpu.wait_smem_to_gmem(0)

        plgpu.emit_pipeline_warp_specialized(
            step, grid=(per_cta,), memory_registers=40, num_compute_wgs=2, wg_axis="wg",
            in_specs=[plgpu.BlockSpec((tm, c), lambda i: (first_tile + i, 0),
                                      transforms=smem_transforms(c, x.dtype)),
                      plgpu.BlockSpec((2, tm), lambda i: (0, first_tile + i))],
            max_concurrent_steps=max_concurrent_steps)(x_g, s_g)

    options = {}
    w0_scratch, h_scratch = _hidden_scratch(x8, c, h, tm, dt, 2, x.dtype if w8 else None)
    vectors = [b0, b1] + ([w0_scale] if w8 else [])                 # b0; b1; float8 scales
    scratch = [w0_scratch,
               plgpu.SMEM((2, h, h), dt, transforms=smem_transforms(h)),
               plgpu.SMEM((len(vectors), 2, h), dt),
               h_scratch,
               plgpu.SMEM((2, h, tm), odt, transforms=smem_transforms(tm, odt)),
               plgpu.Barrier(num_barriers=3)]
    if interpret:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
        options["interpret"] = InterpretGPUParams()
        # the transposed operand: x^T [C, TM] (float8 with float8 weights), or h^T [H, TM]
        # for a float8 x with float16 weights
        tdt = x.dtype if w8 else dt
        scratch.append(plgpu.SMEM((2, h if x8 else c, tm), tdt,
                                  transforms=smem_transforms(tm, tdt)))
        scratch.append(plgpu.SMEM((2, tm, c), jnp.float16))    # fp8_tile_as_f16's staging
    kernel = plgpu.kernel(pair_mlps_ws_wgmma_kernel,
                          out_type=[jax.ShapeDtypeStruct((h, m_rows), odt)] * 2,
                          scratch_types=scratch, grid=(ctas,), grid_names=("cta",),
                          num_threads=3, thread_name="wg", **options)
    out = kernel(x, w0t, w1t, jnp.stack(vectors).astype(dt), scales)
    return tuple(out)


def random_inputs(m_rows: int, c: int = 128, h: int = 128, seed: int = 0,
                  dtype=jnp.bfloat16):
    """Random arguments of ``pair_mlps`` with the PPGN's init scales (for tests and
    benchmarks): ``x`` standard normal, weights ``N(0, 1/fan_in)``, biases and scale small."""
    ks = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(ks[0], (m_rows, c), dtype)
    w0 = (jax.random.normal(ks[1], (2, c, h)) / math.sqrt(c)).astype(dtype)
    b0 = (0.1 * jax.random.normal(ks[2], (2, h))).astype(dtype)
    w1 = (jax.random.normal(ks[3], (2, h, h)) / math.sqrt(h)).astype(dtype)
    b1 = (0.1 * jax.random.normal(ks[4], (2, h))).astype(dtype)
    scale = jax.random.uniform(ks[5], (m_rows,), minval=0.1, maxval=1.0).astype(dtype)
    return x, w0, b0, w1, b1, scale
