"""Time the checkpoint saves at one training boundary, as the training loop makes them.

At each boundary every run of a training program saves ``best`` and ``latest`` through
its ``checkpoints.CheckpointWriter`` (``ddgjax-train --seeds``: one writer per seed).
This makes ``--runs`` writers for the train state of ``--config`` (default the Ego-small
paper config, whose 5-seed program spends most of its non-step time here, see
docs/benchmarks.md) and times ``--boundaries`` boundaries:

* ``start``: the time until every save of the boundary has returned. The loop is blocked
  for this long, and for any wait on the previous boundary's writes.
* ``total``: the time until the writes are complete on disk.

Medians over the boundaries after the first are written as JSON.

    python benchmarks/checkpoint_saves.py --runs 5 --out /tmp/saves.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import jax  # noqa: E402

from ddgjax import checkpoints, training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402
from ddgjax.models import model_from_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="ego_small_ppgn_simple")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--boundaries", type=int, default=8)
    ap.add_argument("--max_nodes", type=int, default=18)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    cfg = get_config(args.config)
    model = model_from_config(cfg)
    tx = training.make_optimizer(cfg.train, steps_per_epoch=3)
    state = training.init_state(model, tx, jax.random.key(0), args.max_nodes)
    leaves = jax.tree_util.tree_leaves(state)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        writers = [checkpoints.CheckpointWriter(os.path.join(tmp, f"run{r}"))
                   for r in range(args.runs)]
        for b in range(args.boundaries):
            t0 = time.perf_counter()
            for w in writers:
                w.save("best", b, state, {"epoch": b})
                w.save("latest", b, state, {"epoch": b})
            t1 = time.perf_counter()
            for w in writers:
                w.wait()
            rows.append({"start_s": t1 - t0, "total_s": time.perf_counter() - t0})
        for w in writers:
            w.close()
    steady = rows[1:] or rows
    out = {"config": args.config, "runs": args.runs, "saves_per_boundary": 2 * args.runs,
           "state_leaves": len(leaves), "state_numbers": int(sum(x.size for x in leaves)),
           "median_start_s": float(np.median([r["start_s"] for r in steady])),
           "median_total_s": float(np.median([r["total_s"] for r in steady])),
           "boundaries": rows, "device": jax.devices()[0].device_kind,
           "cpus": os.cpu_count(), "python": platform.python_version(), "jax": jax.__version__}
    print(json.dumps({k: v for k, v in out.items() if k != "boundaries"}, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
