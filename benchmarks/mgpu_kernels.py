"""The PPGN block's kernels side by side on one GPU: Triton (Pallas), Mosaic GPU (wgmma), XLA.

The two per-entry MLPs (``pair_mlps``) and the mixing layer with its instance-norm
statistics (``mix_with_stats``) at the Planar-60 sampling shape (1024 graphs x 60 x 60
entries, 128 channels, bfloat16; round 28 also timed an untransposed Mosaic mixing kernel,
since removed). Checks each kernel against a float32 reference from the
same bf16 inputs (relative error) and times each (median of repeated calls after warm-up,
fresh random inputs per variant).

    python benchmarks/mgpu_kernels.py --out OUT.json [--fp8]

``--fp8`` adds the kernels reading float8 activations (``DDGJAX_FP8_ACTIVATIONS``): the
pair MLPs from a float8 ``x`` (plain and warp-specialized, float8 outputs as the sampler
writes them), the mixing kernel from float8 ``x`` and ``prod``, the readout from float8
block outputs; each against the float32 reference of the same (float8-rounded) inputs.
``--only`` keeps the variants whose name holds one of its comma-separated parts.

On a CPU the kernels run interpreted (a smoke test; small ``--graphs`` and ``--nodes``), and
the warp-specialized pair kernel needs ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
there (``pair_mlp_mgpu``'s docstring: without it the interpreter hangs).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time


def timed(fn, args, repeats=30):
    import jax
    jax.block_until_ready(fn(*args))
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def rel_err(got, want):
    import jax.numpy as jnp
    g, w = got.astype(jnp.float32), want.astype(jnp.float32)
    return float(jnp.linalg.norm(g - w) / jnp.linalg.norm(w)), bool(jnp.isfinite(g).all())


def main():  # noqa: C901 - one linear script
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--fp8", action="store_true", help="also the float8-activation kernels")
    p.add_argument("--only", default="", help="comma-separated parts of variant names")
    a = p.parse_args()
    only = [part for part in a.only.split(",") if part]
    import jax
    import jax.numpy as jnp
    from ddgjax.models import (mix_norm_kernel, mix_norm_mgpu, pair_mlp_kernel, pair_mlp_mgpu,
                               readout_mgpu)

    rows_m = a.graphs * a.nodes * a.nodes
    cpu = jax.default_backend() == "cpu"        # a smoke test: the kernels interpreted
    dev = jax.devices()[0]
    res = {"device": str(dev.device_kind), "jax": jax.__version__, "rows": rows_m,
           "sms": getattr(dev, "core_count", None), "variants": []}
    nbytes = rows_m * 128 * 2
    x0 = jax.random.normal(jax.random.key(9), (rows_m, 128), jnp.bfloat16)
    copy = jax.jit(lambda v: v * 1)
    res["copy_ms"] = timed(copy, (x0,), a.repeats)
    res["copy_tb_s"] = 2 * nbytes / res["copy_ms"] / 1e9
    del x0

    def check_and_time(name, fn, args, reference, passes=3):
        """Relative error of every output against ``reference`` in float32 (from the same
        bf16 inputs), then the median time; ``tb_s`` counts ``passes`` [M, 128] bf16
        tensors moved."""
        as_tuple = lambda v: v if isinstance(v, (tuple, list)) else (v,)
        ref = jax.jit(lambda *v: reference(*(t.astype(jnp.float32) for t in v)))(*args)
        out = jax.jit(fn)(*args)
        errs = [rel_err(o, r) for o, r in zip(as_tuple(out), as_tuple(ref))]
        del out, ref
        ms = timed(jax.jit(fn), args, a.repeats)
        row = {"name": name, "ms": ms, "rel_err": [e[0] for e in errs],
               "finite": all(e[1] for e in errs), "tb_s": passes * nbytes / ms / 1e9}
        print(json.dumps(row), flush=True)
        res["variants"].append(row)

    pair_args = lambda seed: pair_mlp_mgpu.random_inputs(rows_m, seed=seed)
    pair_ref = pair_mlp_kernel.pair_mlps_reference
    check_and_time("pair_xla", pair_ref, pair_args(1), pair_ref)
    check_and_time("pair_triton", pair_mlp_kernel._pallas_forward, pair_args(2), pair_ref)
    check_and_time("pair_mgpu", lambda *v: pair_mlp_mgpu.pair_mlps(*v, interpret=cpu),
                   pair_args(3), pair_ref)

    nodes_sq = a.nodes * a.nodes
    mix_ref = lambda *v: mix_norm_kernel.mix_with_stats_reference(*v, nodes_sq)
    mix_time = lambda name, fn, seed: check_and_time(
        name, fn, mix_norm_mgpu.random_inputs(a.graphs, nodes_sq, seed), mix_ref)

    mix_time("mix_xla", mix_ref, 11)
    mix_time("mix_triton", lambda *v: mix_norm_kernel._pallas_forward(*v, nodes_sq), 12)
    mix_time("mix_mgpu_t_steps2", lambda *v: mix_norm_mgpu.mix_with_stats(
        *v, nodes_sq, max_concurrent_steps=2, interpret=cpu), 14)
    mix_time("mix_mgpu_t", lambda *v: mix_norm_mgpu.mix_with_stats(
        *v, nodes_sq, interpret=cpu), 15)

    def kernel_only(name, seed, **kw):
        """The kernel alone (y^T out, per-tile sums; no transpose, no segment sum)."""
        if only and not any(part in name for part in only):
            return
        args = mix_norm_mgpu.random_inputs(a.graphs, nodes_sq, seed)
        split = mix_norm_mgpu.split_row_mask(args[-1], nodes_sq)
        fn = jax.jit(lambda *v: mix_norm_mgpu.mix_with_partial_sums(*v, interpret=cpu, **kw))
        ms = timed(fn, args[:-1] + (split,), a.repeats)
        row = {"name": name, "ms": ms, "tb_s": 3 * nbytes / ms / 1e9, "kernel_only": True}
        print(json.dumps(row), flush=True)
        res["variants"].append(row)

    kernel_only("mix_mgpu_t_kernel", 16)
    kernel_only("mix_mgpu_t_kernel_steps2", 19, max_concurrent_steps=2)
    kernel_only("mix_mgpu_t_kernel_nostats", 17, stats=False)
    # the readout, residual and output layers over 8 block outputs, to the logits: the
    # PPGN's Linear path in XLA (bf16 partial products summed in bf16, as ``ppgn.Linear``
    # does; the output Dense in float32) against the kernel and the output Dense
    def xla_logits(x0, *rest):
        xs, (w0, ws, b, wr, br, w_out) = rest[:-6], rest[-6:]
        z = jnp.einsum("mc,ch->mh", x0, w0)
        for x, w in zip(xs, ws):
            z = z + jnp.einsum("mc,ch->mh", x, w)
        z = z + b
        r = jnp.einsum("mh,hk->mk", z, wr) + br
        z = z + jnp.maximum(r, 0.01 * r)
        return jnp.einsum("mh,h->m", z.astype(jnp.float32), w_out.astype(jnp.float32))

    def logits_with(readout_fn):
        def run(x0, *rest):
            xs, (w0, ws, b, wr, br, w_out) = rest[:-6], rest[-6:]
            zt = readout_fn(x0, tuple(xs), w0, ws, b, wr, br)
            return jnp.einsum("hm,h->m", zt.astype(jnp.float32), w_out.astype(jnp.float32))
        return run

    ro_args = readout_mgpu.random_inputs(rows_m, seed=21)
    w_out = jax.random.normal(jax.random.key(22), (128,), jnp.bfloat16) / 11
    flat_args = (ro_args[0], *ro_args[1], *ro_args[2:], w_out)
    ref = logits_with(readout_mgpu.readout_reference)
    check_and_time("readout_xla", xla_logits, flat_args, ref, passes=9)
    for tm in (64, 128):
        check_and_time(f"readout_mgpu_tm{tm}", logits_with(
            lambda *v, tm=tm: readout_mgpu.readout(*v, interpret=cpu, tile_rows=tm)),
            flat_args, ref, passes=9)
    if a.fp8:
        f8 = jnp.float8_e4m3fn
        to8 = lambda v: pair_mlp_mgpu.to_fp8_saturated(v)
        # bytes moved per kernel, in [M, 128] bf16 tensors: pair 0.5 in + 2 x 0.5 out;
        # mixing 0.5 + 0.5 in, 1 out; readout 8 x 0.5 in (+ x_0), 1 out
        x8_pair = lambda seed: (to8(pair_args(seed)[0]),) + pair_args(seed)[1:]
        for ws in (False, True):
            check_and_time(f"pair_mgpu_fp8in{'_ws' if ws else ''}", lambda *v, ws=ws:
                           pair_mlp_mgpu.pair_mlps(*v, interpret=cpu, out_dtype=f8,
                                                   warp_specialized=ws),
                           x8_pair(31), pair_ref, passes=1.5)
            check_and_time(f"pair_mgpu_fp8out{'_ws' if ws else ''}", lambda *v, ws=ws:
                           pair_mlp_mgpu.pair_mlps(*v, interpret=cpu, out_dtype=f8,
                                                   warp_specialized=ws),
                           pair_args(32), pair_ref, passes=2)
        ro8 = flat_args[:1] + tuple(to8(v) for v in flat_args[1:9]) + flat_args[9:]
        # the register layout of the on-chip float8 -> float16 conversion
        for layout in ("WGMMA_8BIT", "WGMMA_UPCAST_2X", "WGMMA"):
            pair_mlp_mgpu.CONVERT_LAYOUT = layout
            tag = "" if layout == "WGMMA_8BIT" else "_" + layout.lower()
            for which, parts in (("", (0, 1)), ("_x", (0,)), ("_prod", (1,))):
                if tag and which:
                    continue
                args8 = tuple(to8(v) if k in parts else v for k, v in enumerate(
                    mix_norm_mgpu.random_inputs(a.graphs, nodes_sq, 33)))
                check_and_time(f"mix_mgpu_fp8in{which}{tag}",
                               lambda *v: mix_norm_mgpu.mix_with_stats(*v, nodes_sq,
                                                                       interpret=cpu),
                               args8, mix_ref, passes=3 - len(parts) / 2)
            check_and_time(f"readout_mgpu_fp8in{tag}", logits_with(
                lambda *v: readout_mgpu.readout(*v, interpret=cpu)), ro8, ref, passes=5)
        pair_mlp_mgpu.CONVERT_LAYOUT = "WGMMA_8BIT"
        del ro8
    del ro_args, flat_args
    check_and_time("pair_triton_again", pair_mlp_kernel._pallas_forward, pair_args(7), pair_ref)
    mix_time("mix_triton_again", lambda *v: mix_norm_kernel._pallas_forward(*v, nodes_sq), 17)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"{'variant':<28} {'ms':>8} {'TB/s':>6} rel_err")
    for r in res["variants"]:
        if "ms" in r:
            print(f"{r['name']:<28} {r['ms']:8.3f} {r['tb_s']:6.2f} {r.get('rel_err', '')}")
    print("copy", round(res["copy_ms"], 3), "ms", round(res["copy_tb_s"], 2), "TB/s")


if __name__ == "__main__":
    main()
