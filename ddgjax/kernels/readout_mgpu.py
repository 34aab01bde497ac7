"""The PPGN's readout and residual layer as one persistent Mosaic GPU kernel (Hopper ``wgmma``).

Computes, for every entry (row) ``m``,

    z   = x_0 @ w_0 + sum_k x_k @ w_k + b           (the readout Dense over [x_0, x_1..x_K])
    out = z + leaky_relu(z @ w_r + b_r)              (the residual layer)

and writes ``out`` channels first (``[H, M]``, bfloat16), or, with the output layer
Dense(H -> 1) folded in (``readout``'s ``w_out``; ``KernelSettings.readout_fold``), the
logits ``out @ w_out`` (float32 ``[M]``) instead. XLA runs the readout as K + 1 partial
GEMMs and their sums, each a pass over a ``[M, H]`` tensor; here every block output
``x_k`` is read once and ``out`` written once (or not at all).

The weights do not fit in shared memory (``K x 128 x 128`` bf16: 256 KB at K = 8), so each
tile of rows streams them with its inputs: a ring of (``w_k^T``, ``x_k`` tile) buffers,
filled by TMA ahead of the MMA that reads them, steps running over (tile, k). Tiles of 64
rows use a ring of three (loads two steps ahead; the default), tiles of 128 a ring of two
(one step ahead; slower on an H200: 4.3-4.5 against 3.6 ms). ``x_0`` (the input channels,
zero-padded to 16) and ``w_0`` enter through a small MMA that starts each tile's
accumulator. Everything is transposed, as in ``pair_mlp_mgpu``:
``z^T = w_0^T x_0^T + sum_k w_k^T x_k^T``.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from ddgjax.kernels.mgpu import (TILE_ROWS, fills_the_gpu, interpret_params, load_vector,
                                 smem_transforms, tile_plan, transposed_operand)

NEGATIVE_SLOPE = 0.01
INPUT_WIDTH = 16            # x_0's channels, zero-padded: the MMA's K for the x_0 term
RINGS = {64: 3, 128: 2}     # (w_k^T, x_k tile) buffers per tile size (shared memory)
# The output-layer fold's MMA width (w_out's hi and lo parts). Its right operand is staged
# K-major, [FOLD_WIDTH, H] (a 256-byte row, the 128-byte swizzle), and read through a
# transposed view: the N-major [H, 16] and [H, 32] operands did not lower on an H200.
FOLD_WIDTH = 16


def supported_widths(c0: int, widths, h: int) -> bool:
    """The channel counts the kernel takes: at most ``INPUT_WIDTH`` input channels,
    128-wide block outputs and features."""
    return h == 128 and c0 <= INPUT_WIDTH and all(w == 128 for w in widths)


def supported(m: int, c0: int, widths, h: int) -> bool:
    """``supported_widths``, and rows that give most SMs an equal share of whole tiles."""
    return supported_widths(c0, widths, h) and fills_the_gpu(m)


def readout_reference(x0, xs, w0, ws, b, wr, br):
    """The function the kernel computes, in XLA (float32 accumulation; ``z`` rounded to
    ``x0``'s dtype, as the kernel stages it for the residual's MMA and reads it back, and
    as the XLA path holds it).

    Args: x0 ``[M, C0]``; xs K x ``[M, 128]`` (``x0``'s dtype); w0 ``[C0, H]``; ws
      ``[K, 128, H]``; b, br ``[H]``; wr ``[H, H]``. Returns ``out^T`` ``[H, M]`` in
      ``x0``'s dtype.
    """
    f32 = jnp.float32
    z = jnp.einsum("mc,ch->hm", x0, w0.astype(x0.dtype), preferred_element_type=f32)
    for x, w in zip(xs, ws):
        z = z + jnp.einsum("mc,ch->hm", x.astype(x0.dtype), w.astype(x0.dtype),
                           preferred_element_type=f32)
    z = z + b.astype(f32)[:, None]
    z = z.astype(x0.dtype)               # as the residual's MMA reads it, and as the sum's
    r = jnp.einsum("hm,hk->km", z, wr.astype(x0.dtype),
                   preferred_element_type=f32) + br.astype(f32)[:, None]
    return (z.astype(f32) + jnp.where(r >= 0, r, NEGATIVE_SLOPE * r)).astype(x0.dtype)


def readout_logits_reference(x0, xs, w0, ws, b, wr, br, w_out):
    """``readout_reference`` followed by the output layer without its bias:
    ``out @ w_out`` (float32 ``w_out`` ``[H]``) for every row, float32 ``[M]``."""
    out_t = readout_reference(x0, xs, w0, ws, b, wr, br)
    return jnp.einsum("hm,h->m", out_t.astype(jnp.float32), w_out.astype(jnp.float32))


def split_hi_lo(w, dtype=jnp.bfloat16):
    """``w`` (float32) as ``hi + lo``, both bfloat16: ``hi`` is ``w`` with the low 16 bits
    of its float32 pattern cleared (exactly a bfloat16 value), ``lo`` the bfloat16 rounding
    of the rest (exact in float32), so that ``hi + lo`` carries ~16 of float32's 24 bits (a
    relative error of ~2^-16, against ~2^-8 for ``hi`` alone). The bit mask, not a round
    trip through bfloat16: XLA may drop a float32 -> bfloat16 -> float32 round trip
    (``xla_allow_excess_precision``, on by default), which made ``lo`` zero on an H200."""
    if jnp.dtype(dtype) != jnp.dtype(jnp.bfloat16):
        raise ValueError(f"split_hi_lo: bfloat16 parts only, got {jnp.dtype(dtype).name}")
    w = w.astype(jnp.float32)
    bits = lax.bitcast_convert_type(w, jnp.uint32) & jnp.uint32(0xFFFF0000)
    hi = lax.bitcast_convert_type(bits, jnp.float32)
    return hi.astype(dtype), (w - hi).astype(dtype)


def readout(x0, xs, w0, ws, b, wr, br, *, max_ctas: int | None = None,
            interpret: bool = False, tile_rows: int = TILE_ROWS, ring: int | None = None,
            w_out=None):
    """``readout_reference`` through the kernel (arguments and result as there; ``x0`` is
    zero-padded to ``INPUT_WIDTH`` channels here; ``tile_rows`` 64 or 128).

    ``max_ctas``: at most this many CTAs (default: one per SM); ``ring``: (``w_k^T``,
    ``x_k``) buffers (at least 2; default ``RINGS[tile_rows]``).

    ``w_out`` (float32 ``[H]``, optional): the output layer folded in. The kernel then
    writes ``out @ w_out`` (float32 ``[M]``, ``readout_logits_reference``) instead of
    ``out^T``: each tile's ``out`` (bf16, as staged for the store) is the transposed left
    operand of one more MMA against the columns ``[hi, lo, 0, ...]`` (``split_hi_lo`` of
    ``w_out``, 4 KB of shared memory), whose row sums are the logits. It saves writing
    ``out^T`` (bf16, ``H`` channels per row) and reading it back for the output layer."""
    m_rows, c0 = x0.shape
    k_blocks = len(xs)
    h, dt, tm = ws.shape[-1], x0.dtype, tile_rows
    if tm not in RINGS:
        raise ValueError(f"readout_mgpu: tile_rows must be one of {sorted(RINGS)}, got {tm}")
    ring = ring or RINGS[tm]
    if ring < 2:
        raise ValueError(f"readout_mgpu: ring must be at least 2 (loads run ahead of the MMAs), "
                         f"got {ring}")
    tiles, ctas, per_cta = tile_plan(m_rows, max_ctas, "readout_mgpu", tm)
    x0p = jnp.pad(x0, ((0, 0), (0, INPUT_WIDTH - c0)))                       # [M, 16]
    w0t = jnp.pad(w0, ((0, INPUT_WIDTH - c0), (0, 0))).T.astype(dt)          # [H, 16]
    wst = jnp.swapaxes(ws, 1, 2).astype(dt)                                   # [K, H, 128]
    wrt = wr.T.astype(dt)                                                     # [H, H]
    biases = jnp.stack([b.astype(jnp.float32), br.astype(jnp.float32)])      # [2, H]
    steps = per_cta * k_blocks
    fold = w_out is not None
    if fold:
        hi, lo = split_hi_lo(w_out, dt)
        wcol = jnp.zeros((FOLD_WIDTH, h), dt).at[0].set(hi).at[1].set(lo)    # K-major
    else:
        wcol = jnp.zeros((8, FOLD_WIDTH), dt)              # unused
    n_const = 4 if fold else 3

    def readout_wgmma_kernel(x0_g, *refs):
        xs_g = refs[:k_blocks]
        (w0_g, ws_g, wr_g, b_g, wc_g, out_g, w0_s, wr_s, b_s, wc_s, x0_s, ring_x, ring_w,
         z_s, const_bars, x0_bars, x_bars, w_bars, *scratch) = refs[k_blocks:]
        consts = ((w0_g, w0_s), (wr_g, wr_s), (b_g, b_s)) + (((wc_g, wc_s),) if fold else ())
        for j, (src, dst) in enumerate(consts):
            plgpu.copy_gmem_to_smem(src, dst, const_bars.at[j])
        first_tile = lax.axis_index("cta") * per_cta

        def rows(t):
            return pl.ds((first_tile + t) * tm, tm)

        def fetch_x0(t):
            plgpu.copy_gmem_to_smem(x0_g.at[rows(t)], x0_s.at[t % 2], x0_bars.at[t % 2])

        def fetch(step_tile, k, slot):
            """Step (tile ``step_tile``, block ``k``, static) into ring ``slot``."""
            plgpu.copy_gmem_to_smem(xs_g[k].at[rows(step_tile)], ring_x.at[slot],
                                    x_bars.at[slot])
            plgpu.copy_gmem_to_smem(ws_g.at[k], ring_w.at[slot], w_bars.at[slot])

        fetch_x0(0)
        for s in range(min(ring - 1, steps)):            # the first steps
            fetch(s // k_blocks, s % k_blocks, s)
        for j in range(n_const):
            plgpu.barrier_wait(const_bars.at[j])

        def transposed(ref, which):
            return transposed_operand(ref, scratch[which] if interpret else None, interpret)

        def tile_body(t, carry):
            plgpu.barrier_wait(x0_bars.at[t % 2])

            def accumulate(acc):
                plgpu.wgmma(acc, w0_s, transposed(x0_s.at[t % 2], 0))

                @pl.when(t + 1 < per_cta)
                def _next_x0():
                    fetch_x0(t + 1)

                for k in range(k_blocks):
                    step = t * k_blocks + k
                    slot = lax.rem(step, ring)
                    plgpu.barrier_wait(x_bars.at[slot])
                    plgpu.barrier_wait(w_bars.at[slot])
                    plgpu.wgmma(acc, ring_w.at[slot], transposed(ring_x.at[slot], 1))
                    # at most this MMA in flight: step - 1's slot is free for step + ring - 1
                    # (the lowering issues no wait by itself; without this the load could
                    # overwrite operands the previous MMA still reads)
                    plgpu.wgmma_wait(1)
                    ahead = k + ring - 1
                    ahead_tile = t + ahead // k_blocks

                    @pl.when(ahead_tile < per_cta)
                    def _prefetch():
                        fetch(ahead_tile, ahead % k_blocks, lax.rem(step + ring - 1, ring))
                return acc[...]

            z = pl.run_scoped(accumulate, plgpu.ACC((h, tm), jnp.float32))      # [H, TM]
            bias = load_vector(b_s.at[0], plgpu.Layout.WGMMA.reduce(1), interpret)
            z = z + lax.broadcast_in_dim(bias, (h, tm), [0])
            if not fold:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # z_s: last tile's copy read
            z_s[...] = z.astype(dt)
            plgpu.commit_smem()

            def residual(acc):
                plgpu.wgmma(acc, wr_s, z_s)
                return acc[...]
            r = pl.run_scoped(residual, plgpu.ACC((h, tm), jnp.float32))
            bias = load_vector(b_s.at[1], plgpu.Layout.WGMMA.reduce(1), interpret)
            r = r + lax.broadcast_in_dim(bias, (h, tm), [0])
            # z back from shared memory (bf16, as the XLA path holds it): no f32 z
            # stays live beside r
            z = load_vector(z_s, plgpu.Layout.WGMMA, interpret).astype(jnp.float32)
            z_s[...] = (z + jnp.maximum(r, NEGATIVE_SLOPE * r)).astype(dt)
            plgpu.commit_smem()
            if fold:                      # logits = out @ (hi + lo): row sums of out @ wcol
                def output_layer(acc):
                    plgpu.wgmma(acc, transposed(z_s, 2), transposed(wc_s, 3))
                    return acc[...]
                lg = pl.run_scoped(output_layer, plgpu.ACC((tm, FOLD_WIDTH), jnp.float32))
                out_g[rows(t)] = jnp.sum(lg, axis=1)
            else:
                plgpu.copy_smem_to_gmem(z_s, out_g.at[:, rows(t)])
            return carry

        lax.fori_loop(0, per_cta, tile_body, 0)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((h, INPUT_WIDTH), dt, transforms=smem_transforms(INPUT_WIDTH)),
               plgpu.SMEM((h, h), dt, transforms=smem_transforms(h)),
               plgpu.SMEM((2, h), jnp.float32),
               plgpu.SMEM(wcol.shape, dt, transforms=smem_transforms(wcol.shape[1])),
               plgpu.SMEM((2, tm, INPUT_WIDTH), dt, transforms=smem_transforms(INPUT_WIDTH)),
               plgpu.SMEM((ring, tm, 128), dt, transforms=smem_transforms(128, dt)),
               plgpu.SMEM((ring, h, 128), dt, transforms=smem_transforms(128, dt)),
               plgpu.SMEM((h, tm), dt, transforms=smem_transforms(tm)),
               plgpu.Barrier(num_barriers=n_const), plgpu.Barrier(num_barriers=2),
               plgpu.Barrier(num_barriers=ring), plgpu.Barrier(num_barriers=ring)]
    options = {}
    if interpret:            # the transposed operands' copies: x_0, x_k, out, w_out
        options = interpret_params()
        scratch += [plgpu.SMEM((INPUT_WIDTH, tm), dt, transforms=smem_transforms(tm)),
                    plgpu.SMEM((128, tm), dt, transforms=smem_transforms(tm, dt)),
                    plgpu.SMEM((tm, h), dt, transforms=smem_transforms(h)),
                    plgpu.SMEM((h, FOLD_WIDTH), dt, transforms=smem_transforms(FOLD_WIDTH))]
    out_type = (jax.ShapeDtypeStruct((m_rows,), jnp.float32) if fold
                else jax.ShapeDtypeStruct((h, m_rows), dt))
    kernel = plgpu.kernel(readout_wgmma_kernel, out_type=out_type,
                          scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    return kernel(x0p.astype(dt), *[x.astype(dt) for x in xs], w0t, wst, wrt, biases, wcol)


def random_inputs(m_rows: int, c0: int = 3, k_blocks: int = 8, seed: int = 0,
                  dtype=jnp.bfloat16):
    """Random arguments of ``readout`` at the PPGN's init scales (tests, benchmarks)."""
    ks = jax.random.split(jax.random.key(seed), 7)
    fan_in = c0 + 128 * k_blocks
    x0 = jax.random.normal(ks[0], (m_rows, c0), dtype)
    xs = tuple(jax.random.normal(k, (m_rows, 128), dtype)
               for k in jax.random.split(ks[1], k_blocks))
    w0 = (jax.random.normal(ks[2], (c0, 128)) / math.sqrt(fan_in)).astype(dtype)
    ws = (jax.random.normal(ks[3], (k_blocks, 128, 128)) / math.sqrt(fan_in)).astype(dtype)
    b = (0.1 * jax.random.normal(ks[4], (128,))).astype(dtype)
    wr = (jax.random.normal(ks[5], (128, 128)) / math.sqrt(128)).astype(dtype)
    br = (0.1 * jax.random.normal(ks[6], (128,))).astype(dtype)
    return x0, xs, w0, ws, b, wr, br


