"""A PPGN block's mixing layer with its instance-norm statistics as a persistent Mosaic GPU
(Hopper ``wgmma``) kernel.

Computes what ``mix_norm.mix_with_stats_reference`` computes: per entry (row)

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
does). The untransposed form (sums across warps, ``prod`` through a transposed view) ran
3.1 ms against Triton's 2.05 on an H200 at 1024 x 3600 rows and was removed.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from ddgjax.kernels.common import graph_sums_from_tile_parts
from ddgjax.kernels.mgpu import (TILE_ROWS, fills_the_gpu, interpret_params, load_vector,
                                 smem_transforms, tile_plan, transposed_operand)


def supported(m: int, nodes_sq: int, c: int, h: int) -> bool:
    """Whole graphs of at least one tile, 128 channels out and 128 in (or 16: the first
    block's folded input channels), and rows that give most SMs an equal share."""
    return (c in (16, 128) and h == 128 and nodes_sq >= TILE_ROWS and m % nodes_sq == 0
            and fills_the_gpu(m))


def split_row_mask(row_mask, nodes_sq: int, tm: int = TILE_ROWS):
    """``[M]`` -> ``[2, M]`` float32: the mask on the rows whose graph is the graph of their
    tile's first row, and on the others (the next graph; tiles are no longer than one)."""
    index = jnp.arange(row_mask.shape[0])
    first = (index // nodes_sq) == ((index // tm) * tm) // nodes_sq
    mask = row_mask.astype(jnp.float32)
    return jnp.stack([jnp.where(first, mask, 0.0), jnp.where(first, 0.0, mask)])


def mix_with_partial_sums(x, prod, wx, wp, b, split_mask, *, max_concurrent_steps: int = 3,
                          max_ctas: int | None = None, interpret: bool = False):
    """The kernel.

    Args:
      x: ``[M, C]``; prod: ``[H, M]``; wx: ``[C, H]``; wp: ``[H, H]``; b: ``[H]``;
        split_mask: ``[2, M]`` float32 (``split_row_mask``).
      max_ctas: at most this many CTAs (default: one per SM); max_concurrent_steps: tiles
        in flight per CTA.
    Returns: ``y^T`` ``[H, M]`` in the dtype of ``x``, and float32 ``[M / 64, 4, H]``: per
      tile ``sum(d w0), sum(d^2 w0), sum(d w1), sum(d^2 w1)`` (``w0, w1`` the two masks).
    """
    m_rows, c = x.shape
    h, tm, dt = wx.shape[-1], TILE_ROWS, x.dtype
    tiles, ctas, per_cta = tile_plan(m_rows, max_ctas, "mix_norm_mgpu")

    def mix_wgmma_kernel(x_g, p_g, wx_g, wp_g, b_g, m0_g, m1_g, y_g, s_g,
                         wx_s, wp_s, b_s, y_s, bars, *x_t):
        for k, (src, dst) in enumerate(((wx_g, wx_s), (wp_g, wp_s), (b_g, b_s))):
            plgpu.copy_gmem_to_smem(src, dst, bars.at[k])
        for k in range(3):
            plgpu.barrier_wait(bars.at[k])
        first_tile = lax.axis_index("cta") * per_cta

        def step(index, x_s, p_s, m0_s, m1_s):
            (i,) = index
            tile = first_tile + i
            x_tile_t = transposed_operand(x_s, x_t[0] if interpret else None, interpret)
            shape = (h, tm)                                       # acc = y^T - b

            def mix(acc):
                plgpu.wgmma(acc, wx_s, x_tile_t)
                plgpu.wgmma(acc, wp_s, p_s)
                return acc[...]
            d = pl.run_scoped(mix, plgpu.ACC(shape, jnp.float32))
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)           # y_s read by TMA
            bias = load_vector(b_s, plgpu.Layout.WGMMA.reduce(1), interpret)     # [H]
            y_s[...] = (d + lax.broadcast_in_dim(bias, shape, [0])).astype(dt)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(y_s, y_g.at[:, pl.ds(tile * tm, tm)])
            for slot, m_s in enumerate((m0_s, m1_s)):
                mask = load_vector(m_s, plgpu.Layout.WGMMA.reduce(0), interpret)  # [TM]
                dw = d * lax.broadcast_in_dim(mask, shape, [1])
                s_g[tile, 2 * slot] = jnp.sum(dw, axis=1)
                s_g[tile, 2 * slot + 1] = jnp.sum(dw * d, axis=1)

        plgpu.emit_pipeline(
            step, grid=(per_cta,),
            in_specs=[plgpu.BlockSpec((tm, c), lambda i: (first_tile + i, 0),
                                      transforms=smem_transforms(c, dt)),
                      plgpu.BlockSpec((h, tm), lambda i: (0, first_tile + i),
                                      transforms=smem_transforms(tm, dt)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,))],
            max_concurrent_steps=max_concurrent_steps)(x_g, p_g, m0_g, m1_g)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((h, c), dt, transforms=smem_transforms(c, dt)),      # wx^T
               plgpu.SMEM((h, h), dt, transforms=smem_transforms(h, dt)),      # wp^T
               plgpu.SMEM((h,), jnp.float32),                                  # b
               plgpu.SMEM((h, tm), dt, transforms=smem_transforms(tm, dt)),    # y^T staging
               plgpu.Barrier(num_barriers=3)]
    options = {}
    if interpret:
        options = interpret_params()
        scratch.append(plgpu.SMEM((c, tm), dt, transforms=smem_transforms(tm, dt)))  # x^T
    kernel = plgpu.kernel(
        mix_wgmma_kernel,
        out_type=[jax.ShapeDtypeStruct((h, m_rows), dt),
                  jax.ShapeDtypeStruct((tiles, 4, h), jnp.float32)],
        scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    return kernel(x, prod.astype(dt), wx.T.astype(dt), wp.T.astype(dt), b.astype(jnp.float32),
                  split_mask[0], split_mask[1])


def mix_with_stats(x, prod, wx, wp, b, row_mask, nodes_sq: int, **kw):
    """``mix_norm.mix_with_stats_reference`` (same arguments and results) through the kernel
    (``kw``: ``mix_with_partial_sums``' options)."""
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
