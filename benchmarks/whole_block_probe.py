"""Is a PPGN block of a small model faster as two kernels than as XLA's fusions? (issue 12)

    python benchmarks/whole_block_probe.py --out docs/results/speed/whole_block.json
    DDGJAX_PALLAS_INTERPRET=1 python benchmarks/whole_block_probe.py --check_only --batches 2

Small models (Ego-small's PPGN 6 x 32, N = 17) are bound by their kernels: a training step
is ~280 launches of 1-7 us (docs/benchmarks.md, round 41), and five seeds in one program
run the same kernels at five times the data at about twice their copy time (round 39).
Session 35 estimated that one kernel per block and direction, a graph per program, could
replace ~33 launches by two, with a gain "between none and ~3x", and that only a
prototype of one block's forward could say where. This is that prototype, forward only:

* ``xla``: ``PPGNBlockFused`` (the fused block, XLA's path, bfloat16) under ``jit``, as the
  training step runs it;
* ``kernels``: the same function as two Pallas Triton kernels: the existing pair-MLP kernel
  (``pair_mlp_kernel``: both MLPs, the mask and ``1/sqrt(n)`` scale, channels-first
  output), then ``product_mix_norm``, one program per graph: the per-channel products
  ``m1[c] @ m2[c]`` on the tensor cores (``[NP, NP]`` tiles, ``NP`` the next power of two
  of N), the mixing layer (``x @ kx`` as one GEMM, the product part accumulated channel by
  channel), the masked instance norm over the graph's entries, and the store of the
  block's output. The mixing bias is left out: the norm cancels it, as in the model.

Both are timed per call (median of ``--repeat`` timed loops of ``--iters`` calls, after a
warm-up; ``--chain K``: K blocks one after the other per call, so that a call's dispatch
is spread over K) at each batch of ``--batches`` (64: one Ego-small run; 320: five seeds in
one program), and checked against each other (max abs difference of the outputs, bf16);
``second_kernel_w*`` times ``product_mix_norm`` alone.
Not a training path: no backward, nothing in ddgjax calls it.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from ddgjax.models import pair_mlp_kernel  # noqa: E402
from ddgjax.models.ppgn import PPGNBlockFused  # noqa: E402


def next_pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def _product_mix_norm_kernel(m1_ref, m2_ref, x_ref, kx_ref, kp_ref, mask_ref, o_ref, *,
                             n: int, np2: int, hidden: int, c_in: int, batch: int,
                             eps: float, interpret: bool, three_d: bool = False):
    """One graph ``g``: ``m1, m2`` ``[H * B * n * n]`` (flat, channels first), ``x``
    ``[B * n * n * C]``, ``kx [C, H]``, ``kp [H, H]``, ``mask [B * n * n]`` (1/0), out
    ``[B * n * n * H]``; tiles ``[np2, np2]`` masked to ``n x n``."""
    from jax.experimental.pallas import triton as plt

    g = pl.program_id(0)
    i = jax.lax.broadcasted_iota(jnp.int32, (np2, np2), 0)
    j = jax.lax.broadcasted_iota(jnp.int32, (np2, np2), 1)
    inside = (i < n) & (j < n)
    pair = jnp.where(inside, i * n + j, 0)                               # [np2, np2]
    nsq = n * n
    # the mask of the graph's real entries, flattened to rows [np2 * np2, 1]
    real = plt.load(mask_ref.at[g * nsq + pair], mask=inside, other=0.0)
    real = real.astype(jnp.float32).reshape(np2 * np2, 1)
    # x @ kx: x rows [np2 * np2, C] (padding rows zero)
    ch = jax.lax.broadcasted_iota(jnp.int32, (np2 * np2, c_in), 1)
    flat_pair = pair.reshape(np2 * np2, 1)
    flat_inside = inside.reshape(np2 * np2, 1)
    x = plt.load(x_ref.at[(g * nsq + flat_pair) * c_in + ch], mask=flat_inside, other=0.0)
    acc = jnp.dot(x, kx_ref[...], preferred_element_type=jnp.float32)   # [np2^2, H]

    def product(c):
        """Channel ``c``'s product ``m1[c] @ m2[c]`` (``[np2, np2]``, rounded to bf16 as the
        model's product is) and its row of the mixing kernel (``[1, H]``)."""
        base = (c * batch + g) * nsq
        a = plt.load(m1_ref.at[base + pair], mask=inside, other=0.0)
        b = plt.load(m2_ref.at[base + pair], mask=inside, other=0.0)
        p = jnp.dot(a, b, preferred_element_type=jnp.float32)
        row = kp_ref[pl.ds(c, 1), :].astype(jnp.float32)
        return p.astype(jnp.bfloat16).astype(jnp.float32), row

    def channel(c, acc):
        p, row = product(c)
        return acc + p.reshape(np2 * np2, 1) * row

    if three_d:
        # the accumulator as [np2, np2, H]: each channel's product adds without a re-layout
        # of its [np2, np2] tile (one reshape of x @ kx before the loop, none after)
        acc3 = acc.reshape(np2, np2, hidden)

        def channel3(c, acc3):
            p, row = product(c)
            return acc3 + p[:, :, None] * row.reshape(1, 1, hidden)

        acc3 = jax.lax.fori_loop(0, hidden, channel3, acc3)
        real3 = real.reshape(np2, np2, 1)
        count = jnp.maximum(jnp.sum(real3), 1.0)
        mean = jnp.sum(jnp.sum(acc3 * real3, axis=0), axis=0) / count       # [H]
        centred = (acc3 - mean[None, None, :]) * real3
        var = jnp.sum(jnp.sum(centred * centred, axis=0), axis=0) / count
        out = (centred * jax.lax.rsqrt(var + eps)[None, None, :]).astype(o_ref.dtype)
        h3 = jax.lax.broadcasted_iota(jnp.int32, (np2, np2, hidden), 2)
        dump = batch * nsq * hidden if interpret else 0
        where = jnp.where(inside[:, :, None], (g * nsq + pair[:, :, None]) * hidden + h3,
                          dump + h3)
        plt.store(o_ref.at[where], out, mask=jnp.broadcast_to(inside[:, :, None], out.shape))
        return
    acc = jax.lax.fori_loop(0, hidden, channel, acc)
    count = jnp.maximum(jnp.sum(real), 1.0)
    mean = jnp.sum(acc * real, axis=0, keepdims=True) / count            # [1, H]
    centred = (acc - mean) * real
    var = jnp.sum(centred * centred, axis=0, keepdims=True) / count
    out = (centred * jax.lax.rsqrt(var + eps)).astype(o_ref.dtype)
    hch = jax.lax.broadcasted_iota(jnp.int32, (np2 * np2, hidden), 1)
    # the padding lanes point past the graphs (the interpreter's masked store writes them;
    # a GPU's does not, and its output has no such slot)
    dump = batch * nsq * hidden if interpret else 0
    where = jnp.where(flat_inside, (g * nsq + flat_pair) * hidden + hch, dump + hch)
    plt.store(o_ref.at[where], out, mask=flat_inside)


