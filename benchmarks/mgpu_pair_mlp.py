"""Pair-MLP kernels side by side on one GPU: Triton (Pallas), Mosaic GPU (wgmma), XLA.

The PPGN block's two per-entry MLPs at the Planar-60 sampling shape (1024 graphs x 60 x 60
entries, 128 channels, bfloat16). Checks each kernel against a float32 reference from the
same bf16 inputs (relative error), times each (median of repeated calls after warm-up,
fresh random inputs per variant), and, with ``--cache_dir``, scans the persistent compile
cache for the matrix instructions the compiled kernels hold (``cuobjdump -sass``:
``HGMMA`` is Hopper's wgmma, ``HMMA`` the older mma.sync).

    python benchmarks/mgpu_pair_mlp.py --out OUT.json [--cache_dir DIR]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
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


def scan_cache(cache_dir, out_dir):
    """Counts wgmma / mma.sync instructions in the SASS of every cubin in the cache."""
    import zlib
    try:
        import zstandard
    except ImportError:
        zstandard = None
    rows = []
    for k, path in enumerate(sorted(glob.glob(os.path.join(cache_dir, "*")))):
        if not os.path.isfile(path):
            continue
        raw = open(path, "rb").read()
        data = None
        for dec in ((lambda b: zstandard.ZstdDecompressor().decompress(b, max_output_size=1 << 30))
                    if zstandard else None, zlib.decompress, lambda b: b):
            if dec is None:
                continue
            try:
                data = dec(raw)
                break
            except Exception:
                continue
        start, n = 0, 0
        while True:
            i = data.find(b"\x7fELF", start)
            if i < 0:
                break
            blob = os.path.join(out_dir, f"cubin_{k}_{n}.bin")
            with open(blob, "wb") as fh:
                fh.write(data[i:])
            try:
                sass = subprocess.run(["cuobjdump", "-sass", blob], capture_output=True,
                                      text=True, timeout=60).stdout
            except Exception as e:
                sass = f"ERR {e}"
            names = [l.strip() for l in sass.splitlines() if "Function :" in l]
            rows.append({"entry": os.path.basename(path), "offset": i, "functions": names[:8],
                         "HGMMA": sass.count("HGMMA"), "HMMA": sass.count("HMMA"),
                         "sass_chars": len(sass)})
            os.remove(blob)
            n += 1
            start = i + 4
        if n == 0:
            rows.append({"entry": os.path.basename(path), "elf": 0, "bytes": len(data),
                         "wgmma_text": data.count(b"wgmma"), "mma_sync_text": data.count(b"mma.sync")})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--cache_dir", default="")
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args()
    import jax
    if a.cache_dir:
        jax.config.update("jax_compilation_cache_dir", a.cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp
    from ddgjax.models import pair_mlp_kernel, pair_mlp_mgpu

    rows_m = a.graphs * a.nodes * a.nodes
    dev = jax.devices()[0]
    res = {"device": str(dev.device_kind), "jax": jax.__version__, "rows": rows_m,
           "sms": getattr(dev, "core_count", None), "variants": []}
    nbytes = rows_m * 128 * 2
    x0 = jax.random.normal(jax.random.key(9), (rows_m, 128), jnp.bfloat16)
    copy = jax.jit(lambda v: v * 1)
    res["copy_ms"] = timed(copy, (x0,), a.repeats)
    res["copy_tb_s"] = 2 * nbytes / res["copy_ms"] / 1e9
    del x0

    def check_and_time(name, fn, seed):
        args = pair_mlp_mgpu.random_inputs(rows_m, seed=seed)
        ref = jax.jit(lambda *v: pair_mlp_kernel.pair_mlps_reference(
            *(t.astype(jnp.float32) for t in v)))(*args)
        out = jax.jit(fn)(*args)
        errs = [rel_err(o, r) for o, r in zip(out, ref)]
        del out, ref
        ms = timed(jax.jit(fn), args, a.repeats)
        row = {"name": name, "ms": ms, "rel_err": [e[0] for e in errs],
               "finite": all(e[1] for e in errs), "tb_s": 3 * nbytes / ms / 1e9}
        print(json.dumps(row), flush=True)
        res["variants"].append(row)

    check_and_time("xla_reference", pair_mlp_kernel.pair_mlps_reference, 1)
    check_and_time("triton", pair_mlp_kernel._pallas_forward, 2)
    for steps in (2, 3):
        try:
            check_and_time(f"mgpu_steps{steps}",
                           lambda *v, s=steps: pair_mlp_mgpu.pair_mlps(*v, max_concurrent_steps=s), 3 + steps)
        except Exception as e:  # noqa: BLE001 - report and go on
            res["variants"].append({"name": f"mgpu_steps{steps}", "error": repr(e)[:2000]})
            print("mgpu", steps, "failed:", repr(e)[:2000], flush=True)
    check_and_time("triton_again", pair_mlp_kernel._pallas_forward, 7)
    if a.cache_dir:
        res["cache_scan"] = scan_cache(a.cache_dir, os.path.dirname(os.path.abspath(a.out)))
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"{'variant':<16} {'ms':>8} {'TB/s':>6} rel_err")
    for r in res["variants"]:
        if "ms" in r:
            print(f"{r['name']:<16} {r['ms']:8.3f} {r['tb_s']:6.2f} {r['rel_err']}")
    print("copy", round(res["copy_ms"], 3), "ms", round(res["copy_tb_s"], 2), "TB/s")


if __name__ == "__main__":
    main()
