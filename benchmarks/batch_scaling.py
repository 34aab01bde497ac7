"""Issue 12: does a smaller batch make each graph cheaper (the L2-cache question)?

At 1024 graphs of 60 nodes one ``[B, N, N, 128]`` bfloat16 tensor is 0.94 GB, so every
kernel of a PPGN block reads and writes HBM. At 16 graphs it is 15 MB, and a block's
tensors (input, the two pair-MLP outputs, their product, the mix output) may stay in the
H200's 50 MB L2 from one kernel to the next. This times, on one GPU:

* sampling (the per-graph sampler ``generate`` runs, Algorithm 2, PPGN 8x128, N = 60,
  32 steps) of ``B`` graphs for each ``--sample_batches`` B, reported per 1024 graphs
  (``s_per_1024 = median_s * 1024 / B``), for each ``--sample_options`` set (``;``-separated
  sets of ``,``-separated ``key=value``; ``-`` for none);
* one train step (forward, backward, Adam) at each ``--train_batches`` B, reported per
  64 graphs (``ms_per_64 = ms_per_step * 64 / B``), with ``--train_options``.

    python benchmarks/batch_scaling.py --out OUT.json   # GPU; --quick: CPU smoke test

Writes JSON rows as they come (a call cut short keeps what finished).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

import bench_core  # noqa: E402


def parse_sets(raw: str) -> list[tuple[str, ...]]:
    sets = []
    for part in raw.split(";"):
        part = part.strip()
        sets.append(() if part in ("", "-") else tuple(o for o in part.split(",") if o))
    return sets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--sample_batches", default="16,32,64,128,256,1024")
    ap.add_argument("--sample_options", default="model.ppgn.pallas=true;model.ppgn.fused=true")
    ap.add_argument("--train_batches", default="16,32,64")
    ap.add_argument("--train_options", default="model.ppgn.fused=true")
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=32, help="sampling steps")
    ap.add_argument("--train_steps", type=int, default=10, help="train steps per timed call")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CPU smoke test)")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.hidden, args.blocks, args.steps, args.train_steps = 8, 8, 2, 4, 2
        args.repeat = 2
        args.sample_batches = "2,4" if args.sample_batches else ""
        args.train_batches = "2,4" if args.train_batches else ""
    out = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
           "dtype": args.dtype, "nodes": args.nodes, "hidden": args.hidden,
           "blocks": args.blocks, "sample_rows": [], "train_rows": []}

    def save():
        with open(args.out + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(args.out + ".tmp", args.out)

    for opts in parse_sets(args.sample_options):
        for b in (int(x) for x in args.sample_batches.split(",") if x):
            r = bench_core.bench_sampling(args.dtype, b, args.nodes, args.hidden, args.blocks,
                                          args.steps, vmapped=True, options=opts,
                                          repeat=args.repeat, warmup=2, params_as_arg=True)
            row = {"batch": b, "options": list(opts), "median_s": r["seconds"],
                   "min_s": r["seconds_min"], "s_per_1024": r["seconds"] * 1024 / b,
                   "first_call_s": r["first_call_s"]}
            out["sample_rows"].append(row)
            print(json.dumps(row), flush=True)
            save()
    for opts in parse_sets(args.train_options):
        for b in (int(x) for x in args.train_batches.split(",") if x):
            r = bench_core.bench_train_step(args.dtype, b, args.nodes, args.hidden, args.blocks,
                                            args.train_steps, options=opts, repeat=args.repeat)
            row = {"batch": b, "options": list(opts), "ms_per_step": r["ms_per_step"],
                   "ms_per_step_min": r["ms_per_step_min"],
                   "ms_per_64": r["ms_per_step"] * 64 / b, "first_call_s": r["first_call_s"]}
            out["train_rows"].append(row)
            print(json.dumps(row), flush=True)
            save()
    save()


if __name__ == "__main__":
    main()
