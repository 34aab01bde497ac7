"""How large a graph PPGN can train on one GPU: memory per graph against N.

    XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 python benchmarks/max_nodes.py \
        --nodes 128,187,256,320,384,448,512,576,640,768 --batch 32 \
        --out max_nodes.json --plot max_nodes.png
    python benchmarks/max_nodes.py --out max_nodes.json \
        [--nodes 64,128,187,256,320,384,448,512] [--batch 32] [--dtypes bfloat16,float32]
        [--remat both|on|off] [--run_steps 2] [--option model.ppgn.KEY=VALUE ...]

For every (dtype, remat, N) it compiles one PPGN 8 x 128 training step (forward,
backward, Adam; batch ``--batch``; all graphs have N real nodes) and reads XLA's
memory analysis of the compiled program (arguments + outputs + temporaries: what the
step needs on the device, without running it). Where that fits in the card's memory it
also runs ``--run_steps`` steps, reading the allocator's peak, and times them. The
largest N that fits is the largest one whose step ran. Writes JSON rows and, with
``--plot``, a PNG of memory per graph against N.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench_core import core_config, random_graphs  # noqa: E402
from ddgjax import training  # noqa: E402
from ddgjax.graphs import GraphBatch  # noqa: E402
from ddgjax.models import model_from_config  # noqa: E402
from ddgjax.parallel import make_mesh  # noqa: E402
from ddgjax.processes import process_from_config  # noqa: E402


def step_program(cfg, B, N):
    model = model_from_config(cfg)
    process = process_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), N)
    adj, mask = random_graphs(B, N, p=0.1)
    adj = np.concatenate([adj, adj[:1] * 0])
    mask = np.concatenate([mask, mask[:1] & False])
    chunk = training.make_train_chunk(model, tx, process, make_mesh(jax.devices()[:1]),
                                      jax.random.key(1))
    idx = np.arange(B, dtype=np.int32)[None]
    return chunk, (state, GraphBatch(adj, mask), idx)


def measure(cfg, B, N, run_steps, capacity):
    chunk, args = step_program(cfg, B, N)
    t0 = time.perf_counter()
    compiled = chunk.lower(*args).compile()
    row = {"compile_s": time.perf_counter() - t0}
    ma = compiled.memory_analysis()
    if ma is not None:
        need = (ma.argument_size_in_bytes + ma.output_size_in_bytes
                + ma.temp_size_in_bytes - ma.alias_size_in_bytes)
        row.update(argument_bytes=ma.argument_size_in_bytes, temp_bytes=ma.temp_size_in_bytes,
                   output_bytes=ma.output_size_in_bytes, compiled_need_bytes=need,
                   compiled_need_gb_per_graph=need / B / 1e9)
    fits = capacity is None or row.get("compiled_need_bytes", 0) < 0.95 * capacity
    row["ran"] = False
    if fits and run_steps > 0:
        try:
            state = compiled(*args)[0]
            jax.block_until_ready(state)
            t0 = time.perf_counter()
            for _ in range(run_steps):
                state = compiled(state, *args[1:])[0]
            jax.block_until_ready(state)
            row["ms_per_step"] = 1e3 * (time.perf_counter() - t0) / run_steps
            row["ran"] = True
        except Exception as e:  # out of memory at run time
            row["error"] = str(e).splitlines()[0][:200]
    stats = jax.devices()[0].memory_stats() or {}
    row["peak_bytes_in_use_so_far"] = stats.get("peak_bytes_in_use")
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--nodes", default="64,128,187,256,320,384,448,512")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--remat", default="both", choices=["both", "on", "off"])
    ap.add_argument("--run_steps", type=int, default=2)
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--plot", default="")
    args = ap.parse_args()
    stats = jax.devices()[0].memory_stats() or {}
    capacity = stats.get("bytes_limit")
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "bytes_limit": capacity, "batch": args.batch, "options": args.option,
              "model": "PPGN 8 x 128", "rows": []}
    remats = {"both": (False, True), "on": (True,), "off": (False,)}[args.remat]
    for dtype in args.dtypes.split(","):
        for remat in remats:
            cfg = core_config(dtype, options=args.option + [f"model.ppgn.remat={remat}"])
            for n in (int(v) for v in args.nodes.split(",")):
                row = {"dtype": dtype, "remat": remat, "nodes": n}
                try:
                    row.update(measure(cfg, args.batch, n, args.run_steps, capacity))
                except Exception as e:
                    row.update(ran=False, error=str(e).splitlines()[0][:200])
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
                with open(args.out, "w") as f:
                    json.dump(result, f, indent=1)
                if not row.get("ran") and args.run_steps > 0:
                    break  # larger N will not fit either
    print("\nlargest N that trained (batch %d):" % args.batch)
    for dtype in args.dtypes.split(","):
        for remat in remats:
            ok = [r["nodes"] for r in result["rows"]
                  if r["dtype"] == dtype and r["remat"] == remat and r.get("ran")]
            print(f"  {dtype:9s} remat={remat!s:5s}: {max(ok) if ok else None}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for dtype in args.dtypes.split(","):
            for remat in remats:
                rows = [r for r in result["rows"] if r["dtype"] == dtype and r["remat"] == remat
                        and "compiled_need_gb_per_graph" in r]
                ax.plot([r["nodes"] for r in rows], [r["compiled_need_gb_per_graph"] for r in rows],
                        marker="o", label=f"{dtype}{', remat' if remat else ''}")
        ax.set_xlabel("N (nodes)")
        ax.set_ylabel("GB per graph (train step)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title(f"PPGN 8x128 on {result['device']}, batch {args.batch}")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
