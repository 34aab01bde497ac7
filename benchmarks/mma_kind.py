"""Which tensor-core instructions the PPGN's GPU kernels use: Hopper's asynchronous
``wgmma`` or the older warp-level ``mma.sync`` (issue 12: are the Pallas/Triton kernels
held back by the older instruction?).

    python benchmarks/mma_kind.py --out OUT.json [--option model.ppgn.pallas=true]

Compiles one bfloat16 PPGN 8x128 forward (``--batch`` graphs of ``--nodes`` nodes) with
XLA's dumps on (``--xla_dump_to``), runs it once, and counts in every dumped PTX kernel
(``.entry``) the lines with ``wgmma.mma_async`` and with ``mma.sync``. Writes per kernel
the two counts, and the totals over the kernels whose name says Pallas/Triton
(``pallas``/``triton``), the others separately. GPU only (a CPU has no PTX).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([\w$.]+)")


def count_mma(ptx_text: str) -> dict[str, dict[str, int]]:
    """``{kernel: {"wgmma": n, "mma_sync": m}}`` for each ``.entry`` of a PTX module."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in ptx_text.splitlines():
        m = ENTRY.match(line)
        if m:
            current = m.group(1)
            out[current] = {"wgmma": 0, "mma_sync": 0}
        elif current is not None:
            if "wgmma.mma_async" in line:
                out[current]["wgmma"] += 1
            elif "mma.sync" in line:
                out[current]["mma_sync"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--option", action="append", default=[],
                    help="config override KEY=VALUE, e.g. model.ppgn.pallas=true")
    args = ap.parse_args()
    dump = tempfile.mkdtemp(prefix="mma_kind_")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump}").strip()
    import jax
    import jax.numpy as jnp

    from bench_core import core_config, random_graphs
    from ddgjax.models import init_params, model_from_config

    cfg = core_config("bfloat16", 128, 8, options=args.option)
    model = model_from_config(cfg)
    params = init_params(model, jax.random.key(0), args.nodes)
    adj, mask = random_graphs(args.batch, args.nodes, p=0.5)
    t = jnp.full((args.batch,), 16, jnp.int32)
    level = jnp.full((args.batch,), 0.25, jnp.float32)
    fwd = jax.jit(lambda p, a, m, t, s: model.apply(p, a, m, t, s))
    jax.block_until_ready(fwd(params, jnp.asarray(adj), jnp.asarray(mask), t, level))
    kernels: dict[str, dict[str, int]] = {}
    files = sorted(glob.glob(os.path.join(dump, "**", "*.ptx"), recursive=True))
    for path in files:
        with open(path) as f:
            for name, counts in count_mma(f.read()).items():
                kernels[f"{os.path.basename(path)}:{name}"] = counts
    custom = lambda k: any(s in k.lower() for s in ("pallas", "triton", "kernel"))
    totals = {group: {"kernels": 0, "with_wgmma": 0, "with_mma_sync": 0}
              for group in ("pallas_or_triton", "other")}
    for name, counts in kernels.items():
        t = totals["pallas_or_triton" if custom(name) else "other"]
        t["kernels"] += 1
        t["with_wgmma"] += counts["wgmma"] > 0
        t["with_mma_sync"] += counts["mma_sync"] > 0
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "options": args.option, "ptx_files": [os.path.basename(p) for p in files],
              "totals": totals,
              "kernels_with_mma": {k: v for k, v in kernels.items()
                                   if v["wgmma"] or v["mma_sync"]},
              "dump_files": len(glob.glob(os.path.join(dump, "**", "*"), recursive=True)),
              "dump_names_with_triton": sorted(
                  os.path.basename(p) for p in glob.glob(os.path.join(dump, "**", "*"),
                                                         recursive=True)
                  if "triton" in os.path.basename(p).lower())[:50]}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"totals": totals, "ptx_files": len(files)}))


if __name__ == "__main__":
    main()
