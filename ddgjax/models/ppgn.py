"""PPGN denoiser (Maron et al. 2019, "Provably Powerful Graph Networks"), as Haefeli et al.
(2022) use it for discrete graph diffusion.

The network works on per-pair features (docs/method.md, "Denoisers"):

    X_0   = mask([A_t, s_t * I])       # C = 2; s_t the noise level (+1 log-level channel)
    Y     = Dense_h(X_0)  (+ mask(Dense_h(c)) on every pair, for a condition c [cond_dim])
    block k = 1..d:
        P = mask(m1(Y)) @ m2(Y) / sqrt(n)                          # per channel, over nodes
        Y = mask(InstanceNorm(Dense_h(concat[Y, P])))              # Y = X_k
    Z     = Dense_h(concat[X_0, X_1, ..., X_d])                     # C + d*h -> h
    Z     = Z + leaky_relu(Dense_h(Z))
    L     = Dense_1(Z);  logits = mask_offdiag((L + L^T) / 2)

``m1``, ``m2`` are per-entry MLPs Dense -> leaky_relu(0.01) -> Dense; ``n`` is the graph's
real node count; ``mask`` zeroes every entry whose row or column is a padding node; the
instance norm (no affine) takes mean and variance per graph and channel over the real
``n x n`` entries only, so the real entries of the output do not depend on how much padding
a graph has. Padding entries elsewhere may hold junk that never reaches a real entry.

Speed: pair features are channels last, ``[B, N, N, C]``, except the outputs of ``m1``/``m2``
and their product, which are channels first, ``[C, B, N, N]``: then the channel-wise
product is one batched GEMM over the leading axes and the dense layers read and write
either layout without transposes. The block runs ``m1`` and ``m2`` as one GEMM ``C -> 2h``
and one block-diagonal GEMM ``2h -> 2h``, folds the mask and ``1/sqrt(n)`` into one multiply
of ``m1``, and takes the norm's statistics in one pass; a dense layer on a concatenation
sums partial products instead of materialising it. With ``kernels="pallas"`` (bfloat16
only) the blocks and the readout run ``ddgjax.kernels``' Pallas kernels instead: the same
parameters and function.

Precision: with ``compute_dtype=bfloat16`` the dense layers and the channel product run in
bfloat16 (GEMMs accumulate in float32 on GPU); parameters are float32; the norm's
statistics, the last Dense(h -> 1) and the logits are float32.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ddgjax.kernels import KernelSettings
from ddgjax.kernels import ppgn as ppgn_kernels
from ddgjax.models.common import (channel_matmul, check_condition, check_inputs,
                                  masked_instance_norm,
                                  node_counts, noise_channels, square_mask, symmetrize_and_mask)

KERNELS = ("xla", "pallas")


def leaky_relu(x):
    """The paper's activation: leaky ReLU with slope 0.01 (any shape)."""
    return nn.leaky_relu(x, negative_slope=0.01)


