"""The readout kernel with the output layer folded in (``readout_mgpu.readout``'s ``w_out``)
against the kernel plus XLA's output layer, at the Planar-60 sampling shape, on one GPU.

For each fold width (``readout_mgpu.FOLD_WIDTH``, the MMA's N: 16 is what the kernel uses;
32 and 64 are tried in case 16 does not lower) and each setting (bf16 block outputs;
float8 ones with float8 weights, two CTAs per SM): whether it compiles, its error against
the unfolded kernel's ``out^T @ w_out``, and the time of both (median of ``--repeats``
calls, alternating over ``--rounds`` rounds).

    python benchmarks/readout_fold_probe.py --out OUT.json

On a CPU the kernels run interpreted (a smoke test: small ``--rows``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mgpu_kernels import timed  # noqa: E402  (median ms of repeated calls after warm-up)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--rows", type=int, default=1024 * 3600)
    p.add_argument("--widths", default="16,32,64")
    p.add_argument("--layouts", default="kmajor,nmajor",
                   help="the fold's right operand: kmajor ([N, H] read transposed) and/or "
                        "nmajor ([H, N] as it lies)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    import jax
    import jax.numpy as jnp
    from ddgjax.models import pair_mlp_mgpu, readout_mgpu

    interpret = jax.default_backend() == "cpu"
    f32 = lambda v: v.astype(jnp.float32)
    x0, xs, w0, ws, b, wr, br = readout_mgpu.random_inputs(a.rows, seed=5)
    w_out = jax.random.normal(jax.random.key(6), (128,)) / 11
    xs8 = tuple(pair_mlp_mgpu.to_fp8_saturated(v) for v in xs)
    ws8 = pair_mlp_mgpu.round_weights_to_fp8(ws.reshape(-1, 128)).reshape(ws.shape)
    settings = {"bf16": (xs, ws, False), "fp8w": (xs8, ws8, True)}
    rows, variants = [], {}
    for name, (xv, wv, w8) in settings.items():
        unfolded = jax.jit(lambda x0, xv, wv, w_out, w8=w8: jnp.einsum(
            "hm,h->m", f32(readout_mgpu.readout(x0, xv, w0, wv, b, wr, br, interpret=interpret,
                                                fp8_weights=w8)), w_out))
        variants[f"{name}_unfolded"] = (unfolded, (x0, xv, wv, w_out))
        # the exact logits of the kernel's bf16 out (float64 on the host), and how far
        # XLA's float32 output layer (TF32 on a GPU at default precision) is from them
        out_t = np.asarray(readout_mgpu.readout(x0, xv, w0, wv, b, wr, br,
                                                interpret=interpret, fp8_weights=w8),
                           np.float64)
        want = out_t.T @ np.asarray(w_out, np.float64)
        xla = np.asarray(unfolded(x0, xv, wv, w_out), np.float64)
        rows.append({"setting": name, "xla_output_layer_rel_err":
                     float(np.linalg.norm(xla - want) / np.linalg.norm(want))})
        print(json.dumps(rows[-1]), flush=True)
        tries = [(lay, int(w)) for w in a.widths.split(",") for lay in a.layouts.split(",")]
        for layout, width in tries:
            readout_mgpu.FOLD_WIDTH = width         # read when the kernel is traced
            readout_mgpu.FOLD_B_TRANSPOSED = layout == "kmajor"
            fn = jax.jit(lambda x0, xv, wv, w_out, w8=w8, width=width: readout_mgpu.readout(
                x0, xv, w0, wv, b, wr, br, interpret=interpret, fp8_weights=w8, w_out=w_out))
            row = {"setting": name, "fold_width": width, "b_layout": layout}
            try:
                got = jax.block_until_ready(fn(x0, xv, wv, w_out))
                row["compiled"] = True
                got = np.asarray(got, np.float64)
                row["rel_err"] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
                variants[f"{name}_fold{width}_{layout}"] = (fn, (x0, xv, wv, w_out))
            except Exception as e:        # noqa: BLE001 (a probe: report, go on)
                row["compiled"] = False
                row["error"] = f"{type(e).__name__}: {e}"[:1500]
                row["traceback_tail"] = traceback.format_exc()[-1200:]
            print(json.dumps({k: v for k, v in row.items() if k != "traceback_tail"})[:500],
                  flush=True)
            rows.append(row)
            if row["compiled"]:
                break                 # the narrowest width that works is the one to time
    readout_mgpu.FOLD_WIDTH, readout_mgpu.FOLD_B_TRANSPOSED = 16, True
    times = {n: [] for n in variants}
    for r in range(a.rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            fn, args = variants[name]
            times[name].append(timed(fn, args, a.repeats))
    timing = {n: {"ms": statistics.median(v), "round_ms": v} for n, v in times.items()}
    for n, v in timing.items():
        print(n, round(v["ms"], 4), flush=True)
    with open(a.out, "w") as fh:
        json.dump({"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
                   "rows_per_call": a.rows, "probe": rows, "timing": timing}, fh, indent=1)


if __name__ == "__main__":
    main()
