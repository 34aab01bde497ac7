"""Does a run overfit? The negative ELBO (bits per pair, ``ddgjax.likelihood.nll``) of the
validation graphs under several checkpoints of one run, with the same draws for each
(same seed, levels and graphs), so the per-graph differences are paired.

    python benchmarks/sbm_val_nll.py --workdir W --checkpoints best_val,best,latest \
        --num_levels 16 --num_draws 1 --out OUT.json

The estimate with few levels and draws is a looser bound than ``completion_nll.py``'s
(128 levels x 8 draws) but is the same bound for every checkpoint. EMA parameters.
Only the validation split is read.
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

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.likelihood import nll  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoints", default="best_val,best,latest")
    ap.add_argument("--num_levels", type=int, default=16)
    ap.add_argument("--num_draws", type=int, default=1)
    ap.add_argument("--num_graphs", type=int, default=0, help="first N validation graphs (0: all)")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for ckpt in args.checkpoints.split(","):
        run = load_run(args.workdir, ckpt, use_ema=True)
        cfg = run.config
        ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
        val = ds.val[:args.num_graphs] if args.num_graphs else ds.val
        t0 = time.time()
        res = nll(run, val, num_draws=args.num_draws, seed=0, batch_size=args.batch_size,
                  num_levels=args.num_levels)
        rows.append({"checkpoint": ckpt, "epoch": run.meta.get("epoch"),
                     "bits_per_pair": res["mean_bits_per_pair"],
                     "per_graph": [float(x) for x in res["bits_per_pair"]],
                     "seconds": time.time() - t0})
        print(ckpt, rows[-1]["epoch"], rows[-1]["bits_per_pair"], flush=True)
    base = np.asarray(rows[0]["per_graph"])
    for r in rows[1:]:
        d = np.asarray(r["per_graph"]) - base
        r["minus_first"] = {"mean": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d))),
                            "graphs_worse": int((d > 0).sum()), "graphs": len(d)}
        print(f"{r['checkpoint']} - {rows[0]['checkpoint']}: {json.dumps(r['minus_first'])}")
    with open(args.out, "w") as f:
        json.dump({"workdir": args.workdir, "num_levels": args.num_levels,
                   "num_draws": args.num_draws, "seed": 0, "split": "val", "ema": True,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
