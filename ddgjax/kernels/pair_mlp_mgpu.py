"""The PPGN block's two pair MLPs as a persistent Mosaic GPU kernel (Hopper ``wgmma``).

Computes what ``pair_mlp.pair_mlps_reference`` computes,

    m_j = leaky_relu(x @ w0[j] + b0[j]) @ w1[j] + b1[j]          j = 0, 1
    m_0 = m_0 * scale

written channels first (two ``[H, M]`` arrays), in bfloat16. Why another kernel: the
Triton kernel loads all four weight matrices (128 KB) for each 128-row tile (32 KB of
input), one tile per program, and runs at ~1.7 TB/s where a copy runs at 2.8. Here each
CTA loads the weights into shared memory once and then streams its share of the row
tiles through a double-buffered TMA pipeline; the matrix products run on Hopper's
asynchronous warpgroup MMA.

Everything is computed transposed, so the result comes out channels first without a
transpose: ``h^T = w0[j]^T x^T`` (the ``x`` tile is read through a transposed view of its
shared-memory buffer), ``m_j^T = w1[j]^T h^T`` (``h^T`` staged in shared memory), both
with ``M = H`` rows and the tile's rows as columns.

The warp-specialized variant (``warp_specialized=True``, the default setting) runs the two
MLPs on two compute warpgroups and the loads on a third. The interpreter runs those three
warpgroups side by side on host threads: on a 2-core machine with XLA's default CPU client
it hangs, with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (which
``tests/conftest.py`` sets) it runs.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from ddgjax.kernels.mgpu import (TILE_ROWS, fills_the_gpu, interpret_params, load_vector,
                                 smem_transforms, tile_plan, transposed_operand)

NEGATIVE_SLOPE = 0.01


def supported(m: int, c: int, h: int) -> bool:
    """Shapes the kernel takes: 128 channels out and 128 in (the weights fill 128 KB of
    shared memory) or 16 (the first block's folded input channels), and rows that give
    most SMs an equal share of whole tiles."""
    return c in (16, 128) and h == 128 and fills_the_gpu(m)


def _first_layer(x_s, w0, b0, h_s, x_t, tm, h, dt, interpret):
    """One pair MLP's first layer on a tile, ``h^T = w0^T x^T``, leaky ReLU'd into ``h_s``
    (``[H, TM]``, which the second layer reads); ``x_t``: the interpreter's scratch."""
    rhs = transposed_operand(x_s, x_t, interpret)

    def first_layer(acc):
        plgpu.wgmma(acc, w0, rhs)
        return acc[...]
    acc = pl.run_scoped(first_layer, plgpu.ACC((h, tm), jnp.float32))
    bias = load_vector(b0, plgpu.Layout.WGMMA.reduce(1), interpret)
    acc = acc + lax.broadcast_in_dim(bias.astype(jnp.float32), (h, tm), [0])
    h_s[...] = jnp.maximum(acc, NEGATIVE_SLOPE * acc).astype(dt)        # leaky ReLU
    plgpu.commit_smem()
    return h_s


def pair_mlps(x, w0, b0, w1, b1, scale, *, max_concurrent_steps: int = 2,
              max_ctas: int | None = None, interpret: bool = False,
              warp_specialized: bool = False):
    """``pair_mlp.pair_mlps_reference`` through the kernel.

    Args:
      x: ``[M, C]`` bf16; w0 ``[2, C, H]``; b0 ``[2, H]``; w1 ``[2, H, H]``; b1 ``[2, H]``;
        scale ``[M]`` (weights are cast to ``x``'s dtype; biases and scale used in float32,
        or rounded to ``x``'s dtype by the warp-specialized kernel: the PPGN passes them in
        bf16, where the two kernels agree bit for bit).
      max_ctas: at most this many CTAs (default: one per SM).
      warp_specialized: two compute warpgroups, one per MLP, on the same ``x`` tile, and a
        third that only issues the TMA loads, so one warpgroup's epilogue overlaps the
        other's MMAs (on an H200 1.39 against ~1.5 ms per call; level on an H100).
    Returns: ``(m_0, m_1)``, each ``[H, M]`` in ``x``'s dtype.
    """
    if warp_specialized:
        return _pair_mlps_warp_specialized(x, w0, b0, w1, b1, scale,
                                           max_concurrent_steps=max_concurrent_steps,
                                           max_ctas=max_ctas, interpret=interpret)
    m_rows, c = x.shape
    h, dt, tm = w0.shape[-1], x.dtype, TILE_ROWS
    _, ctas, per_cta = tile_plan(m_rows, max_ctas, "pair_mlp_mgpu")

    def pair_mlps_wgmma_kernel(x_g, w0_g, b0_g, w1_g, b1_g, s_g, o0_g, o1_g,
                               w0_s, w1_s, b0_s, b1_s, h_s, o_s, bars, *x_t):
        for k, (src, dst) in enumerate(((w0_g, w0_s), (w1_g, w1_s), (b0_g, b0_s), (b1_g, b1_s))):
            plgpu.copy_gmem_to_smem(src, dst, bars.at[k])
        for k in range(4):
            plgpu.barrier_wait(bars.at[k])
        first_tile = lax.axis_index("cta") * per_cta

        def step(index, x_s, s_s):
            (i,) = index
            cols = pl.ds((first_tile + i) * tm, tm)
            s = load_vector(s_s, plgpu.Layout.WGMMA.reduce(0), interpret)      # [TM]
            for j, o_g in ((0, o0_g), (1, o1_g)):
                h_t = _first_layer(x_s, w0_s.at[j], b0_s.at[j], h_s,
                                   x_t[0] if interpret else None, tm, h, dt, interpret)

                def second_layer(acc):
                    plgpu.wgmma(acc, w1_s.at[j], h_t)
                    return acc[...]
                mt = pl.run_scoped(second_layer, plgpu.ACC((h, tm), jnp.float32))
                bias = load_vector(b1_s.at[j], plgpu.Layout.WGMMA.reduce(1), interpret)
                mt = mt + lax.broadcast_in_dim(bias, (h, tm), [0])
                if j == 0:
                    mt = mt * lax.broadcast_in_dim(s, (h, tm), [1])
                # o_s[j] is free once the previous step's copy of it has been read
                plgpu.wait_smem_to_gmem(1, wait_read_only=True)
                o_s[j] = mt.astype(dt)
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(o_s.at[j], o_g.at[:, cols])

        plgpu.emit_pipeline(
            step, grid=(per_cta,),
            in_specs=[plgpu.BlockSpec((tm, c), lambda i: (first_tile + i, 0),
                                      transforms=smem_transforms(c, dt)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,))],
            max_concurrent_steps=max_concurrent_steps)(x_g, s_g)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((2, h, c), dt, transforms=smem_transforms(c)),      # w0^T
               plgpu.SMEM((2, h, h), dt, transforms=smem_transforms(h)),      # w1^T
               plgpu.SMEM((2, h), jnp.float32),
               plgpu.SMEM((2, h), jnp.float32),
               plgpu.SMEM((h, tm), dt, transforms=smem_transforms(tm)),       # h^T
               plgpu.SMEM((2, h, tm), dt, transforms=smem_transforms(tm)),    # m^T staging
               plgpu.Barrier(num_barriers=4)]
    options = {}
    if interpret:
        options = interpret_params()
        scratch.append(plgpu.SMEM((c, tm), dt, transforms=smem_transforms(tm)))   # x^T
    kernel = plgpu.kernel(pair_mlps_wgmma_kernel,
                          out_type=[jax.ShapeDtypeStruct((h, m_rows), dt)] * 2,
                          scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    out = kernel(x, jnp.swapaxes(w0, 1, 2).astype(dt), b0.astype(jnp.float32),
                 jnp.swapaxes(w1, 1, 2).astype(dt), b1.astype(jnp.float32),
                 scale.astype(jnp.float32))
    return tuple(out)


def _pair_mlps_warp_specialized(x, w0, b0, w1, b1, scale, *, max_concurrent_steps: int,
                                max_ctas: int | None, interpret: bool):
    """``pair_mlps`` with warpgroup ``j`` (of two) computing MLP ``j`` and a third issuing
    the loads. Biases and scales travel in ``x``'s dtype (as the PPGN passes them; the
    shared memory they save holds the second staging buffer). Same arguments and result."""
    m_rows, c = x.shape
    h, dt, tm = w0.shape[-1], x.dtype, TILE_ROWS
    _, ctas, per_cta = tile_plan(m_rows, max_ctas, "pair_mlp_mgpu")
    # row j: MLP j's multiplier of its output's columns (m_0 scaled, m_1 not)
    scales = jnp.stack([scale.astype(dt), jnp.ones((m_rows,), dt)])

    def pair_mlps_ws_wgmma_kernel(x_g, w0_g, w1_g, b_g, s_g, o0_g, o1_g,
                                  w0_s, w1_s, b_s, h_s, o_s, bars, *x_t):
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
            h_t = _first_layer(x_s, w0_s.at[j], b_s.at[0, j], h_s.at[j],
                               x_t[0].at[j] if interpret else None, tm, h, dt, interpret)

            def second_layer(acc):
                plgpu.wgmma(acc, w1_s.at[j], h_t)
                return acc[...]
            mt = pl.run_scoped(second_layer, plgpu.ACC((h, tm), jnp.float32))
            bias = load_vector(b_s.at[1, j], plgpu.Layout.WGMMA.reduce(1), interpret)
            sj = load_vector(s_s.at[j], plgpu.Layout.WGMMA.reduce(0), interpret)
            mt = (mt + lax.broadcast_in_dim(bias.astype(jnp.float32), (h, tm), [0])) * \
                lax.broadcast_in_dim(sj.astype(jnp.float32), (h, tm), [1])
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)          # last step's copy
            o_s.at[j][...] = mt.astype(dt)
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
                                      transforms=smem_transforms(c, dt)),
                      plgpu.BlockSpec((2, tm), lambda i: (0, first_tile + i))],
            max_concurrent_steps=max_concurrent_steps)(x_g, s_g)

    scratch = [plgpu.SMEM((2, h, c), dt, transforms=smem_transforms(c)),      # w0^T
               plgpu.SMEM((2, h, h), dt, transforms=smem_transforms(h)),      # w1^T
               plgpu.SMEM((2, 2, h), dt),                                     # b0; b1
               plgpu.SMEM((2, h, tm), dt, transforms=smem_transforms(tm)),    # h^T per MLP
               plgpu.SMEM((2, h, tm), dt, transforms=smem_transforms(tm)),    # m^T staging
               plgpu.Barrier(num_barriers=3)]
    options = {}
    if interpret:
        options = interpret_params()
        scratch.append(plgpu.SMEM((2, c, tm), dt, transforms=smem_transforms(tm)))  # x^T
    kernel = plgpu.kernel(pair_mlps_ws_wgmma_kernel,
                          out_type=[jax.ShapeDtypeStruct((h, m_rows), dt)] * 2,
                          scratch_types=scratch, grid=(ctas,), grid_names=("cta",),
                          num_threads=3, thread_name="wg", **options)
    out = kernel(x, jnp.swapaxes(w0, 1, 2).astype(dt), jnp.swapaxes(w1, 1, 2).astype(dt),
                 jnp.stack([b0, b1]).astype(dt), scales)
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
