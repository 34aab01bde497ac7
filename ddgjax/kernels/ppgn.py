"""The entry points the PPGN calls under ``kernels="pallas"``: a block and the readout
through the Pallas kernels, with the XLA path's parameters and function.

Parameters arrive as the PPGN created them (``(kernel, bias)`` pairs, float32); inputs are
bfloat16. The PPGN asks ``takes_block``/``takes_readout`` first and takes its XLA path
where the kernels do not take the shapes.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ddgjax.kernels import mix_norm, norm_mgpu, pair_mlp, readout_mgpu
from ddgjax.kernels.common import instance_norm_from_sums
from ddgjax.kernels.settings import KernelSettings, available, interpreted, kernel_backend

FOLDED_INPUT_WIDTH = readout_mgpu.INPUT_WIDTH     # input channels, zero-padded, when folded


def takes_block(rows: int, nodes_sq: int, c: int, h: int, settings: KernelSettings) -> bool:
    """Whether both of a block's kernels (pair MLPs, mixing layer) take ``rows`` entries of
    ``c`` channels, ``nodes_sq`` per graph, ``h`` features."""
    return (pair_mlp.supported(rows, c, h, settings)
            and mix_norm.supported(rows, nodes_sq, c, h, settings))


def folds_embedding(input_shape, h: int, settings: KernelSettings) -> bool:
    """Whether the PPGN's input embedding folds into its first block (``fold_input``): with
    ``settings.fold_embed``, at most 16 input channels, and shapes both block kernels take
    with 16 input channels. ``input_shape`` is the raw input's ``[B, N, N, C0]``."""
    bsz, n, _, c0 = input_shape
    return (settings.fold_embed and c0 <= FOLDED_INPUT_WIDTH
            and takes_block(bsz * n * n, n * n, FOLDED_INPUT_WIDTH, h, settings))


def fold_input(x0, embed):
    """The raw input and the embedding ``(w_e [C0, h], b_e [h])`` for a first block that
    folds the embedding into its first layers (every use of the embedded input there is
    linear), so that its kernels read 16 channels instead of ``h``: ``x0`` zero-padded to
    ``[B, N, N, 16]`` and ``w_e`` to ``[16, h]``."""
    w_e, b_e = embed
    pad = FOLDED_INPUT_WIDTH - x0.shape[-1]
    return jnp.pad(x0, ((0, 0),) * 3 + ((0, pad),)), (jnp.pad(w_e, ((0, pad), (0, 0))), b_e)


def fold_linear(embed, kernel: jax.Array, bias: jax.Array):
    """A dense layer applied to an embedding's output, as one layer of the embedding's input:
    ``(x0 @ w_e + b_e) @ kernel + bias = x0 @ (w_e @ kernel) + (b_e @ kernel + bias)``.

    Args: embed ``(w_e [C0, C], b_e [C])``; kernel ``[C, F]``; bias ``[F]`` (float32).
    Returns: ``(w_e @ kernel [C0, F], b_e @ kernel + bias [F])`` in float32.
    """
    w_e, b_e = (jnp.asarray(v, jnp.float32) for v in embed)
    hi = jax.lax.Precision.HIGHEST
    return jnp.dot(w_e, kernel, precision=hi), jnp.dot(b_e, kernel, precision=hi) + bias


