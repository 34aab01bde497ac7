"""The three Mosaic kernels with float8 weights (``fp8_weights=True``) beside their bf16 and
float8-activation forms, on one GPU (``DDGJAX_FP8_ACTIVATIONS=weights``, round 60).

At the Planar-60 sampling shape (1024 graphs x 60 x 60 rows, 128 channels): the
warp-specialized pair kernel writing float8 (bf16 ``x``; float8 ``x`` converted on chip;
float8 ``x`` with float8 weights), the mixing kernel (bf16; float8 ``x`` and ``prod``
converted; the same with float8 weights for ``x``), the readout over 8 block outputs
(bf16; float8 converted; float8 with float8 weights, at 64- and 128-row tiles). Each is
checked against its float32 reference from the same (rounded) inputs and weights
(relative error) and timed (median of ``--repeats`` calls; the variants alternate over
``--rounds`` rounds and the row's ``ms`` is the median of the round medians).

    python benchmarks/fp8_weight_kernels.py --out OUT.json

On a CPU the kernels run interpreted (a smoke test; small ``--graphs`` and ``--nodes``), and
the warp-specialized pair kernel needs ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
there (``pair_mlp_mgpu``'s docstring: without it the interpreter hangs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mgpu_kernels import timed  # noqa: E402  (median ms of repeated calls after warm-up)


def rel(got, want) -> float:
    import jax.numpy as jnp
    g, w = got.astype(jnp.float32), want.astype(jnp.float32)
    return float(jnp.linalg.norm(g - w) / jnp.linalg.norm(w))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated name prefixes of the variants "
                   "to run (default all), e.g. 'mix'")
    a = p.parse_args()
    import jax
    import jax.numpy as jnp
    from ddgjax.models import (mix_norm_kernel, mix_norm_mgpu, pair_mlp_kernel, pair_mlp_mgpu,
                               readout_mgpu)

    interpret = jax.default_backend() == "cpu"          # a smoke test only
    rows, nsq = a.graphs * a.nodes * a.nodes, a.nodes * a.nodes
    f8, f32 = pair_mlp_mgpu.FP8, (lambda v: v.astype(jnp.float32))
    to8, rnd = pair_mlp_mgpu.to_fp8_saturated, pair_mlp_mgpu.round_weights_to_fp8
    variants = {}          # name -> (fn, args, reference outputs)

    x, w0, b0, w1, b1, scale = pair_mlp_mgpu.random_inputs(rows, seed=3)
    x8 = to8(x)
    pair_ref = lambda xv, w: pair_mlp_kernel.pair_mlps_reference(
        f32(xv), w, *(f32(v) for v in (b0, w1, b1, scale)))
    for name, xv, w8 in (("pair_bf16x", x, False), ("pair_fp8x", x8, False),
                         ("pair_fp8x_fp8w", x8, True)):
        fn = jax.jit(lambda *v, w8=w8: pair_mlp_mgpu.pair_mlps(
            *v, out_dtype=f8, warp_specialized=True, interpret=interpret, fp8_weights=w8))
        variants[name] = (fn, (xv, w0, b0, w1, b1, scale),
                          lambda xv=xv, w8=w8: pair_ref(xv, rnd(w0) if w8 else f32(w0)))

    mx, prod, wx, wp, b, mask = mix_norm_mgpu.random_inputs(a.graphs, nsq, seed=4)
    mx8, prod8 = to8(mx), to8(prod)
    rnd_mix = pair_mlp_mgpu.round_mixing_x_weights_to_fp8
    for name, xv, pv, w8, one in (("mix_bf16", mx, prod, False, False),
                                  ("mix_fp8", mx8, prod8, False, False),
                                  ("mix_fp8_fp8w", mx8, prod8, True, False),
                                  ("mix_fp8_fp8w_1acc", mx8, prod8, True, True),
                                  ("mix_fp8_fp8w_fp8out", mx8, prod8, True, False),
                                  ("mix_fp8_fp8w_1acc_fp8out", mx8, prod8, True, True)):
        y8 = name.endswith("fp8out")
        fn = jax.jit(lambda *v, w8=w8, one=one, y8=y8: mix_norm_mgpu.mix_with_stats(
            *v, nsq, interpret=interpret, fp8_weights=w8, one_accumulator=one, fp8_out=y8))
        ref = (lambda xv=xv, pv=pv, w8=w8, one=one: mix_norm_kernel.mix_with_stats_reference(
            f32(xv), f32(pv), (rnd_mix(wx, wp) if one else rnd(wx)) if w8 else f32(wx),
            f32(wp), f32(b), f32(mask), nsq))
        if y8:       # the float8 output is y - b: compare the sums only
            ref = (lambda r=ref: (None, r()[1]))
        variants[name] = (fn, (xv, pv, wx, wp, b, mask), ref)

    r0, rxs, rw0, rws, rb, rwr, rbr = readout_mgpu.random_inputs(rows, seed=5)
    rxs8 = tuple(to8(v) for v in rxs)
    for name, xs, w8, tm in (("readout_bf16", rxs, False, 64), ("readout_fp8", rxs8, False, 64),
                             ("readout_fp8_fp8w", rxs8, True, 64),
                             ("readout_fp8_fp8w_tm128", rxs8, True, 128)):
        fn = jax.jit(lambda x0, xs, *w, w8=w8, tm=tm: readout_mgpu.readout(
            x0, xs, *w, interpret=interpret, fp8_weights=w8, tile_rows=tm))
        variants[name] = (fn, (r0, xs, rw0, rws, rb, rwr, rbr),
                          lambda xs=xs, w8=w8: readout_mgpu.readout_reference(
                              f32(r0), tuple(f32(v) for v in xs), f32(rw0),
                              rnd(rws.reshape(-1, 128)).reshape(rws.shape) if w8
                              else f32(rws), f32(rb), f32(rwr), f32(rbr)))

    if a.only:
        keep = tuple(a.only.split(","))
        variants = {k: v for k, v in variants.items() if k.startswith(keep)}
    res = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__, "rows": rows,
           "rounds": a.rounds, "repeats": a.repeats, "variants": []}
    errors = {}
    for name, (fn, args, ref) in variants.items():
        got = fn(*args)
        got = got if isinstance(got, (tuple, list)) else (got,)
        want = ref()
        want = want if isinstance(want, (tuple, list)) else (want,)
        errors[name] = [rel(g, w) for g, w in zip(got, want) if w is not None]
        del got, want
    times = {n: [] for n in variants}
    for r in range(a.rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            fn, args, _ = variants[name]
            times[name].append(timed(fn, args, a.repeats))
    for name in variants:
        row = {"name": name, "ms": statistics.median(times[name]), "round_ms": times[name],
               "rel_err": errors[name]}
        print(json.dumps(row), flush=True)
        res["variants"].append(row)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