@functools.lru_cache(maxsize=None)
def _make_readout(fold: bool, interpret: bool):
    """``readout_differentiable`` for one setting of the output-layer fold (JAX reuses what
    it traced of a ``custom_vmap``/``custom_vjp`` function for the same shapes, so each
    setting is a function of its own). With ``fold`` the functions take ``w_out`` last and
    return the logits ``[M]`` (``readout_logits_reference``)."""
    reference = readout_logits_reference if fold else readout_reference

    @jax.custom_batching.custom_vmap
    def primal(x0, xs, w0, ws, b, wr, br, *w_out):
        """The kernel where the rows fit its tiles (``supported``), else the reference. The
        check runs here, on the rows of the call as made: under ``vmap`` (below) on all the
        examples' rows together, which may fit where one example's do not (``N = 60``: 3600
        rows per graph, not a multiple of 64)."""
        if not supported(x0.shape[0], x0.shape[-1], [x.shape[-1] for x in xs], ws.shape[-1]):
            return reference(x0, xs, w0, ws, b, wr, br, *w_out)
        return readout(x0, xs, w0, ws, b, wr, br, interpret=interpret,
                       w_out=w_out[0] if fold else None)

    @primal.def_vmap
    def primal_vmap(axis_size, in_batched, x0, xs, w0, ws, b, wr, br, *w_out):
        """Under ``vmap`` (the per-graph completion sampler) the examples' rows are one
        kernel call: ``[V, M, C]`` -> ``[V * M, C]``, and ``[H, V * M]`` (or the logits
        ``[V * M]``) back to ``[V, H, M]`` (``[V, M]``). Batched weights (never the PPGN's)
        take the reference instead."""
        x0_b, xs_b, *w_b = in_batched
        args = (x0, xs, w0, ws, b, wr, br, *w_out)
        if any(jax.tree_util.tree_leaves(w_b)):
            axes = jax.tree_util.tree_map(lambda v: 0 if v else None, tuple(in_batched))
            return jax.vmap(reference, in_axes=axes)(*args), True
        full = lambda v, batched: v if batched else jnp.broadcast_to(v, (axis_size,) + v.shape)
        x0, xs = full(x0, x0_b), tuple(full(x, bx) for x, bx in zip(xs, xs_b))
        m_rows = x0.shape[1]
        rows = axis_size * m_rows
        merged = lambda v: v.reshape((rows,) + v.shape[2:])
        if not supported(rows, x0.shape[-1], [x.shape[-1] for x in xs], ws.shape[-1]):
            axes = (0, tuple(0 for _ in xs)) + (None,) * (5 + len(w_out))
            return jax.vmap(reference, in_axes=axes)(x0, xs, *args[2:]), True
        out = primal(merged(x0), tuple(merged(x) for x in xs), w0, ws, b, wr, br, *w_out)
        if fold:
            return out.reshape(axis_size, m_rows), True
        return jnp.swapaxes(out.reshape(out.shape[0], axis_size, m_rows), 0, 1), True

    @jax.custom_vjp
    def differentiable(x0, xs, w0, ws, b, wr, br, *w_out):
        return primal(x0, xs, w0, ws, b, wr, br, *w_out)

    def fwd(*args):
        return jax.vjp(reference, *args)

    def bwd(vjp, g):
        return vjp(g)

    differentiable.defvjp(fwd, bwd)
    return differentiable


def readout_differentiable(x0, xs, w0, ws, b, wr, br, w_out=None, interpret: bool = False):
    """``readout`` where nothing differentiates it; under differentiation the XLA
    reference runs (forward and gradient: the kernel has no backward). ``w_out`` (float32
    ``[H]``): the output layer folded in (``readout``'s ``w_out``); then the result is the
    logits ``[M]`` without the output bias."""
    if w_out is None:
        return _make_readout(False, interpret)(x0, xs, w0, ws, b, wr, br)
    return _make_readout(True, interpret)(x0, xs, w0, ws, b, wr, br, w_out)
