"""A PPGN block's mixing layer with its instance-norm statistics as a persistent Mosaic GPU
(Hopper ``wgmma``) kernel.

Computes what ``mix_norm_kernel.mix_with_stats_reference`` computes: per entry (row)

    y = x @ wx + prod^T @ wp + b                      (the Dense on [x, prod])

and, per graph and channel, the sums of ``d = y - b`` and ``d^2`` over the masked rows.
As ``pair_mlp_mgpu``: each CTA loads ``wx`` and ``wp`` into shared memory once and streams
its share of the row tiles (``x`` rows, the matching columns of the channels-first
``prod``) through a TMA pipeline. It computes ``y^T = wx^T x^T + wp^T prod`` (``x``'s tile
read through a transposed view of its shared-memory buffer, ``prod``'s as it lies), so
the statistics are sums along the accumulator's rows; ``mix_with_stats`` transposes ``y^T``
back, which XLA can fuse into the norm that reads it. A tile may span two graphs: the
caller passes the row mask split into "rows of the graph of the tile's first row" and
"rows of the next graph" (``split_row_mask``), and the kernel writes both partial sums
per tile, ``[tiles, 4, H]``, which a segment sum adds up per graph (as the Triton kernel
does).

GPU only (Hopper: wgmma is sm_90a's instruction); on CPU the Mosaic GPU interpreter runs it
when asked (``interpret=True``, the tests), with the transposed operand copied into a
scratch buffer first (the interpreter has no transposed MMA operands).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from ddgjax.models import pallas_launch
from ddgjax.models.common import graph_sums_from_tile_parts
from ddgjax.models.pair_mlp_mgpu import (FP8, TILE_ROWS, cta_count, fp8_tile_to_f16_smem,
                                         is_fp8, load_vector, mixing_fp8_column_scales,
                                         sm_count, smem_transforms, tile_plan, to_fp8_columns,
                                         to_fp8_saturated, transposed)

FP8_MAX = float(jnp.finfo(FP8).max)              # 448: where a float8 output saturates



def supported(m: int, nodes_sq: int, c: int, h: int) -> bool:
    """Whole tiles no longer than a graph, 128 channels out and 128 in (or 16: the first
    block's folded input channels), and enough tiles to give most SMs an equal share."""
    if c not in (16, 128) or h != 128 or m % TILE_ROWS or nodes_sq < TILE_ROWS or m % nodes_sq:
        return False
    tiles = m // TILE_ROWS
    sms = sm_count()
    return cta_count(tiles, sms) >= 0.75 * min(sms, tiles)


def split_row_mask(row_mask, nodes_sq: int, tm: int = TILE_ROWS):
    """``[M]`` -> ``[2, M]`` float32: the mask on the rows whose graph is the graph of their
    tile's first row, and on the others (the next graph; tiles are no longer than one)."""
    index = jnp.arange(row_mask.shape[0])
    first = (index // nodes_sq) == ((index // tm) * tm) // nodes_sq
    mask = row_mask.astype(jnp.float32)
    return jnp.stack([jnp.where(first, mask, 0.0), jnp.where(first, 0.0, mask)])


def mix_with_partial_sums(x, prod, wx, wp, b, split_mask, *,
                          max_concurrent_steps: int | None = None,
                          max_ctas: int | None = None, interpret: bool = False,
                          stats: bool = True, fp8_weights: bool = False,
                          fp8_out: bool = False, one_accumulator: bool | None = None):
    """The kernel.

    Args:
      x: ``[M, C]``; prod: ``[H, M]``; wx: ``[C, H]``; wp: ``[H, H]``; b: ``[H]``;
        split_mask: ``[2, M]`` float32 (``split_row_mask``). ``x`` and ``prod`` may each be
        float8 e4m3 (the PPGN's float8 activations): such a tile is converted to float16
        in shared memory (``fp8_tile_to_f16_smem``) and multiplied with float16 weights.
    Returns: ``y^T`` ``[H, M]`` in the dtype of ``x`` (bfloat16 for a float8 ``x``), and
      float32 ``[M / 64, 4, H]``: per
      tile ``sum(d w0), sum(d^2 w0), sum(d w1), sum(d^2 w1)`` (``w0, w1`` the two masks;
      zeros without ``stats``, a diagnostic).

    ``fp8_weights`` (a float8 ``x`` only): ``wx`` is stored in float8 too, ``wx / s`` with
    power-of-two scales per output channel (``to_fp8_columns``), and ``x``'s product is a
    float8 x float8 MMA with no conversion, into an accumulator of its own that is scaled
    by ``s`` before ``prod``'s is added (``wp / s`` in one accumulator could overflow
    float16 where a column of ``wx`` is tiny): ``mix_with_stats_reference`` with ``wx``
    rounded by ``pair_mlp_mgpu.round_weights_to_fp8``.

    ``one_accumulator`` (with ``fp8_weights``; None: ``pallas_launch.mix_one_accumulator()``):
    both products go into one accumulator, ``x``'s against ``wx / s`` and ``prod``'s against
    ``wp / s`` (float16 where ``prod`` is float8), scaled by ``s`` once, with the scales
    ``pair_mlp_mgpu.mixing_fp8_column_scales(wx, wp)`` that keep ``wp / s`` inside float16:
    ``mix_with_stats_reference`` with ``wx`` rounded by
    ``pair_mlp_mgpu.round_mixing_x_weights_to_fp8``, which is ``round_weights_to_fp8``'s
    rounding wherever a column of ``wx`` is not ~146 times smaller than ``wp``'s.

    ``fp8_out``: the first result is ``d^T = (y - b)^T`` in float8 e4m3, saturated at
    +-448, instead of ``y^T`` (the bias, which the instance norm cancels, is left out so
    that float8's relative precision is spent on the part the norm keeps); the sums are the
    same (of the unrounded ``d``).

    ``max_ctas``: at most this many CTAs (default ``pallas_launch.ctas_per_sm("MIX")`` per
    SM: 2 with ``fp8_weights``, 1 without; round 64 on an H200: 1.21 against 1.41 ms);
    ``max_concurrent_steps``: tiles in flight per CTA (default 3; 2 where ``max_ctas`` is
    not given and the default puts two CTAs on an SM, so that their shared memory fits).

    It computes ``y^T = wx^T x^T + wp^T prod``: the ``prod`` tile is the MMA's operand as
    it lies, and the statistics are sums along the accumulator's rows (within a thread and
    its quad). The untransposed form, ``y = x wx + prod^T wp`` with sums down the columns
    (across warps) and ``prod`` through a transposed view, ran 3.1 ms against Triton's
    2.05 on an H200 at 1024 x 3600 rows (docs/benchmarks.md, round 28) and was removed.
    """
    m_rows, c = x.shape
    if fp8_weights and not is_fp8(x.dtype):
        raise ValueError("mix_norm_mgpu: fp8_weights needs a float8 x")
    w8 = fp8_weights
    if one_accumulator is None:
        one_accumulator = pallas_launch.mix_one_accumulator()
    acc1 = w8 and one_accumulator                  # one accumulator for both products
    x8, p8 = is_fp8(x.dtype) and not w8, is_fp8(prod.dtype)        # converted on chip
    h, tm = wx.shape[-1], TILE_ROWS
    dt = jnp.dtype(jnp.bfloat16) if is_fp8(x.dtype) else x.dtype    # y's dtype
    xdt = (x.dtype if w8 else jnp.dtype(jnp.float16) if x8 else dt)  # the MMAs' operands
    pdt = jnp.dtype(jnp.float16) if p8 else dt
    odt = jnp.dtype(FP8) if fp8_out else dt                        # the first result's
    if max_ctas is None:
        per_sm = pallas_launch.ctas_per_sm("MIX", default=2 if fp8_weights else 1)
        max_ctas = per_sm * sm_count()
        if max_concurrent_steps is None:
            max_concurrent_steps = 3 if per_sm == 1 else 2
    max_concurrent_steps = max_concurrent_steps or 3
    tiles, ctas, per_cta = tile_plan(m_rows, max_ctas, "mix_norm_mgpu")

    def mix_wgmma_kernel(x_g, p_g, wx_g, wp_g, b_g, m0_g, m1_g, y_g, s_g,
                         wx_s, wp_s, b_s, y_s, bars, *scratch):
        scratch_t = scratch[2:] if interpret else ()
        x16_s, p16_s = scratch[:2]
        for k, (src, dst) in enumerate(((wx_g, wx_s), (wp_g, wp_s), (b_g, b_s))):
            plgpu.copy_gmem_to_smem(src, dst, bars.at[k])
        for k in range(3):
            plgpu.barrier_wait(bars.at[k])
        first_tile = lax.axis_index("cta") * per_cta

        def step(index, x_s, p_s, m0_s, m1_s):
            (i,) = index
            tile = first_tile + i
            if x8:
                fp8_tile_to_f16_smem(x_s, x16_s, interpret)
                x_s = x16_s
            if p8:
                fp8_tile_to_f16_smem(p_s, p16_s, interpret)
                p_s = p16_s
            if x8 or p8:
                plgpu.commit_smem()
            if interpret:        # the interpreter has no transposed MMA operands
                scratch_t[0][...] = x_s[...].T
                x_t = scratch_t[0]
            else:
                x_t = transposed(x_s)                             # [C, TM]
            shape = (h, tm)                                       # acc = y^T - b
            out = y_g.at[:, pl.ds(tile * tm, tm)]

            def mix(acc):
                plgpu.wgmma(acc, wx_s, x_t)
                plgpu.wgmma(acc, wp_s, p_s)
                return acc[...]

            def mix_scaled(acc_x, acc_p):           # float8 wx: its own accumulator, scaled
                plgpu.wgmma(acc_x, wx_s, x_t)
                plgpu.wgmma(acc_p, wp_s, p_s)
                return acc_x[...], acc_p[...]
            if acc1:
                d = pl.run_scoped(mix, plgpu.ACC(shape, jnp.float32))
                col = load_vector(b_s.at[1], plgpu.Layout.WGMMA.reduce(1), interpret)
                d = d * lax.broadcast_in_dim(col, shape, [0])
            elif w8:
                dx, dp = pl.run_scoped(mix_scaled, plgpu.ACC(shape, jnp.float32),
                                       plgpu.ACC(shape, jnp.float32))
                col = load_vector(b_s.at[1], plgpu.Layout.WGMMA.reduce(1), interpret)
                d = dx * lax.broadcast_in_dim(col, shape, [0]) + dp
            else:
                d = pl.run_scoped(mix, plgpu.ACC(shape, jnp.float32))
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)           # y_s read by TMA
            if fp8_out:                                   # d itself, saturated (no bias)
                y_s[...] = jnp.minimum(jnp.maximum(d, -FP8_MAX), FP8_MAX).astype(odt)
            else:
                bias = load_vector(b_s.at[0] if w8 else b_s, plgpu.Layout.WGMMA.reduce(1),
                                   interpret)                              # [H]
                y_s[...] = (d + lax.broadcast_in_dim(bias, shape, [0])).astype(dt)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(y_s, out)
            if stats:
                for slot, m_s in enumerate((m0_s, m1_s)):
                    mask = load_vector(m_s, plgpu.Layout.WGMMA.reduce(0), interpret)  # [TM]
                    dw = d * lax.broadcast_in_dim(mask, shape, [1])
                    s_g[tile, 2 * slot] = jnp.sum(dw, axis=1)
                    s_g[tile, 2 * slot + 1] = jnp.sum(dw * d, axis=1)

        plgpu.emit_pipeline(
            step, grid=(per_cta,),
            in_specs=[plgpu.BlockSpec((tm, c), lambda i: (first_tile + i, 0),
                                      transforms=smem_transforms(c, x.dtype)),
                      plgpu.BlockSpec((h, tm), lambda i: (0, first_tile + i),
                                      transforms=smem_transforms(tm, prod.dtype)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,))],
            max_concurrent_steps=max_concurrent_steps)(x_g, p_g, m0_g, m1_g)
        plgpu.wait_smem_to_gmem(0)

    options = {}
    # the float16 copies of float8 tiles (one row of 8 unused entries where a tile is not)
    f16_tile = lambda rows, cols, on: plgpu.SMEM(
        (rows, cols) if on else (1, 8), jnp.float16,
        transforms=smem_transforms(cols, jnp.float16) if on else ())
    scratch = [plgpu.SMEM((h, c), xdt, transforms=smem_transforms(c, xdt)),   # wx^T
               plgpu.SMEM((h, h), pdt, transforms=smem_transforms(h, pdt)),   # wp^T
               plgpu.SMEM((2, h) if w8 else (h,), jnp.float32),            # b (; scales)
               plgpu.SMEM((h, tm), odt, transforms=smem_transforms(tm, odt)),  # y^T staging
               plgpu.Barrier(num_barriers=3),
               f16_tile(tm, c, x8), f16_tile(h, tm, p8)]
    if interpret:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
        options["interpret"] = InterpretGPUParams()
        scratch.append(plgpu.SMEM((c, tm), xdt, transforms=smem_transforms(tm, xdt)))
    kernel = plgpu.kernel(
        mix_wgmma_kernel,
        out_type=[jax.ShapeDtypeStruct((h, m_rows), odt),
                  jax.ShapeDtypeStruct((tiles, 4, h), jnp.float32)],
        scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    if acc1:
        col = mixing_fp8_column_scales(wx, wp)
        wx8 = to_fp8_saturated(wx.astype(jnp.float32) / col[None, :])
        wxt, wpt = wx8.T, (wp.astype(jnp.float32) / col[None, :]).T.astype(pdt)
        vectors = jnp.stack([b.astype(jnp.float32), col])
    elif w8:
        wx8, col = to_fp8_columns(wx)
        wxt, wpt = wx8.T, wp.T.astype(pdt)
        vectors = jnp.stack([b.astype(jnp.float32), col])
    else:
        wxt, wpt, vectors = wx.T.astype(xdt), wp.T.astype(pdt), b.astype(jnp.float32)
    y, partial = kernel(x, prod if p8 else prod.astype(dt), wxt, wpt, vectors,
                        split_mask[0], split_mask[1])
    if not stats:
        partial = jnp.zeros_like(partial)
    return y, partial


def mix_with_stats(x, prod, wx, wp, b, row_mask, nodes_sq: int, **kw):
    """``mix_with_stats_reference`` (same arguments and results) through the kernel
    (``kw``: ``mix_with_partial_sums``'s options)."""
    y, partial = mix_with_partial_sums(x, prod, wx, wp, b, split_row_mask(row_mask, nodes_sq),
                                       **kw)
    y = y.T                           # [H, M] -> [M, H]; XLA may fuse it into the norm
    return y, graph_sums_from_tile_parts(partial, TILE_ROWS, nodes_sq)


def random_inputs(graphs: int, nodes_sq: int, seed: int = 0, dtype=jnp.bfloat16):
    """Random arguments of ``mix_with_stats`` (without ``nodes_sq``) for tests and
    benchmarks: ``x``, ``prod`` standard normal, weights ``N(0, 1/121)``, a bias near 2
    (as a norm's shift would be) and a row mask with ~80 % ones."""
    ks = jax.random.split(jax.random.key(seed), 6)
    m = graphs * nodes_sq
    x = jax.random.normal(ks[0], (m, 128), dtype)
    prod = jax.random.normal(ks[1], (128, m), dtype)
    wx = (jax.random.normal(ks[2], (128, 128)) / 11).astype(dtype)
    wp = (jax.random.normal(ks[3], (128, 128)) / 11).astype(dtype)
    b = (2 + jax.random.normal(ks[4], (128,))).astype(dtype)
    mask = (jax.random.uniform(ks[5], (m,)) < 0.8).astype(dtype)
    return x, prod, wx, wp, b, mask
