"""Does the sampling grid change how SBM samples fail? The same model, the same node
counts and seeds, sampled on several grids; each arm's graphs go through the SBM test
(``benchmarks/sbm_failures.py``'s per-graph description, graph-tool's fit when found).

    python benchmarks/sbm_grid_pilot.py --workdir W --checkpoint best_val --ema \
        --nodes 66-96 --num 20 --seeds 0,1 --grids power:3,uniform --out OUT

Node counts: ``--num`` draws (seed 0) from the training graphs' counts in ``--nodes``,
the same list for every arm. No test graphs are read: validity is a property of each
graph, so this may choose a sampler without touching the test split. Writes
``OUT.json`` (per arm: the summary, per-graph rows, the graphs as edge lists) and
``OUT.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sbm_failures import describe, summarize  # noqa: E402

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.metrics.sbm_fit import sbm_partitions  # noqa: E402
from ddgjax.sampling import generate, load_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--nodes", default="66-96", help="LO-HI: node counts of the samples")
    ap.add_argument("--num", type=int, default=20, help="graphs per arm and seed")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--grids", default="power:3,uniform")
    ap.add_argument("--num_steps", type=int, default=0, help="0: the run's config")
    ap.add_argument("--compute_dtype", default=None, choices=["float32", "bfloat16"])
    ap.add_argument("--fit", default=None, choices=["graph-tool", "ddgjax", "auto"])
    ap.add_argument("--out", required=True, help="output path without extension")
    args = ap.parse_args()

    import jax

    run = load_run(args.workdir, args.checkpoint, use_ema=args.ema,
                   compute_dtype=args.compute_dtype)
    cfg = run.config
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    lo, hi = (int(x) for x in args.nodes.split("-"))
    pool = [g.number_of_nodes() for g in ds.train if lo <= g.number_of_nodes() <= hi]
    if not pool:
        sys.exit(f"sbm_grid_pilot.py: no training graph has {lo}-{hi} nodes")
    counts = np.random.default_rng(0).choice(pool, size=args.num).astype(np.int32)
    num_steps = args.num_steps or int(cfg.sample.get("num_steps", 0) or 0) or None
    seeds = [int(s) for s in args.seeds.split(",")]
    result = {"workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
              "checkpoint_epoch": run.meta.get("epoch"), "node_counts": counts.tolist(),
              "seeds": seeds, "num_steps": num_steps, "device": jax.devices()[0].device_kind,
              "compute_dtype": str(cfg.model.compute_dtype), "arms": {}}
    for grid in args.grids.split(","):
        graphs, t0 = [], time.time()
        for seed in seeds:
            res = generate(run, args.num, seed=seed, batch_size=args.num, num_steps=num_steps,
                           node_counts=counts, grid=grid)
            graphs += res["graphs"]
        seconds = time.time() - t0
        blocks, label = sbm_partitions(graphs, fit=args.fit)
        rows = [describe(g, b) for g, b in zip(graphs, blocks)]
        result["fit"] = label
        result["arms"][grid] = {"summary": summarize(rows), "sample_seconds": seconds,
                                "graphs": rows,
                                "edges": [sorted(map(list, g.edges())) for g in graphs]}
        print(grid, json.dumps(result["arms"][grid]["summary"]), flush=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f)
    cols = ("graphs", "valid", "fails_blocks", "fails_sizes", "fails_wald", "edges_mean",
            "num_blocks_mean", "min_block_mean", "max_block_mean")
    lines = [f"SBM grid pilot: {args.workdir} ({args.checkpoint}, epoch "
             f"{result['checkpoint_epoch']}), {args.num} graphs x seeds {args.seeds}, node "
             f"counts {lo}-{hi}, {num_steps} steps, {result['device']} "
             f"{result['compute_dtype']}; fit: {result['fit']}", "",
             "| grid | " + " | ".join(cols) + " | sampling s |", "|---|" + "---|" * (len(cols) + 1)]
    for grid, arm in result["arms"].items():
        s = arm["summary"]
        cells = [f"{s[c]:.1%}" if c.startswith(("valid", "fails")) else
                 (str(s[c]) if isinstance(s[c], int) else f"{s[c]:.2f}") for c in cols]
        lines.append(f"| {grid} | " + " | ".join(cells) + f" | {arm['sample_seconds']:.0f} |")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
