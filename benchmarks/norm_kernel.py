"""The instance norm's Mosaic GPU kernel (``norm_mgpu``, ``DDGJAX_NORM_KERNEL=1``) against
XLA's fusion of the same pass, on one GPU (round 63).

At the Planar-60 sampling shape (1024 graphs x 60 x 60 rows, 128 channels): read the
mixing layer's channels-first output ``y^T`` ``[H, M]`` (bfloat16, or float8 as
``DDGJAX_FP8_ACTIVATIONS=weights_y`` writes it), apply each graph's norm and the padding
mask, write the block's output rows first (float8 under the float8 settings, else
bfloat16). ``xla_now`` is the PPGN's XLA path as it stands (``instance_norm_from_sums``
in bfloat16, then float8), ``xla_ref`` the kernel's reference (``normalize_reference``,
one rounding), ``kernel_s{k}_c{c}`` the kernel with ``k`` tiles in flight per CTA and ``c``
CTAs per SM; ``mix_weights_y_c{c}`` the mixing kernel as ``weights_y`` runs it, at ``c``
CTAs per SM (its error is against the first such row's). Each is
checked against the float32 reference (relative error), timed (median of ``--repeats``
calls; the variants alternate over ``--rounds`` rounds, the row's ``ms`` the median of the
round medians), and given its bandwidth (bytes read and written per second).

    python benchmarks/norm_kernel.py --out OUT.json

On a CPU the kernel runs interpreted (a smoke test; small ``--graphs`` and ``--nodes``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fp8_weight_kernels import rel  # noqa: E402  (relative error in float32)
from mgpu_kernels import timed  # noqa: E402  (median ms of repeated calls after warm-up)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="2:1,2:2,2:3,3:2",
                   help="the kernel's settings to try: tiles in flight per CTA : CTAs per SM")
    p.add_argument("--tags", default="bf16_fp8,fp8_fp8,bf16_bf16",
                   help="y's dtype _ the output's, of bf16_fp8, fp8_fp8, bf16_bf16")
    p.add_argument("--mix", default="1,2", help="also the mixing kernel as weights_y runs "
                   "it (float8 x, product, weights and output) at these CTAs per SM")
    a = p.parse_args()
    import jax
    import jax.numpy as jnp
    from ddgjax.models import mix_norm_mgpu, norm_mgpu, pair_mlp_mgpu
    from ddgjax.models.common import instance_norm_from_sums

    interpret = jax.default_backend() == "cpu"          # a smoke test only
    g, n, h = a.graphs, a.nodes, 128
    nsq, rows = n * n, a.graphs * n * n
    f8, bf16 = pair_mlp_mgpu.FP8, jnp.bfloat16
    ks = jax.random.split(jax.random.key(6), 3)
    y = 2.0 * jax.random.normal(ks[0], (rows, h)) + 0.3
    sizes = jax.random.randint(ks[1], (g,), (2 * n) // 3, n + 1)        # no tiny graphs
    node = jnp.arange(n)[None] < sizes[:, None]
    mask_sq = node[:, :, None] & node[:, None, :]                          # [G, N, N]
    row_mask = mask_sq.reshape(rows).astype(bf16)
    shift = 0.1 * jax.random.normal(ks[2], (h,))
    d = (y.reshape(g, nsq, h) - shift) * row_mask.reshape(g, nsq, 1).astype(jnp.float32)
    sums = jnp.stack([d.sum(1), (d * d).sum(1)], axis=1)                  # [G, 2, H]
    affine = norm_mgpu.affine_from_sums(sums, shift, mask_sq.sum((1, 2)))
    want = norm_mgpu.normalize_reference(y, affine, row_mask, nsq, jnp.float32)
    split = mix_norm_mgpu.split_row_mask(row_mask, nsq)
    configs = [tuple(int(v) for v in c.split(":")) for c in a.configs.split(",") if c]
    sms = pair_mlp_mgpu.sm_count()

    variants = {}          # name -> (fn, args, bytes moved)
    for y_dt, o_dt, tag in ((bf16, f8, "bf16_fp8"), (f8, f8, "fp8_fp8"), (bf16, bf16, "bf16_bf16")):
        if tag not in a.tags.split(","):
            continue
        y_t = pair_mlp_mgpu.to_fp8_saturated(y.T) if y_dt is f8 else y.T.astype(y_dt)
        moved = rows * h * (jnp.dtype(y_dt).itemsize + jnp.dtype(o_dt).itemsize)

        def xla_now(y_t, sums, o_dt=o_dt):
            yv = y_t.T.reshape(g, n, n, h)
            out = instance_norm_from_sums(yv, sums, shift, mask_sq, 1e-5, bf16)
            return pair_mlp_mgpu.to_fp8_saturated(out) if o_dt is f8 else out
        variants[f"xla_now_{tag}"] = (jax.jit(xla_now), (y_t, sums), moved)
        variants[f"xla_ref_{tag}"] = (jax.jit(
            lambda y_t, aff, o_dt=o_dt: norm_mgpu.normalize_reference(
                y_t.T, aff, row_mask, nsq, o_dt)), (y_t, affine), moved)
        for k, per_sm in configs:
            variants[f"kernel_s{k}_c{per_sm}_{tag}"] = (jax.jit(
                lambda y_t, aff, o_dt=o_dt, k=k, c=per_sm * sms: norm_mgpu.normalize_rows(
                    y_t, aff, split, nsq, o_dt, max_concurrent_steps=k, max_ctas=c,
                    interpret=interpret)), (y_t, affine), moved)
    mx, prod, wx, wp, b, mmask = mix_norm_mgpu.random_inputs(g, nsq, seed=4)
    mix_args = (pair_mlp_mgpu.to_fp8_saturated(mx), pair_mlp_mgpu.to_fp8_saturated(prod),
                pair_mlp_mgpu.round_weights_to_fp8(wx).astype(bf16), wp, b, mmask)
    mix_moved = rows * h * 3                      # x, prod, y^T in float8
    for per_sm in [int(v) for v in a.mix.split(",") if v]:
        variants[f"mix_weights_y_c{per_sm}"] = (jax.jit(
            lambda *v, c=per_sm * sms, k=3 if per_sm == 1 else 2: mix_norm_mgpu.mix_with_stats(
                *v, nsq, interpret=interpret, fp8_weights=True, fp8_out=True, max_ctas=c,
                max_concurrent_steps=k)), mix_args, mix_moved)

    res = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__, "rows": rows,
           "rounds": a.rounds, "repeats": a.repeats, "variants": []}
    errors, res_failed = {}, []
    mix_want = None
    for name, (fn, args, _) in list(variants.items()):
        try:                                  # a setting that does not compile is a row too
            jax.block_until_ready(fn(*args))
        except Exception as e:                # noqa: BLE001 - reported, then skipped
            row = {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            print(json.dumps(row), flush=True)
            res_failed.append(row)
            del variants[name]
            continue
        if name.startswith("mix"):
            got = fn(*args)[0]
            mix_want = got if mix_want is None else mix_want
            errors[name] = rel(got, mix_want)          # against the first setting's
        else:
            got = fn(*args).reshape(rows, h)
            errors[name] = rel(got, want)
        del got
    times = {name: [] for name in variants}
    for r in range(a.rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            fn, args, _ = variants[name]
            times[name].append(timed(fn, args, a.repeats))
    for name, (_, _, moved) in variants.items():
        ms = statistics.median(times[name])
        row = {"name": name, "ms": ms, "round_ms": times[name], "rel_err": errors[name],
               "tb_per_s": moved / ms / 1e9}
        print(json.dumps(row), flush=True)
        res["variants"].append(row)
    res["variants"] += res_failed
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