def block(m1, m2, mix, x, scale, mask_sq, eps: float, settings: KernelSettings, embed=None):
    """One PPGN block through the kernels: the pair MLPs (``pair_mlp``), the per-channel
    product (XLA's batched GEMM), the mixing layer with the norm's statistics
    (``mix_norm``) and the norm (XLA, or ``norm_mgpu`` with ``settings.norm_kernel``).

    Args:
      m1, m2: ``((k0 [C, h], b0 [h]), (k1 [h, h], b1 [h]))`` each; mix: ``(k [C + h, h],
        b [h])``, ``C`` the parameters' input width (``h`` where ``embed`` folds).
      x: bfloat16 ``[B, N, N, Cx]``; scale: ``[B, N, N]``, the mask times ``1/sqrt(n)``;
      mask_sq: ``bool[B, N, N]``; embed: None, or ``fold_input``'s padded embedding, with
        ``x`` its padded raw input.
    Returns: bfloat16 ``[B, N, N, h]``, the instance-normed block output (0 off the mask).
    """
    cdt = x.dtype
    (k10, b10), (k11, b11) = m1
    (k20, b20), (k21, b21) = m2
    kmix, bmix = mix
    h = k11.shape[0]
    c_in = kmix.shape[0] - h
    kx, kp = kmix[:c_in], kmix[c_in:]
    if embed is not None:
        (k10, b10), (k20, b20), (kx, bmix) = (fold_linear(embed, k, b) for k, b in (
            (k10, b10), (k20, b20), (kx, bmix)))
    # the norm cancels the mixing bias: an exact zero gradient, as on the XLA path
    bmix = jax.lax.stop_gradient(bmix).astype(cdt)
    bsz, n = x.shape[:2]
    rows, nodes_sq = bsz * n * n, n * n
    stack = lambda a, b: jnp.stack([a, b]).astype(cdt)
    x_rows = x.reshape(rows, x.shape[-1])
    m_a, m_b = pair_mlp.pair_mlps(x_rows, stack(k10, k20), stack(b10, b20), stack(k11, k21),
                                  stack(b11, b21), scale.reshape(rows), settings)
    prod = jnp.einsum("cbik,cbkj->cbij", m_a.reshape(h, bsz, n, n), m_b.reshape(h, bsz, n, n))
    row_mask = mask_sq.reshape(rows).astype(cdt)
    y, sums = mix_norm.mix_with_stats(x_rows, prod.astype(cdt).reshape(h, rows), kx.astype(cdt),
                                      kp.astype(cdt), bmix, row_mask, nodes_sq, settings)
    if settings.norm_kernel and kernel_backend(settings) == "mosaic":
        affine = norm_mgpu.affine_from_sums(sums, bmix, mask_sq.sum((1, 2)), eps)
        out = norm_mgpu.normalize(y, affine, row_mask, nodes_sq, interpret=interpreted())
        return out.reshape(bsz, n, n, h)
    return instance_norm_from_sums(y.reshape(bsz, n, n, h), sums, bmix, mask_sq, eps, cdt)


def takes_readout(c0: int, widths, h: int, settings: KernelSettings) -> bool:
    """Whether the readout runs as ``readout_mgpu``'s kernel: under the ``mosaic`` backend
    with ``settings.mosaic_readout``, for the channel widths it takes (rows that do not fit
    its tiles take its XLA reference inside ``readout``)."""
    return (available(settings) and kernel_backend(settings) == "mosaic"
            and settings.mosaic_readout and readout_mgpu.supported_widths(c0, widths, h))


def readout(read, residual, out, outs, settings: KernelSettings) -> jax.Array:
    """The PPGN's readout, residual and output layers through ``readout_mgpu``'s kernel.

    Args: read ``(k [C0 + d h, h], b)``, residual ``(k [h, h], b)``, out ``(k [h, 1], b)``;
      outs: ``[x0 [B, N, N, C0], x_1 .. x_d [B, N, N, h]]`` (bfloat16).
    Returns: float32 ``[B, N, N]`` logits (before symmetrising).
    """
    (k_read, b_read), (k_res, b_res), (k_out, b_out) = read, residual, out
    cdt = outs[1].dtype
    grid = outs[0].shape[:3]
    rows = grid[0] * grid[1] * grid[2]
    c0, h = outs[0].shape[-1], k_res.shape[0]
    args = (outs[0].reshape(rows, c0).astype(cdt), tuple(o.reshape(rows, h) for o in outs[1:]),
            k_read[:c0], k_read[c0:].reshape(len(outs) - 1, h, h), b_read, k_res, b_res)
    interpret = interpreted()
    if settings.readout_fold:                       # the output layer inside the kernel
        logits = readout_mgpu.readout_differentiable(*args, w_out=k_out[:, 0],
                                                     interpret=interpret) + b_out[0]
    else:
        out_t = readout_mgpu.readout_differentiable(*args, interpret=interpret)
        logits = jnp.einsum("hm,h->m", out_t.astype(jnp.float32), k_out[:, 0]) + b_out[0]
    return logits.reshape(grid)
