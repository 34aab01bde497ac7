"""PPGN denoiser (Maron et al. 2019, "Provably Powerful Graph Networks").

The network works on per-pair features and, as in the paper (docs/method.md,
"Denoisers"), is:

    X_0   = mask([A_t, s_t * I])        # C = 2; s_t the noise level (beta_bar_t for bit flips)
                                        # (+1 log-level channel, + K random-walk channels,
                                        #  + K' Laplacian-projector channels)
    Y     = mask(Dense_h(X_0))
    block k = 1..d:
        P = mask(m1(Y)) @ mask(m2(Y)) / sqrt(n)    # per channel, over the node axis
        Y = mask(InstanceNorm(Dense_h(concat[Y, P])))                  # Y = X_k
    Z     = Dense_h(concat[X_0, X_1, ..., X_d])                        # C + d*h -> h
    Z     = Z + leaky_relu(Dense_h(Z))
    L     = Dense_1(Z);  logits = mask_offdiag((L + L^T) / 2)

``m1``, ``m2`` are per-entry MLPs Dense -> leaky_relu(0.01) -> Dense; ``n`` is
the graph's real node count; ``mask`` zeroes every entry whose row or column is
a padding node; the instance norm (no affine) takes mean and variance per graph
and channel over the real ``n x n`` entries only (diagonal included), so the
real entries of the output do not depend on how much padding a graph has.
The code applies ``mask`` only where it changes real entries (``X_0``, ``m1``,
the norm output); padding entries elsewhere may hold junk that never reaches a
real entry, and the logits are masked at the end.

Layout and speed: pair features are channels last, ``[B, N, N, C]``, except
the outputs of ``m1``/``m2`` and their product, which are channels first,
``[C, B, N, N]``: then the channel-wise product is the einsum
``'cbik,cbkj->cbij'``, one batched GEMM over the leading axes, and the Dense
layers read and write either layout without transposes (a GEMM can emit its
result transposed at no cost). ``Linear`` also replaces every Dense applied to a
concatenation by a sum of partial products, so the ``C + d*h`` readout input is
never materialised. Measured on one H200 (JAX 0.11.2, 8 blocks x 128 channels,
N = 60, B = 512): the all-channels-last einsum ``'bikc,bkjc->bijc'`` (which XLA
also maps to one cuBLAS batched GEMM, with 33 transposes around the GEMMs) plus a
Dense on the concatenations ran forward/grad in 83/219 ms (float32) and
49/133 ms (bfloat16); this layout runs 63/183 ms and 37/115 ms (the earlier
numbers are from another H200 of the same kind).

Precision: with ``compute_dtype=bfloat16`` the Dense layers (inputs and kernels
cast, GEMMs accumulate in float32 on GPU, partial sums of a split Dense add in
bfloat16) and the channel product run in bfloat16; parameters are float32; the
instance-norm statistics, the last Dense(h -> 1) and the logits are float32.
"""
from __future__ import annotations

import warnings
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.models import (mix_norm_kernel, norm_mgpu, pair_mlp_kernel, pair_mlp_mgpu,
                           pallas_launch, readout_mgpu)
from ddgjax.models.common import (NORMS, block_norm, channel_matmul, check_inputs,
                                  instance_norm_from_sums, masked_instance_norm_one_pass,
                                  node_counts, square_mask, symmetrize_and_mask)
from ddgjax.models.input_channels import (graph_conditions, laplacian_projector_channels,
                                          noise_channels, random_walk_channels)


FOLDED_INPUT_WIDTH = 16     # input channels, zero-padded, when the embedding is folded


def both_kernels_take(rows: int, nodes_sq: int, c_in: int, hidden: int) -> bool:
    """Whether the pair-MLP and the mixing kernels both take ``rows`` entries of ``c_in``
    channels (``nodes_sq`` per graph): what folding the embedding into a block needs."""
    return (pair_mlp_kernel.supported(rows, c_in, hidden)
            and mix_norm_kernel.supported(rows, nodes_sq, c_in, hidden))


def leaky_relu(x):
    return nn.leaky_relu(x, negative_slope=0.01)