class Dense(nn.Module):
    """The parameters of a dense layer, unapplied: ``kernel [in_width, features]`` (lecun
    normal over the full fan-in) and ``bias [features]`` (zeros), float32 (``linear``
    applies them)."""

    features: int

    @nn.compact
    def __call__(self, in_width: int):
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (in_width, self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        return kernel, bias


def linear(params, xs, dtype, specs=("bijc",), out: str = "bijd") -> jax.Array:
    """``Dense(concat(xs))`` in ``dtype`` without the concatenation: the sum of the partial
    products of each input with its rows of the kernel, plus the bias.

    ``params``: ``(kernel [C_1 + ... + C_k, F], bias [F])``; ``xs``: k arrays, ``specs`` their
    einsum layouts (channel letter ``c``; one spec for all), e.g. ``[B, N, N, C_i]`` as
    ``"bijc"``; ``out``: the result's layout (letter ``d`` for the ``F`` features)."""
    kernel, bias = (v.astype(dtype) for v in params)
    specs = specs * len(xs) if len(specs) == 1 else specs
    y, row = None, 0
    for x, s in zip(xs, specs):
        width = x.shape[s.index("c")]
        part = jnp.einsum(f"{s},cd->{out}", x.astype(dtype), kernel[row:row + width])
        y, row = (part if y is None else y + part), row + width
    shape = [1] * y.ndim
    shape[out.index("d")] = -1
    return y + bias.reshape(shape)


class PairMLP(nn.Module):
    """The parameters of a per-entry MLP Dense -> leaky_relu -> Dense (``dense_0``,
    ``dense_1``, both ``features`` wide), unapplied."""

    features: int

    @nn.compact
    def __call__(self, in_width: int):
        return (Dense(self.features, name="dense_0")(in_width),
                Dense(self.features, name="dense_1")(self.features))


def block_function(m1, m2, mix, x, scale, mask_sq, eps: float, dtype) -> jax.Array:
    """One PPGN block in XLA.

    Args:
      m1, m2: ``((k0 [C, h], b0), (k1 [h, h], b1))``; mix: ``(k [C + h, h], b [h])``.
      x: ``[B, N, N, C]``; scale: ``[B, N, N]``, the mask times ``1/sqrt(n)``;
      mask_sq: ``bool[B, N, N]``.
    Returns: ``[B, N, N, h]`` in ``dtype``, 0 off the mask.
    """
    (k10, b10), (k11, b11) = m1
    (k20, b20), (k21, b21) = m2
    h = k11.shape[0]
    zeros = jnp.zeros((h, h), jnp.float32)
    first = (jnp.concatenate([k10, k20], axis=1), jnp.concatenate([b10, b20]))      # C -> 2h
    second = (jnp.block([[k11, zeros], [zeros, k21]]), jnp.concatenate([b11, b21]))
    hidden = leaky_relu(linear(first, (x,), dtype))
    m = linear(second, (hidden,), dtype, out="dbij")                        # [2h, B, N, N]
    prod = channel_matmul(m[:h] * scale.astype(dtype)[None], m[h:])
    # The norm subtracts each graph's mean, so the mixing bias cannot change the output:
    # its gradient is exactly zero (autodiff's would be rounding noise that Adam scales up).
    mix = (mix[0], jax.lax.stop_gradient(mix[1]))
    y = linear(mix, (x, prod), dtype, specs=("bijc", "cbij"))
    return masked_instance_norm(y, mask_sq, eps, dtype)


class PPGNBlock(nn.Module):
    """One block's parameters (``m1``, ``m2``, ``mix``) and its function: ``block_function``,
    or the kernels' ``block`` where ``use_kernels`` and the shapes allow."""

    hidden: int
    compute_dtype: Any = jnp.float32
    use_kernels: bool = False
    kernel_settings: KernelSettings = KernelSettings()
    eps: float = 1e-5

    @nn.compact
    def __call__(self, x, mask_sq, inv_sqrt_n, embed=None):
        """``x`` ``[B, N, N, C]``, ``mask_sq`` ``bool[B, N, N]``, ``inv_sqrt_n`` ``[B]``;
        ``embed``: the folded input embedding (``ppgn_kernels.fold_input``), or None."""
        h, settings = self.hidden, self.kernel_settings
        c_in = h if embed is not None else x.shape[-1]          # the parameters' width
        m1, m2 = PairMLP(h, name="m1")(c_in), PairMLP(h, name="m2")(c_in)
        mix = Dense(h, name="mix")(c_in + h)
        scale = jnp.where(mask_sq, inv_sqrt_n[:, None, None], 0.0).astype(self.compute_dtype)
        bsz, n = x.shape[:2]
        rows = bsz * n * n
        if self.use_kernels and ppgn_kernels.takes_block(rows, n * n, x.shape[-1], h, settings):
            return ppgn_kernels.block(m1, m2, mix, x.astype(self.compute_dtype), scale,
                                      mask_sq, self.eps, settings, embed)
        if embed is not None:
            raise ValueError(f"PPGNBlock {self.name}: a folded embedding needs the kernels")
        return block_function(m1, m2, mix, x, scale, mask_sq, self.eps, self.compute_dtype)


def padded_nodes(num_nodes: int, multiple) -> int:
    """``num_nodes`` rounded up to a multiple of ``multiple`` (``config.model.ppgn.pad_multiple``,
    an integer >= 1; ValueError naming that field otherwise)."""
    if isinstance(multiple, bool) or not isinstance(multiple, (int, np.integer)) or multiple < 1:
        raise ValueError(f"config.model.ppgn.pad_multiple: expected an integer >= 1, got "
                         f"{multiple!r}")
    return -(-int(num_nodes) // int(multiple)) * int(multiple)


def pad_nodes(adj, node_mask, num_nodes: int):
    """Append padding nodes up to ``num_nodes``: ``adj [B, N, N]`` with zeros, ``node_mask
    [B, N]`` with False (the real nodes stay a prefix)."""
    extra = num_nodes - adj.shape[1]
    if extra == 0:
        return adj, node_mask
    return (jnp.pad(adj, ((0, 0), (0, extra), (0, extra))),
            jnp.pad(node_mask, ((0, 0), (0, extra))))


class PPGN(nn.Module):
    """PPGN denoiser: ``(adj, node_mask, t_index, noise_level) -> logits``.

    Attributes:
      hidden: channel width ``h`` (32 for the small sets, 128 for Planar).
      num_blocks: number of blocks ``d`` (6; 8 for Planar).
      compute_dtype: dtype of the dense layers and the channel product; parameters, norm
        statistics and logits stay float32.
      noise_features: how ``noise_level`` enters (``noise_channels``): ``"linear"`` (the
        raw level, the paper's) or ``"log"`` (also a log-scale channel, which tells apart
        levels like 1e-5 and 1e-3 that the raw value squeezes together).
      kernels: ``"xla"`` (the default) or ``"pallas"``: the blocks and the readout through
        ``ddgjax.kernels`` (bfloat16 only, where the kernels run and take the shapes;
        elsewhere XLA). The same parameters and, up to rounding, the same function.
      kernel_settings: which kernels run and how (``ddgjax.kernels.KernelSettings``).
      remat: recompute each block's activations in the backward pass (``nn.remat``): the
        same outputs and gradients for less memory at large N.
      pad_multiple: ``m > 1`` pads the node axis inside the call to a multiple of ``m``
        (zero adjacency, masked nodes) and crops the logits back: the same function (the
        model is invariant to padding), on a node count the GPU's kernels tile well.
      cond_dim: width of the conditioning vector (``ddgjax.conditioning``; 0: an
        unconditional model, no ``cond`` parameters). A linear projection of it (a learned
        embedding of a one-hot class, a projection of properties) is added to every
        real pair's embedded features.

    Call args:
      adj: ``[B, N, N]`` noisy 0/1 adjacency ``A_t`` (symmetric, zero diagonal and padding).
      node_mask: ``bool[B, N]``, real nodes a prefix.
      t_index: ``int32[B]``, unused (the PPGN reads ``noise_level``); all denoisers share
        one signature.
      noise_level: ``float32[B]``, placed on the diagonal of the input's level channel(s).
      cond: ``float32[B, cond_dim]`` or None (zeros, the null condition); only for
        ``cond_dim > 0``.

    Returns:
      ``float32[B, N, N]`` logits of ``p(A_0[i,j] = 1 | A_t)``: symmetric, zero on the
      diagonal and on pairs touching padding.
    """

    hidden: int = 32
    num_blocks: int = 6
    compute_dtype: Any = jnp.float32
    noise_features: str = "linear"
    kernels: str = "xla"
    kernel_settings: KernelSettings = KernelSettings()
    remat: bool = False
    pad_multiple: int = 1
    cond_dim: int = 0

    @nn.compact
    def __call__(self, adj, node_mask, t_index, noise_level, cond=None):
        adj, node_mask, t_index, noise_level = check_inputs(adj, node_mask, t_index, noise_level)
        cond = check_condition(cond, adj.shape[0], self.cond_dim)
        del t_index
        if self.kernels not in KERNELS:
            raise ValueError(f"config.model.ppgn.kernels: expected one of {KERNELS}, got "
                             f"{self.kernels!r}")
        h, cdt, settings = self.hidden, self.compute_dtype, self.kernel_settings
        n_in = adj.shape[1]
        adj, node_mask = pad_nodes(adj, node_mask, padded_nodes(n_in, self.pad_multiple))
        bsz, n = adj.shape[:2]
        sq = square_mask(node_mask)                                          # [B, N, N]
        inv_sqrt_n = jax.lax.rsqrt(jnp.maximum(node_counts(node_mask), 1.0))  # [B]
        levels = noise_channels(noise_level, self.noise_features,
                                "config.model.ppgn.noise_features")           # [B, C]
        eye = jnp.eye(n, dtype=jnp.float32)[None, :, :, None]
        x0 = jnp.concatenate([adj[..., None], levels[:, None, None, :] * eye], axis=-1)
        x0 = x0 * sq[..., None]                                         # [B, N, N, 1 + C]

        # The kernels pay off in bfloat16; in float32 Triton's dots ran slower than XLA's.
        use_kernels = self.kernels == "pallas" and jnp.dtype(cdt) == jnp.bfloat16
        embed = Dense(h, name="embed")(x0.shape[-1])
        folded = (use_kernels and not self.remat and cond is None
                  and ppgn_kernels.folds_embedding(x0.shape, h, settings))
        if folded:              # the first block's kernels read x0 (16 channels), not x
            x, embed = ppgn_kernels.fold_input(x0, embed)
        else:
            x = linear(embed, (x0,), cdt)
        if cond is not None:    # the condition's projection on every real pair
            c = linear(Dense(h, name="cond")(self.cond_dim), (cond,), cdt, specs=("bc",),
                       out="bd")
            x = x + c[:, None, None, :] * sq[..., None].astype(cdt)
        block = nn.remat(PPGNBlock) if self.remat else PPGNBlock
        outs = [x0]
        for k in range(self.num_blocks):
            fold = {"embed": embed} if (k == 0 and folded) else {}
            x = block(h, cdt, use_kernels, settings, name=f"block_{k}")(
                x, sq, inv_sqrt_n, **fold)
            outs.append(x)

        read = Dense(h, name="readout")(sum(o.shape[-1] for o in outs))
        residual, out = Dense(h, name="residual")(h), Dense(1, name="out")(h)
        widths = [o.shape[-1] for o in outs[1:]]
        if use_kernels and ppgn_kernels.takes_readout(x0.shape[-1], widths, h, settings):
            logits = ppgn_kernels.readout(read, residual, out, outs, settings)
        else:
            z = linear(read, outs, cdt)
            z = z + leaky_relu(linear(residual, (z,), cdt))
            logits = linear(out, (z,), jnp.float32)[..., 0]
        assert logits.shape == (bsz, n, n)
        return symmetrize_and_mask(logits, node_mask)[:, :n_in, :n_in]
