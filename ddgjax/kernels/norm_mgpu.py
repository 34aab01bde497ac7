"""A PPGN block's instance norm, applied, as a persistent Mosaic GPU (Hopper ``wgmma``) kernel
(``KernelSettings.norm_kernel``; off by default).

The mixing kernel (``mix_norm_mgpu``) writes its output channels first, ``y^T`` ``[H, M]``,
with each graph's sums; the norm then has to read ``y^T`` and write the block's output
rows first, ``[M, H]``, as the next block's kernels read it. XLA does that as a transpose
fusion through shared memory. Here each CTA streams its share of ``y^T`` tiles
``[H, 64]`` through a TMA pipeline and turns each one around with an MMA against the
identity, ``y_tile = I_64 y_tile`` (exact), then applies each row's graph's affine map and
the padding mask in registers and writes the rows:

    x[m, c] = mask[m] * (y[m, c] * a[g(m), 0, c] + a[g(m), 1, c])

with ``a`` from ``affine_from_sums`` (the norm's ``1/std`` and ``-mean/std``). A tile may
span two graphs, as in the mixing kernel: the row mask split in two
(``mix_norm_mgpu.split_row_mask``) says which rows take the first graph's map and which
the next one's.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from ddgjax.kernels import mix_norm_mgpu
from ddgjax.kernels.mgpu import (TILE_ROWS, interpret_params, load_vector, sm_count,
                                 smem_transforms, tile_plan, transposed_operand)

CTAS_PER_SM = 2        # a CTA idles at each tile's load and store; two share an SM


def affine_from_sums(sums, shift, counts, eps: float = 1e-5):
    """Each graph's norm as an affine map per channel: ``[G, 2, H]`` float32, ``(scale,
    offset)`` with ``norm(y) = y * scale + offset`` on the real entries.

    Args:
      sums: float32 ``[G, 2, H]``, the sums of ``d`` and ``d * d`` over each graph's real
        entries, ``d = y - shift`` (``mix_norm.mix_with_stats``);
      shift: ``[H]``; counts: ``[G]``, the real entries per graph (``n * n``).
    The statistics of ``common.instance_norm_from_sums``, the same ``eps``."""
    count = jnp.maximum(counts.astype(jnp.float32), 1.0)[:, None]             # [G, 1]
    mean_d = sums[:, 0] / count
    var = jnp.maximum(sums[:, 1] / count - mean_d * mean_d, 0.0)
    rstd = jax.lax.rsqrt(var + eps)
    offset = -(mean_d + shift.astype(jnp.float32)[None, :]) * rstd
    return jnp.stack([rstd, offset], axis=1)


def normalize_reference(y, affine, row_mask, nodes_sq: int):
    """The function the kernel computes, in XLA.

    Args: y ``[M, H]``; affine float32 ``[G, 2, H]`` (``affine_from_sums``); row_mask
      ``[M]`` (1 on real entries); ``M = G * nodes_sq``.
    Returns: ``[M, H]`` in ``y``'s dtype: ``y * scale + offset`` of each row's graph on real
      rows, 0 elsewhere."""
    m_rows, h = y.shape
    per_graph = y.astype(jnp.float32).reshape(-1, nodes_sq, h)
    out = per_graph * affine[:, 0, None, :] + affine[:, 1, None, :]
    return (out.reshape(m_rows, h) * row_mask.astype(jnp.float32)[:, None]).astype(y.dtype)


def supported(m: int, nodes_sq: int, h: int) -> bool:
    """The mixing kernel's conditions at 128 input channels (this kernel reads its
    ``y^T``): whole tiles no longer than a graph, 128 channels, enough tiles."""
    return mix_norm_mgpu.supported(m, nodes_sq, 128, h)


def normalize_rows(y_t, affine, split_mask, nodes_sq: int, *, max_concurrent_steps: int = 2,
                   max_ctas: int | None = None, interpret: bool = False):
    """The kernel.

    Args:
      y_t: ``[H, M]`` bfloat16, the mixing layer's output channels first;
      affine: float32 ``[G, 2, H]``; split_mask: float32 ``[2, M]``
        (``mix_norm_mgpu.split_row_mask`` of the row mask); ``M = G * nodes_sq``.
      max_ctas: at most this many CTAs (default ``CTAS_PER_SM`` per SM).
    Returns: ``normalize_reference(y_t.T, ...)``, ``[M, H]`` bfloat16. The result stages in
    two buffers, so a tile's store need not wait for the previous tile's.
    """
    h, m_rows = y_t.shape
    tm = TILE_ROWS
    graphs = affine.shape[0]
    if h != 128 or nodes_sq < tm:
        raise ValueError(f"norm_mgpu: takes 128 channels and graphs of at least {tm} rows "
                         f"(a tile spans at most two graphs), got {h} and {nodes_sq}")
    if graphs * nodes_sq != m_rows:
        raise ValueError(f"norm_mgpu: {graphs} graphs of {nodes_sq} rows are not the "
                         f"{m_rows} rows of y")
    dt = jnp.dtype(y_t.dtype)
    if dt != jnp.bfloat16:
        raise ValueError(f"norm_mgpu: y must be bfloat16, got {dt}")
    _, ctas, per_cta = tile_plan(m_rows, max_ctas or CTAS_PER_SM * sm_count(), "norm_mgpu")

    def norm_kernel(y_g, a0_g, a1_g, m0_g, m1_g, eye_g, x_g, eye_s, out_s, bars, *y_tr):
        plgpu.copy_gmem_to_smem(eye_g, eye_s, bars.at[0])
        plgpu.barrier_wait(bars.at[0])
        first_tile = lax.axis_index("cta") * per_cta
        shape = (tm, h)

        def column(ref):                           # [H] along the rows of a [TM, H] value
            v = load_vector(ref, plgpu.Layout.WGMMA.reduce(0), interpret)
            return lax.broadcast_in_dim(v, shape, [1])

        def row(ref):                              # [TM] along the columns
            v = load_vector(ref, plgpu.Layout.WGMMA.reduce(1), interpret)
            return lax.broadcast_in_dim(v, shape, [0])

        def step(index, y_s, a0_s, a1_s, m0_s, m1_s):
            (i,) = index
            tile = first_tile + i
            rows_view = transposed_operand(y_s, y_tr[0] if interpret else None, interpret)

            def turn(acc):
                plgpu.wgmma(acc, eye_s, rows_view)
                return acc[...]
            v = pl.run_scoped(turn, plgpu.ACC(shape, jnp.float32))   # y's rows [TM, H]
            out = (row(m0_s) * (v * column(a0_s.at[0, 0]) + column(a0_s.at[0, 1]))
                   + row(m1_s) * (v * column(a1_s.at[0, 0]) + column(a1_s.at[0, 1])))
            slot = out_s.at[i % 2]
            plgpu.wait_smem_to_gmem(1, wait_read_only=True)   # this slot's last store read
            slot[...] = out.astype(dt)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(slot, x_g.at[pl.ds(tile * tm, tm), :])

        first_graph = lambda i: ((first_tile + i) * tm) // nodes_sq
        plgpu.emit_pipeline(
            step, grid=(per_cta,),
            in_specs=[plgpu.BlockSpec((h, tm), lambda i: (0, first_tile + i),
                                      transforms=smem_transforms(tm, dt)),
                      plgpu.BlockSpec((1, 2, h), lambda i: (first_graph(i), 0, 0)),
                      plgpu.BlockSpec((1, 2, h), lambda i: (
                          jnp.minimum(first_graph(i) + 1, graphs - 1), 0, 0)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,)),
                      plgpu.BlockSpec((tm,), lambda i: (first_tile + i,))],
            max_concurrent_steps=max_concurrent_steps)(y_g, a0_g, a1_g, m0_g, m1_g)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((tm, tm), dt, transforms=smem_transforms(tm, dt)),      # I_64
               plgpu.SMEM((2, tm, h), dt, transforms=smem_transforms(h, dt)),     # staging
               plgpu.Barrier(num_barriers=1)]
    options = {}
    if interpret:
        options = interpret_params()
        scratch.append(plgpu.SMEM((tm, h), dt, transforms=smem_transforms(h, dt)))  # y rows
    kernel = plgpu.kernel(
        norm_kernel, out_type=jax.ShapeDtypeStruct((m_rows, h), dt),
        scratch_types=scratch, grid=(ctas,), grid_names=("cta",), **options)
    eye = jnp.eye(tm, dtype=dt)
    affine = affine.astype(jnp.float32)
    return kernel(y_t, affine, affine, split_mask[0], split_mask[1], eye)


@functools.lru_cache(maxsize=None)
def _make(nodes_sq: int, interpret: bool):
    """``normalize`` for one ``nodes_sq`` (JAX reuses what it traced of a ``custom_vmap`` or
    ``custom_vjp`` function for the same shapes, so each setting is a function of its own)."""
    @jax.custom_batching.custom_vmap
    def primal(y, affine, row_mask):
        m_rows, h = y.shape
        if not supported(m_rows, nodes_sq, h):
            return normalize_reference(y, affine, row_mask, nodes_sq)
        # y is the mixing kernel's y^T transposed: XLA cancels the two transposes
        return normalize_rows(y.T, affine, mix_norm_mgpu.split_row_mask(row_mask, nodes_sq),
                              nodes_sq, interpret=interpret)

    @primal.def_vmap
    def primal_vmap(axis_size, in_batched, y, affine, row_mask):
        """Under ``vmap`` (the per-graph samplers) the examples' rows are one call:
        ``[V, M, H]`` -> ``[V * M, H]``, their graphs ``[V * G, 2, H]``."""
        full = lambda v, batched: v if batched else jnp.broadcast_to(v, (axis_size,) + v.shape)
        y, affine, row_mask = (full(v, b) for v, b in zip((y, affine, row_mask), in_batched))
        m_rows, h = y.shape[1:]
        out = primal(y.reshape(axis_size * m_rows, h),
                     affine.reshape((-1,) + affine.shape[2:]), row_mask.reshape(-1))
        return out.reshape(axis_size, m_rows, h), True

    @jax.custom_vjp
    def differentiable(y, affine, row_mask):
        return primal(y, affine, row_mask)

    def fwd(y, affine, row_mask):
        return jax.vjp(functools.partial(normalize_reference, nodes_sq=nodes_sq),
                       y, affine, row_mask)

    def bwd(vjp, g):
        return vjp(g)

    differentiable.defvjp(fwd, bwd)
    return differentiable


def normalize(y, affine, row_mask, nodes_sq: int, interpret: bool = False):
    """``normalize_reference`` (same arguments and result) through the kernel where the rows
    fit its tiles (under ``vmap``: all the examples' rows together); under differentiation
    the reference runs (forward and gradient)."""
    return _make(nodes_sq, interpret)(y, affine, row_mask)