def product_mix_norm(m1, m2, x, kx, kp, mask, *, eps: float = 1e-5, warps: int = 4,
                     three_d: bool = False):
    """``m1, m2`` ``[H, B, n, n]``; ``x`` ``[B, n, n, C]``; ``kx [C, H]``, ``kp [H, H]``;
    ``mask`` ``[B, n, n]`` -> the block output ``[B, n, n, H]`` (``x.dtype``)."""
    hidden, batch, n, _ = m1.shape
    c_in = x.shape[-1]
    np2 = next_pow2(n)
    interpret = jax.default_backend() == "cpu"
    kernel = functools.partial(_product_mix_norm_kernel, n=n, np2=np2, hidden=hidden,
                               c_in=c_in, batch=batch, eps=eps, interpret=interpret,
                               three_d=three_d)
    if interpret:
        opts = {"interpret": True}
    else:
        from jax.experimental.pallas import triton as plt
        opts = {"compiler_params": plt.CompilerParams(num_warps=warps, num_stages=1)}
    size = batch * n * n * hidden
    out = pl.pallas_call(kernel, grid=(batch,),
                         out_shape=jax.ShapeDtypeStruct((size + hidden * interpret,), x.dtype),
                         **opts)(m1.reshape(-1), m2.reshape(-1), x.reshape(-1), kx, kp,
                                 mask.reshape(-1).astype(x.dtype))
    return out[:size].reshape(batch, n, n, hidden)


def block_params(variables, c_in: int, hidden: int, dtype):
    """The fused block's parameters as the kernels take them."""
    p = variables["params"]
    w = lambda name, layer: p[name][layer]["kernel"]
    b = lambda name, layer: p[name][layer]["bias"]
    stack = lambda a, c: jnp.stack([a, c]).astype(dtype)
    mix = p["mix"]["kernel"]
    return dict(w0=stack(w("m1", "dense_0"), w("m2", "dense_0")),
                b0=stack(b("m1", "dense_0"), b("m2", "dense_0")),
                w1=stack(w("m1", "dense_1"), w("m2", "dense_1")),
                b1=stack(b("m1", "dense_1"), b("m2", "dense_1")),
                kx=mix[:c_in].astype(dtype), kp=mix[c_in:].astype(dtype))