class Linear(nn.Module):
    """Dense layer over the channel axis of one or several inputs.

    ``Linear(f)(x_1, ..., x_k)`` equals ``nn.Dense(f)(concat([x_1, ..., x_k], -1))`` (one
    kernel ``[sum c_i, f]``, lecun-normal init over the full fan-in, zero bias), but never
    materialises the concatenation: it sums the k partial products. ``specs`` gives each
    input's einsum layout (channel letter ``c``) and ``out`` the output's (letter ``d``).
    """

    features: int
    compute_dtype: Any = jnp.float32
    specs: tuple = ("bijc",)
    out: str = "bijd"
    # False: the bias gets an exact zero gradient (for a layer whose output an instance
    # norm centres, where the bias cannot change anything downstream)
    bias_gradient: bool = True
    # (start, stop): the kernel rows start:stop (stop None: to the end) are used rounded to
    # float8 (``round_weights_to_fp8_trainable``: straight-through gradient); None: none
    fp8_rows: tuple | None = None

    @nn.compact
    def __call__(self, *xs):
        specs = tuple(self.specs) * len(xs) if len(self.specs) == 1 else tuple(self.specs)
        if len(specs) != len(xs):
            raise ValueError(f"Linear {self.name}: {len(xs)} inputs but specs={self.specs}")
        widths = [x.shape[s.index("c")] for x, s in zip(xs, specs)]
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (sum(widths), self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        if self.fp8_rows is not None:
            kernel = fp8_rows_rounded(kernel, *self.fp8_rows)
        kernel = kernel.astype(self.compute_dtype)
        y, row = None, 0
        for x, s, w in zip(xs, specs, widths):
            part = jnp.einsum(f"{s},cd->{self.out}", x.astype(self.compute_dtype),
                              kernel[row:row + w])
            y = part if y is None else y + part
            row += w
        shape = [1] * y.ndim
        shape[self.out.index("d")] = self.features
        if not self.bias_gradient:
            bias = jax.lax.stop_gradient(bias)
        return y + bias.astype(self.compute_dtype).reshape(shape)


def fp8_rows_rounded(kernel: jax.Array, start: int, stop: int | None) -> jax.Array:
    """``kernel`` ``[K, F]`` with rows ``start:stop`` rounded to float8 as a whole
    (``round_weights_to_fp8_trainable``: per-column power-of-two scales over those rows,
    straight-through gradient), the other rows as they are."""
    part = pair_mlp_mgpu.round_weights_to_fp8_trainable(kernel[start:stop])
    stop = kernel.shape[0] if stop is None else stop
    return jnp.concatenate([kernel[:start], part, kernel[stop:]]).astype(kernel.dtype)


def fp8_trained(kernel: jax.Array, on: bool) -> jax.Array:
    """``kernel`` rounded to float8 (straight-through gradient) where ``on``, else as it is."""
    return pair_mlp_mgpu.round_weights_to_fp8_trainable(kernel) if on else kernel


class PairMLP(nn.Module):
    """Per-entry MLP: Dense -> leaky_relu(0.01) -> Dense (both ``features`` wide).
    ``fp8_first``: the first layer's kernel is used rounded to float8 (``PPGN.fp8_weights``)."""

    features: int
    compute_dtype: Any = jnp.float32
    out: str = "bijd"
    fp8_first: bool = False

    @nn.compact
    def __call__(self, x):
        x = Linear(self.features, self.compute_dtype, name="dense_0",
                   fp8_rows=(0, None) if self.fp8_first else None)(x)
        x = leaky_relu(x)
        return Linear(self.features, self.compute_dtype, out=self.out, name="dense_1")(x)


class DenseParams(nn.Module):
    """The ``kernel [in_width, features]`` and ``bias [features]`` of a ``Linear``,
    created exactly as ``Linear`` creates them (same names, shapes and init), returned
    unapplied so that a caller can merge several layers into one GEMM."""

    features: int

    @nn.compact
    def __call__(self, in_width: int):
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (in_width, self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        return kernel, bias


class PairMLPParams(nn.Module):
    """The parameters of a ``PairMLP`` (``dense_0``, ``dense_1``), unapplied."""

    features: int

    @nn.compact
    def __call__(self, in_width: int):
        return (DenseParams(self.features, name="dense_0")(in_width),
                DenseParams(self.features, name="dense_1")(self.features))


FP8_A_SCALE = pair_mlp_kernel.FP8_A_SCALE

FP8_UNTRAINED_WARNING = (
    "DDGJAX_FP8_ACTIVATIONS=weights/weights_y rounds this PPGN's weights to float8, but it "
    "was not trained so (config.model.ppgn.fp8_weights=false): on Planar-60 and SPECTRE SBM "
    "checkpoints that rounding cost up to 14 % in average MMD and 5 points of V.U.N. "
    "(docs/benchmarks.md, rounds 66-67); a model trained with "
    "--config.model.ppgn.fp8_weights=true samples under these settings as it was trained "
    "(rounds 69-71)")


def channel_matmul_fp8(a: jax.Array, b: jax.Array) -> jax.Array:
    """``channel_matmul`` with both operands rounded to float8 e4m3 (``a`` times
    ``FP8_A_SCALE`` before the cast, undone after), accumulated in float32 and returned
    in bfloat16. ``[C, B, N, N]`` x2 -> ``[C, B, N, N]``. The ``triton`` backend's float8
    setting (``pallas_launch.fp8_product``: the casts are passes of their own; the
    ``mosaic`` backend's pair kernel writes float8 itself, ``pair_product_fp8``)."""
    f8 = pair_mlp_kernel.FP8
    return pair_mlp_kernel.product_from_fp8(
        (a.astype(jnp.float32) * FP8_A_SCALE).astype(f8), b.astype(f8))


class PPGNBlock(nn.Module):
    """One PPGN block on ``[B, N, N, h]`` features; returns masked features in compute dtype."""

    hidden: int
    compute_dtype: Any = jnp.float32
    eps: float = 1e-5
    norm: str = "instance"
    # the weights that multiply x (the pair MLPs' first layers, the mixing layer's x rows)
    # used rounded to float8 (PPGN.fp8_weights)
    fp8_weights: bool = False

    @nn.compact
    def __call__(self, x, mask_sq, inv_sqrt_n, film=None):
        # mask_sq: bool [B, N, N]; inv_sqrt_n: float32 [B]; film: None or float32 [B, 2h].
        cdt = self.compute_dtype
        # m1, m2 leave their last Dense channels-first ("dbij"), so the per-channel
        # product is a plain batched GEMM over the leading (c, b) axes and XLA needs no
        # transposes; the mix layer reads prod in that layout directly.
        w8 = self.fp8_weights
        m1 = PairMLP(self.hidden, cdt, out="dbij", name="m1", fp8_first=w8)(x) * mask_sq[
            None].astype(cdt)
        m2 = PairMLP(self.hidden, cdt, out="dbij", name="m2", fp8_first=w8)(x)
        prod = channel_matmul(m1, m2) * inv_sqrt_n.astype(cdt)[None, :, None, None]
        # Padding rows/columns of m2 and prod need no mask: m1 is zero on every padding
        # entry (so the sum over k sees real k only) and the norm below masks the rest.
        # The instance norm subtracts each graph's mean, so the mixing bias does not change
        # the block's output: its gradient is exactly zero, and autodiff's sum of dy over
        # every entry would be rounding noise that Adam scales up to full-size steps.
        y = Linear(self.hidden, cdt, specs=("bijc", "cbij"), name="mix",
                   bias_gradient=self.norm != "instance",
                   fp8_rows=(0, x.shape[-1]) if w8 else None)(x, prod)
        return film_modulate(block_norm(y, mask_sq, self.norm, self.eps, jnp.float32), film,
                             mask_sq, cdt)


class PPGNBlockFused(nn.Module):
    """``PPGNBlock`` with fewer passes over the ``[B, N, N, h]`` features; the same
    parameters (names, shapes, init) and the same function up to rounding.

    * The first layers of ``m1`` and ``m2`` are one GEMM ``h -> 2h`` (``x`` is read
      once), their second layers one GEMM with the block-diagonal ``2h x 2h`` kernel
      that writes ``[m1; m2]`` channels first (slicing the leading axis is free). Half
      of its products are with zeros; one GEMM batched over the two MLPs instead ran the
      bf16 train step 1.7 % slower and sampling 0.4 % faster on an H200 (round 23,
      docs/benchmarks.md), so the block-diagonal GEMM stays.
    * The padding mask and the ``1/sqrt(n)`` scale of the product are one multiply
      of ``m1`` (the product is linear in ``m1``).
    * The instance norm takes mean and variance in one pass
      (``masked_instance_norm_one_pass``).

    Profile that motivated it (one H200, JAX 0.11.2, bf16, B = 1024, N = 60, 8 x 128,
    ``benchmarks/profile_ppgn.py``): of 72 ms per forward pass, 33 ms were GEMMs and
    about 35 ms elementwise passes and reductions that XLA did not fuse into them
    (leaky ReLU, masks, scales, the two-pass norm), each about one read and one write
    of a ``[B, N, N, h]`` tensor.
    """

    hidden: int
    compute_dtype: Any = jnp.float32
    eps: float = 1e-5
    pallas: bool = False
    norm: str = "instance"
    fp8_weights: bool = False     # as PPGNBlock's

    @nn.compact
    def __call__(self, x, mask_sq, inv_sqrt_n, film=None, embed=None):
        """``embed``: None, or ``(w_e [C0, h], b_e [h])``, the PPGN's input embedding, with
        ``x`` the raw input channels ``[B, N, N, C0]`` (``C0`` 16, zero-padded) instead of
        the embedded ``x0 @ w_e + b_e``: the block then folds the embedding into the first
        layers of its pair MLPs and the ``x`` part of its mixing layer (every use of ``x``
        there is linear), so its kernels read ``C0`` channels instead of ``h``. The same
        parameters and, up to rounding, the same function. Only where both kernels take
        ``C0`` input channels (``PPGN`` checks); not under ``remat``."""
        cdt, h = self.compute_dtype, self.hidden
        # with FiLM the norm hands float32 to film_modulate (XLA fuses the two passes)
        ndt = cdt if film is None else jnp.float32
        c_in = h if embed is not None else x.shape[-1]                 # the parameters' width
        (k10, b10), (k11, b11) = PairMLPParams(h, name="m1")(c_in)
        (k20, b20), (k21, b21) = PairMLPParams(h, name="m2")(c_in)
        # the mask and the 1/sqrt(n) scale in one pass over m1 (the product is linear in m1)
        scale = jnp.where(mask_sq, inv_sqrt_n[:, None, None], 0.0).astype(cdt)  # [B, N, N]
        rows = x.shape[0] * x.shape[1] * x.shape[2]
        nodes_sq = x.shape[1] * x.shape[2]
        if self.fp8_weights and embed is not None:   # (PPGN folds into block_0 only)
            raise ValueError(f"PPGNBlockFused {self.name}: fp8_weights rounds weights that "
                             "multiply a block output, not a folded embedding")
        k10, k20 = (fp8_trained(k, self.fp8_weights) for k in (k10, k20))
        if embed is not None:
            if not (self.pallas and self.norm == "instance"
                    and both_kernels_take(rows, nodes_sq, x.shape[-1], h)):
                raise ValueError(f"PPGNBlockFused {self.name}: embed needs the Pallas kernels "
                                 f"for {x.shape[-1]} input channels")
            (k10, b10), (k20, b20) = (fold_linear(embed, k, b) for k, b in ((k10, b10),
                                                                             (k20, b20)))
        # the kernels compute the instance norm's statistics: another norm stays on XLA
        if self.pallas and self.norm == "instance" and pair_mlp_kernel.supported(
                rows, x.shape[-1], h):
            c_x = x.shape[-1]
            # float8 activations: x may arrive in float8 (the previous block's output), the
            # product and this block's output leave in it (pallas_launch.fp8_activations)
            mosaic_bf16 = cdt == jnp.bfloat16 and pallas_launch.kernel_backend() == "mosaic"
            fp8_mode = pallas_launch.fp8_activations() if mosaic_bf16 else "0"
            fp8_act = fp8_mode in ("1", "weights", "weights_y")   # block outputs too
            # float8 weights on a float8 x: the kernels' float8 x float8 products, from
            # weights rounded here as the kernels store them (every path the same function)
            w8 = fp8_mode in ("weights", "weights_y") and pair_mlp_mgpu.is_fp8(x.dtype)
            y8 = fp8_mode == "weights_y"          # the mixing layer's output in float8 too
            if w8:
                k10, k20 = (pair_mlp_mgpu.round_weights_to_fp8(k) for k in (k10, k20))
            x_in = x if pair_mlp_mgpu.is_fp8(x.dtype) else x.astype(cdt)
            stack = lambda a, b: jnp.stack([a, b]).astype(cdt)
            pair_args = (x_in.reshape(rows, c_x), stack(k10, k20), stack(b10, b20),
                         stack(k11, k21), stack(b11, b21), scale.reshape(rows))
            if mosaic_bf16 and (pallas_launch.fp8_product() or fp8_mode != "0"):
                prod = pair_mlp_kernel.pair_product_fp8(*pair_args, x.shape[:3],
                                                        fp8_out=fp8_mode != "0",
                                                        fp8_weights=w8)
            else:
                m = pair_mlp_kernel.pair_mlps(*pair_args)
                m1, m2 = (v.reshape((h,) + x.shape[:3]) for v in m)    # [h, B, N, N] each
                prod = (channel_matmul_fp8(m1, m2) if pallas_launch.fp8_product()
                        else channel_matmul(m1, m2)).astype(cdt)
            probe = pallas_launch.fp8_activations_probe() and fp8_mode == "0"

            def block_output(out):
                if fp8_act:
                    return pair_mlp_mgpu.to_fp8_saturated(out)
                return pair_mlp_mgpu.round_to_fp8(out) if probe else out
            if probe:
                prod = pair_mlp_mgpu.round_to_fp8(prod)
            if not mix_norm_kernel.supported(rows, nodes_sq, c_x, h):   # (never folded)
                y = Linear(h, cdt, specs=("bijc", "cbij"), name="mix", bias_gradient=False,
                           fp8_rows=(0, c_in) if self.fp8_weights else None)(
                    pair_mlp_mgpu.exact_bf16(x_in), pair_mlp_mgpu.exact_bf16(prod))
                return block_output(film_modulate(
                    masked_instance_norm_one_pass(y, mask_sq, self.eps, ndt), film, mask_sq,
                    cdt))
            kmix, bmix = DenseParams(h, name="mix")(c_in + h)          # Linear's parameters
            kx, kp = fp8_trained(kmix[:c_in], self.fp8_weights), kmix[c_in:]
            if embed is not None:
                kx, bmix = fold_linear(embed, kx, bmix)
            if w8:
                kx = pair_mlp_mgpu.round_weights_to_fp8(kx)
            # the norm cancels the (folded) bias: an exact zero gradient, as in PPGNBlock
            bmix = jax.lax.stop_gradient(bmix)
            kx, kp, bmix = kx.astype(cdt), kp.astype(cdt), bmix.astype(cdt)
            y, sums = mix_norm_kernel.mix_with_stats(
                x_in.reshape(rows, c_x), prod.reshape(h, rows), kx, kp, bmix,
                mask_sq.reshape(rows).astype(cdt), nodes_sq, fp8_weights=w8, fp8_out=y8)
            # (with y8 the kernel hands over y - bmix: the norm's shift is then 0)
            shift = jnp.zeros_like(bmix) if y8 else bmix
            norm_kernel = pallas_launch.norm_kernel()
            if mosaic_bf16 and not probe and (fp8_act if norm_kernel is None else norm_kernel):
                # the norm (FiLM folded in) as a kernel that writes the rows from y^T
                affine = norm_mgpu.affine_from_sums(sums, shift, mask_sq.sum((1, 2)),
                                                    self.eps, film)
                out = norm_mgpu.normalize(y, affine, mask_sq.reshape(rows).astype(cdt),
                                          nodes_sq, pair_mlp_mgpu.FP8 if fp8_act else cdt)
                return out.reshape(x.shape[:3] + (h,))
            return block_output(film_modulate(
                instance_norm_from_sums(y.reshape(x.shape[:3] + (h,)), sums, shift, mask_sq,
                                        self.eps, ndt), film, mask_sq, cdt))
        x = pair_mlp_mgpu.exact_bf16(x)             # float8 activations, off the kernels
        k0 = jnp.concatenate([k10, k20], axis=1).astype(cdt)            # [c_in, 2h]
        b0 = jnp.concatenate([b10, b20]).astype(cdt)
        zeros = jnp.zeros((h, h), jnp.float32)
        k1 = jnp.block([[k11, zeros], [zeros, k21]]).astype(cdt)        # [2h, 2h]
        b1 = jnp.concatenate([b11, b21]).astype(cdt)
        hid = leaky_relu(jnp.einsum("bijc,cd->bijd", x.astype(cdt), k0) + b0)
        m = jnp.einsum("bijc,cd->dbij", hid, k1) + b1[:, None, None, None]  # [2h, B, N, N]
        prod = channel_matmul(m[:h] * scale[None], m[h:])
        y = Linear(h, cdt, specs=("bijc", "cbij"), name="mix",
                   bias_gradient=self.norm != "instance",
                   fp8_rows=(0, c_in) if self.fp8_weights else None)(x, prod)
        return film_modulate(block_norm(y, mask_sq, self.norm, self.eps, ndt, one_pass=True),
                             film, mask_sq, cdt)


def fp8_rounded_params(variables, hidden: int, num_blocks: int):
    """A PPGN's variables (``{"params": ...}``) with the weights that ``PPGN.fp8_weights``
    rounds rounded (``round_weights_to_fp8``): blocks ``1..d-1``'s pair-MLP first layers
    and mixing ``x`` rows, the readout's block rows; the rest as they are (numpy arrays).
    A model without ``fp8_weights`` applied to them computes what one with it computes
    from ``variables`` (for diagnosing what the rounding changes; tests)."""
    r8 = lambda w: np.asarray(pair_mlp_mgpu.round_weights_to_fp8(w))
    out = jax.tree_util.tree_map(lambda a: np.array(a), jax.device_get(variables))
    p = out["params"]
    for k in range(1, num_blocks):
        block = p[f"block_{k}"]
        for m in ("m1", "m2"):
            block[m]["dense_0"]["kernel"] = r8(block[m]["dense_0"]["kernel"])
        kx = block["mix"]["kernel"]
        block["mix"]["kernel"] = np.concatenate([r8(kx[:hidden]), kx[hidden:]])
    kr = p["readout"]["kernel"]
    c0 = kr.shape[0] - num_blocks * hidden
    p["readout"]["kernel"] = np.concatenate([kr[:c0], r8(kr[c0:])])
    return out


def fold_linear(embed, kernel: jax.Array, bias: jax.Array):
    """A Dense layer applied to an embedding's output, as one layer of the embedding's input:
    ``(x0 @ w_e + b_e) @ kernel + bias = x0 @ (w_e @ kernel) + (b_e @ kernel + bias)``.

    Args: embed ``(w_e [C0, C], b_e [C])``; kernel ``[C, F]``; bias ``[F]`` (float32).
    Returns: ``(w_e @ kernel [C0, F], b_e @ kernel + bias [F])`` in float32.
    """
    w_e, b_e = (jnp.asarray(v, jnp.float32) for v in embed)
    hi = jax.lax.Precision.HIGHEST
    return (jnp.dot(w_e, kernel, precision=hi),
            jnp.dot(b_e, kernel, precision=hi) + bias)


def film_modulate(y: jax.Array, film, mask_sq: jax.Array, out_dtype) -> jax.Array:
    """A block's norm output, scaled and shifted per graph and channel (FiLM).

    Args:
      y: ``[B, N, N, h]`` instance-normed features (0 off the real block).
      film: None (no modulation: ``y`` in ``out_dtype``) or float32 ``[B, 2h]``, the
        ``(gamma, beta)`` halves: ``y * (1 + gamma) + beta`` on the real entries.
      mask_sq: ``bool[B, N, N]``.
    Returns: ``[B, N, N, h]`` in ``out_dtype``, 0 off the real block.
    """
    if film is None:
        return y.astype(out_dtype)
    h = y.shape[-1]
    gamma, beta = film[:, None, None, :h], film[:, None, None, h:]
    out = y.astype(jnp.float32) * (1.0 + gamma) + beta
    return jnp.where(mask_sq[..., None], out, 0.0).astype(out_dtype)


def estimate_channel(x0_estimate, adj, node_mask):
    """The self-conditioning input channel: ``x0_estimate`` ``[B, N, N]`` (None: zeros) as
    float32 ``[B, N, N, 1]``, zero on the diagonal and on pairs touching padding, with
    no gradient (an input). ValueError if its shape is not ``adj``'s."""
    if x0_estimate is None:
        return jnp.zeros(adj.shape + (1,), jnp.float32)
    x0_estimate = jnp.asarray(x0_estimate)
    if x0_estimate.shape != adj.shape:
        raise ValueError(f"x0_estimate must be [B, N, N] = {adj.shape}, got shape "
                         f"{x0_estimate.shape}")
    off_diag = 1.0 - jnp.eye(adj.shape[-1], dtype=jnp.float32)[None]
    est = x0_estimate.astype(jnp.float32) * square_mask(node_mask) * off_diag
    return jax.lax.stop_gradient(est)[..., None]


def padded_nodes(num_nodes: int, multiple) -> int:
    """``num_nodes`` rounded up to a multiple of ``multiple`` (``config.model.ppgn.pad_multiple``,
    an integer >= 1; ValueError naming that field otherwise)."""
    if isinstance(multiple, bool) or not isinstance(multiple, (int, np.integer)) or multiple < 1:
        raise ValueError(f"config.model.ppgn.pad_multiple: expected an integer >= 1, got "
                         f"{multiple!r}")
    return -(-int(num_nodes) // int(multiple)) * int(multiple)


def pad_nodes(adj, node_mask, x0_estimate, num_nodes: int):
    """Append padding nodes up to ``num_nodes``: ``adj [B, N, N]`` and ``x0_estimate``
    (or None) with zeros, ``node_mask [B, N]`` with False (the real nodes stay a prefix)."""
    extra = num_nodes - adj.shape[1]
    if extra == 0:
        return adj, node_mask, x0_estimate
    pad_sq = lambda a: jnp.pad(a, ((0, 0), (0, extra), (0, extra)))
    return (pad_sq(adj), jnp.pad(node_mask, ((0, 0), (0, extra))),
            None if x0_estimate is None else pad_sq(x0_estimate))


class PPGN(nn.Module):
    """PPGN denoiser: ``(adj, node_mask, t_index, noise_level) -> logits``.

    Attributes:
      hidden: channel width ``h`` (paper configs: 32 for the small sets, 128 for Planar-60).
      num_blocks: number of blocks ``d`` (6; 8 for Planar-60).
      compute_dtype: dtype of the Dense layers and the channel product; parameters,
        norm statistics and logits stay float32.
      noise_features: how ``noise_level`` enters (``noise_channels``): ``"linear"`` (the
        raw level, the paper's) or ``"log"`` (also a log-scale channel, which tells
        apart levels like 1e-5 and 1e-3 that the raw value squeezes together).
      fused: run ``PPGNBlockFused`` (fewer passes over memory; same parameters and, up to
        rounding, the same function).
      pallas: also run the two per-entry MLPs of each block as one Pallas kernel
        (``pair_mlp_kernel``) and the mixing layer with the norm statistics as another
        (``mix_norm_kernel``); implies ``fused``. Differentiable: the backward is the
        XLA path's, from residuals the kernels save (no forward recomputed). Only with
        ``compute_dtype`` bfloat16 (in float32 the XLA path was faster); shapes the
        kernels can't tile fall back to XLA.
      walk_features: ``K > 0`` adds ``K`` input channels of random-walk probabilities of
        ``A_t`` (``random_walk_channels``: ``log(1 + n * (D^-1 A_t)^k)``, ``k = 1..K``): global
        structure, such as communities, that the blocks would otherwise have to build from
        products of the adjacency. 0 (the paper's): none.
      spectral_features: ``K > 0`` adds ``K`` input channels, the projectors
        ``n v_k v_k^T`` on the eigenvectors of the 2nd to ``(K+1)``-th smallest eigenvalues
        of the normalised Laplacian of ``A_t`` (``laplacian_projector_channels``). 0: none.
      self_condition: one more input channel, the model's own earlier estimate of
        ``p(A_0[i,j] = 1)`` (self-conditioning, Chen et al. 2022, "Analog Bits"): the
        ``x0_estimate`` call argument, zeros when it is None. Training feeds the model's
        first-pass estimate to half of the graphs, the sampler the previous step's
        (``ddgjax.processes.bitflip``). False (the paper's): no such channel.
      dropout: ``p > 0`` drops each channel entry of every block's output with
        probability ``p`` (inverted dropout) when called with ``deterministic=False`` and a
        ``"dropout"`` rng, as training does; every other call is deterministic. 0 (the
        paper's): none.
      film: condition every block on the noise level and the node count by FiLM (an
        adaptive instance norm): a small MLP of ``graph_conditions`` (the noise channels and
        ``log2(n) / 8``) gives each block a per-graph, per-channel ``(gamma, beta)``, and the
        block's norm output becomes ``y * (1 + gamma) + beta`` (``film_modulate``). The heads
        start at zero, so an initialised model computes what it would without FiLM. Without
        it (the paper's) the noise level enters only on the input's diagonal, and the
        instance norms leave its effect (and the node count's) implicit. False: off.
      norm: each block's normalisation (``block_norm``): ``"instance"`` (per graph and
        channel over the real entries, the paper's) or ``"layer"`` (per entry over the
        channels, which keeps each graph's channel means and scales, such as absolute
        counts; the Pallas kernels then leave the mixing layer and norm to XLA).
      fp8_weights: the weights that multiply a block's output, which the float8 sampling
        settings store in float8 (``pallas_launch.fp8_activations`` ``weights`` and
        ``weights_y``: blocks ``2..d``'s pair-MLP first layers and their mixing layers'
        ``x`` rows, the readout's block rows), are used rounded to float8 everywhere, as
        those settings round them (``pair_mlp_mgpu.round_weights_to_fp8``; per output
        column power-of-two scales), with a straight-through gradient in training
        (quantisation-aware training). A model trained so computes the same function on
        every path, and the float8 samplers add only the rounding of its activations.
        False (the paper's): the weights as they are.
      fp8_activations: every block's output, which the float8 sampling settings store in
        float8 (``pallas_launch.fp8_activations`` ``1``, ``weights``, ``weights_y``: read by
        the next block and the readout), is used rounded to float8 e4m3 everywhere
        (``pair_mlp_mgpu.round_to_fp8_trainable``: saturating at +-448, straight-through
        gradient), so that training sees the rounding those settings add at sampling
        (quantisation-aware training of the activations; the float8 kernels then store
        the block outputs unchanged, up to float8's last bit where the bfloat16 XLA path
        rounded twice). False (the paper's): the outputs as they are.
      remat: recompute each block's activations in the backward pass
        (``jax.checkpoint`` per block, via ``nn.remat``) instead of keeping them: the
        same outputs and gradients for less memory at large N, at about one more
        forward pass of compute.
      pad_multiple: ``m > 1`` pads the inputs inside the call to ``padded_nodes(N, m)``
        nodes (more padding: zero adjacency, masked nodes) and crops the logits back to
        ``[B, N, N]``, so that the blocks run on a node count the GPU's kernels tile well.
        The model is invariant to padding, so this is the same function (up to float
        rounding) with the same parameters; callers, noise draws and samples keep the
        width ``N``. On one H200 (docs/benchmarks.md, rounds 89-90) 187 nodes padded to 192
        trained 1.6x faster (PPGN 8 x 128, bf16) and 27 to 28 1.2x (6 x 32), while 60 to 64
        was 1.23x slower: worth it only for node counts the kernels handle badly. 1 (the
        default): no padding.

    Call args:
      adj: ``[B, N, N]`` noisy 0/1 adjacency ``A_t`` (symmetric, zero diagonal and padding).
      node_mask: ``bool[B, N]``, real nodes a prefix.
      t_index: ``int32[B]``, unused by PPGN (it is conditioned on ``noise_level``); kept
        so that all denoisers share one signature.
      noise_level: ``float32[B]``, the noise level, placed on the diagonal of channel 2
        (and of channel 3 on a log scale with ``noise_features="log"``).
      x0_estimate: optional ``[B, N, N]`` probabilities in [0, 1], only with
        ``self_condition`` (None: zeros). Read on the real off-diagonal pairs only.
      deterministic: keyword only; False applies ``dropout`` (needs a ``"dropout"`` rng).

    Returns:
      ``float32[B, N, N]`` logits of ``p(A_0[i,j] = 1 | A_t)``: symmetric, zero on the
      diagonal and on pairs touching padding.
    """

    hidden: int = 32
    num_blocks: int = 6
    compute_dtype: Any = jnp.float32
    noise_features: str = "linear"
    walk_features: int = 0
    spectral_features: int = 0
    self_condition: bool = False
    dropout: float = 0.0
    remat: bool = False
    film: bool = False
    fused: bool = False
    pallas: bool = False
    norm: str = "instance"
    fp8_weights: bool = False
    fp8_activations: bool = False
    pad_multiple: int = 1

    @nn.compact
    def __call__(self, adj, node_mask, t_index, noise_level, x0_estimate=None, *,
                 deterministic: bool = True):
        adj, node_mask, t_index, noise_level = check_inputs(adj, node_mask, t_index, noise_level)
        del t_index
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"config.model.ppgn.dropout: expected a value in [0, 1), got "
                             f"{self.dropout}")
        if x0_estimate is not None and not self.self_condition:
            raise ValueError("x0_estimate given to a PPGN built without self_condition "
                             "(config.model.ppgn.self_condition)")
        n_in = adj.shape[1]
        adj, node_mask, x0_estimate = pad_nodes(adj, node_mask, x0_estimate,
                                                padded_nodes(n_in, self.pad_multiple))
        bsz, n_max = adj.shape[:2]
        sq = square_mask(node_mask)                                    # [B, N, N]
        inv_sqrt_n = jax.lax.rsqrt(jnp.maximum(node_counts(node_mask), 1.0))  # [B]

        eye = jnp.eye(n_max, dtype=jnp.float32)[None]
        chans = noise_channels(noise_level, self.noise_features,
                               "config.model.ppgn.noise_features")    # [B, C]
        x0 = jnp.concatenate([adj[..., None], chans[:, None, None, :] * eye[..., None]], axis=-1)
        x0 = x0 * sq[..., None]                                       # [B, N, N, 1 + C]
        for name, channels in (("walk_features", random_walk_channels),
                               ("spectral_features", laplacian_projector_channels)):
            count = getattr(self, name)
            if count < 0:
                raise ValueError(f"config.model.ppgn.{name}: expected >= 0, got {count}")
            if count:                                                 # + K structural channels
                x0 = jnp.concatenate([x0, channels(adj, node_mask, count)], axis=-1)
        if self.self_condition:                                       # + the earlier estimate
            x0 = jnp.concatenate([x0, estimate_channel(x0_estimate, adj, node_mask)], axis=-1)
        block_cls = PPGNBlockFused if (self.fused or self.pallas) else PPGNBlock
        # The kernels pay off in bfloat16; in float32 Triton's dots ran slower than
        # XLA's (H200: 136 vs 120 ms per 1024-graph forward), so float32 stays on XLA.
        use_kernels = self.pallas and jnp.dtype(self.compute_dtype) == jnp.bfloat16
        if self.norm not in NORMS:
            raise ValueError(f"config.model.ppgn.norm: expected one of {NORMS}, got "
                             f"{self.norm!r}")
        # Padding entries of x need no mask: every block masks m1 and its norm output.
        embed = None
        if self.fold_embed_here(use_kernels, x0.shape):
            w_e, b_e = DenseParams(self.hidden, name="embed")(x0.shape[-1])   # Linear's
            pad = FOLDED_INPUT_WIDTH - x0.shape[-1]
            x = jnp.pad(x0, ((0, 0),) * 3 + ((0, pad),))                      # [B, N, N, 16]
            embed = (jnp.pad(w_e, ((0, pad), (0, 0))), b_e)
        else:
            x = Linear(self.hidden, self.compute_dtype, name="embed")(x0)
        outs = [x0]
        extra = {"pallas": True} if use_kernels else {}
        extra["norm"] = self.norm
        block = nn.remat(block_cls) if self.remat else block_cls
        films = self.film_vectors(noise_level, node_mask) if self.film else [None] * self.num_blocks
        for k in range(self.num_blocks):
            film = () if films[k] is None else (films[k],)
            fold = {"embed": embed} if (k == 0 and embed is not None) else {}
            # (block_0 reads the embedding, which the float8 settings keep in bfloat16)
            w8 = {"fp8_weights": True} if (self.fp8_weights and k >= 1) else {}
            x = block(self.hidden, self.compute_dtype, name=f"block_{k}", **extra, **w8)(
                x, sq, inv_sqrt_n, *film, **fold)
            if self.fp8_activations and not pair_mlp_mgpu.is_fp8(x.dtype):
                x = pair_mlp_mgpu.round_to_fp8_trainable(x)     # (float8 kernels: stored so)
            if self.dropout > 0.0:
                x = nn.Dropout(self.dropout, name=f"dropout_{k}")(x, deterministic=deterministic)
            outs.append(x)
        # Dense(C_0 + d*h -> h) on the concatenation of input (C_0 channels) and block outputs.
        rows = bsz * n_max * n_max
        c0 = x0.shape[-1]
        if (use_kernels and pallas_launch.available()
                and pallas_launch.kernel_backend() == "mosaic"
                and pallas_launch.mosaic_readout()
                and readout_mgpu.supported_widths(c0, [o.shape[-1] for o in outs[1:]],
                                                  self.hidden)):
            logits = self.readout_kernel(outs, rows)
        else:
            z = Linear(self.hidden, self.compute_dtype, name="readout",
                       fp8_rows=(c0, None) if self.fp8_weights else None)(
                *(pair_mlp_mgpu.exact_bf16(o) for o in outs))
            z = z + leaky_relu(Linear(self.hidden, self.compute_dtype, name="residual")(z))
            logits = Linear(1, jnp.float32, name="out")(z)[..., 0]
        assert logits.shape == (bsz, n_max, n_max)
        return symmetrize_and_mask(logits, node_mask)[:, :n_in, :n_in]

    def fold_embed_here(self, use_kernels: bool, input_shape) -> bool:
        """Whether the input embedding folds into the first block (``PPGNBlockFused``'s
        ``embed``): with the Pallas kernels in bfloat16 (``pallas_launch.fold_embed``, on by
        default), at most 16 input channels, no ``remat``, the instance norm, and shapes both
        kernels take with 16 input channels."""
        bsz, n_max, _, c0 = input_shape
        rows, nodes_sq = bsz * n_max * n_max, n_max * n_max
        return (use_kernels and not self.remat and self.norm == "instance"
                and c0 <= FOLDED_INPUT_WIDTH and pallas_launch.fold_embed()
                and both_kernels_take(rows, nodes_sq, FOLDED_INPUT_WIDTH, self.hidden))

    def readout_kernel(self, outs, rows: int):
        """The readout, residual and output layers with ``readout_mgpu``'s kernel for the
        first two (the same parameters as the ``Linear`` path): float32 ``[B, N, N]``.
        Rows that do not fit the kernel's tiles (counted over all graphs of a ``vmap``)
        take its XLA reference."""
        h, cdt = self.hidden, self.compute_dtype
        c0 = outs[0].shape[-1]
        k_read, b_read = DenseParams(h, name="readout")(c0 + sum(o.shape[-1] for o in outs[1:]))
        k_res, b_res = DenseParams(h, name="residual")(h)
        k_out, b_out = DenseParams(1, name="out")(h)
        as_read = lambda o: o if pair_mlp_mgpu.is_fp8(o.dtype) else o.astype(cdt)
        k_blocks = fp8_trained(k_read[c0:], self.fp8_weights)
        # float8 weights on float8 block outputs (pallas_launch.fp8_activations "weights"):
        # rounded here over all blocks as the kernel stores them
        w8 = (pallas_launch.fp8_activations() in ("weights", "weights_y")
              and all(pair_mlp_mgpu.is_fp8(o.dtype) for o in outs[1:]))
        if w8:
            k_blocks = pair_mlp_mgpu.round_weights_to_fp8(k_blocks)
            if not self.fp8_weights:
                warnings.warn(FP8_UNTRAINED_WARNING, stacklevel=2)
        args = (outs[0].reshape(rows, c0).astype(cdt),
                tuple(as_read(o.reshape(rows, h)) for o in outs[1:]),
                k_read[:c0], k_blocks.reshape(len(outs) - 1, h, h), b_read, k_res, b_res)
        fold = pallas_launch.readout_fold()
        if fold is None:          # the default: where it was measured faster (bf16 outputs)
            fold = not any(pair_mlp_mgpu.is_fp8(o.dtype) for o in outs[1:])
        if fold:                                  # the output layer inside the kernel
            logits = readout_mgpu.readout_differentiable(
                *args, fp8_weights=w8, w_out=k_out[:, 0]) + b_out[0]
        else:
            zt = readout_mgpu.readout_differentiable(*args, fp8_weights=w8)
            logits = jnp.einsum("hm,h->m", zt.astype(jnp.float32), k_out[:, 0]) + b_out[0]
        return logits.reshape(outs[0].shape[:3])

    def film_vectors(self, noise_level, node_mask):
        """FiLM's ``(gamma, beta)`` of each block: ``num_blocks`` x float32 ``[B, 2h]``, from
        a two-layer MLP of ``graph_conditions`` (float32) and one zero-initialised head per
        block."""
        c = graph_conditions(noise_level, node_mask, self.noise_features,
                             "config.model.ppgn.noise_features")     # [B, C + 1]
        for i in range(2):
            c = leaky_relu(nn.Dense(self.hidden, name=f"film_mlp_{i}")(c))
        return [nn.Dense(2 * self.hidden, kernel_init=nn.initializers.zeros,
                         name=f"film_{k}")(c) for k in range(self.num_blocks)]