def block_kernels(params, x, mask_sq, inv_sqrt_n, warps: int = 4, three_d: bool = False):
    """The block through the two kernels: ``x [B, n, n, C]`` -> ``[B, n, n, H]``."""
    batch, n, _, c_in = x.shape
    hidden = params["kx"].shape[1]
    rows = batch * n * n
    scale = jnp.where(mask_sq, inv_sqrt_n[:, None, None], 0.0).astype(x.dtype)
    m1, m2 = pair_mlp_kernel._pallas_forward(
        x.reshape(rows, c_in), params["w0"], params["b0"], params["w1"], params["b1"],
        scale.reshape(rows), backend="triton")
    shape = (hidden, batch, n, n)
    return product_mix_norm(m1.reshape(shape), m2.reshape(shape), x, params["kx"],
                            params["kp"], mask_sq, warps=warps, three_d=three_d)


def inputs(batch: int, n: int, c: int, seed: int = 0):
    """Ego-small-like graphs: node counts 4..n (as the dataset's), features ~ N(0, 1) on
    the real entries (a previous block's normalised output)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(4, n + 1, size=batch)
    node = np.arange(n)[None, :] < counts[:, None]
    mask_sq = node[:, :, None] & node[:, None, :]
    x = rng.standard_normal((batch, n, n, c)).astype(np.float32) * mask_sq[..., None]
    return (jnp.asarray(x, jnp.bfloat16), jnp.asarray(mask_sq),
            jnp.asarray(1.0 / np.sqrt(counts), jnp.float32))


def timed(fn, args, iters: int, repeat: int) -> dict:
    out = fn(*args)
    jax.block_until_ready(out)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t0) / iters)
    return {"median_us": float(np.median(times) * 1e6), "min_us": float(min(times) * 1e6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="64,320")
    ap.add_argument("--nodes", type=int, default=17)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--three_d", action="store_true",
                    help="the second kernel's accumulator as [NP, NP, H] (no per-channel "
                         "re-layout of the product tile)")
    ap.add_argument("--chain", type=int, default=1,
                    help="time K blocks applied one after the other in one jitted call "
                         "(per-block time = call time / K: the dispatch of one call spread)")
    ap.add_argument("--check_only", action="store_true", help="compare, do not time")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    n, c = args.nodes, args.channels
    block = PPGNBlockFused(hidden=c, compute_dtype=jnp.bfloat16, pallas=False)
    rec = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
           "nodes": n, "channels": c, "rows": []}
    for batch in (int(b) for b in args.batches.split(",")):
        x, mask_sq, inv = inputs(batch, n, c)
        variables = block.init(jax.random.key(0), x, mask_sq, inv)
        params = block_params(variables, c, c, jnp.bfloat16)
        chained = lambda one: lambda p, x, m, s: jax.lax.fori_loop(
            0, args.chain, lambda _, y: one(p, y, m, s), x)
        xla = jax.jit(chained(lambda v, x, m, s: block.apply(v, x, m, s)))
        want = np.asarray(xla(variables, x, mask_sq, inv).astype(jnp.float32))
        row = {"batch": batch, "chain": args.chain, "three_d": args.three_d}
        for warps in (int(w) for w in args.warps.split(",")):
            fast = jax.jit(chained(functools.partial(block_kernels, warps=warps,
                                                     three_d=args.three_d)))
            got = np.asarray(fast(params, x, mask_sq, inv).astype(jnp.float32))
            row[f"max_abs_diff_w{warps}"] = float(np.abs(got - want).max())
            row["max_abs_ref"] = float(np.abs(want).max())
            if not args.check_only:
                row[f"kernels_w{warps}"] = timed(fast, (params, x, mask_sq, inv),
                                                 args.iters, args.repeat)
                # the second kernel alone (its output fed back as its x; m1, m2 fixed)
                m = jnp.asarray(np.random.default_rng(1).standard_normal(
                    (2, c, batch, n, n)), jnp.bfloat16)
                second = jax.jit(lambda p, x, m, mk, w=warps: jax.lax.fori_loop(
                    0, args.chain, lambda _, y: product_mix_norm(
                        m[0], m[1], y, p["kx"], p["kp"], mk, warps=w,
                        three_d=args.three_d), x))
                row[f"second_kernel_w{warps}"] = timed(second, (params, x, m, mask_sq),
                                                       args.iters, args.repeat)
        if not args.check_only:
            row["xla"] = timed(xla, (variables, x, mask_sq, inv), args.iters, args.repeat)
        rec["rows"].append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
