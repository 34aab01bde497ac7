"""Per noise level: the model's NLL of A_0 against the structure-blind baseline, and the
expected number of wrong pairs when sampling (``ddgjax.level_diagnostics``).

    python benchmarks/per_level_nll.py --workdir runs/levers/ct_marginal_5k --checkpoint latest \
        --ema --split test --draws 4 --out per_level.json

For bit-flip runs. Continuous-time models are probed at ``--levels`` (beta_bar values);
grid-trained ones at their trained levels nearest to those. Prints one row per level
(means over graphs and ``--draws`` noise draws): pairs the noise flipped, NLL in bits
per graph (model / blind), expected wrong pairs (model / blind), and the model's
wrong pairs split into missed flips and false alarms, and the edges of A_0 beside the
model's expected edge count (its calibration).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.graphs import graphs_to_batch, pair_mask  # noqa: E402
from ddgjax.level_diagnostics import level_stats  # noqa: E402
from ddgjax.models import model_from_config  # noqa: E402
from ddgjax.processes import BitFlipProcess  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402

LEVELS = "1e-6,1e-5,1e-4,1e-3,3e-3,0.01,0.03,0.1,0.2,0.3,0.4,0.5"


def probe_levels(process: BitFlipProcess, wanted: list[float]) -> list[tuple[int, float]]:
    """``(t_index, beta_bar)`` pairs: the wanted levels in continuous time, else the
    nearest trained levels (deduplicated)."""
    sched = process.schedule
    T = sched.num_timesteps
    out = []
    for bb in wanted:
        if process.continuous_time:
            out.append((int(np.clip(round(2 * T * bb), 1, T)), float(bb)))
        else:
            t = int(np.argmin(np.abs(sched.beta_bar64[1:] - bb))) + 1
            out.append((t, float(sched.beta_bar64[t])))
    return sorted(set(out), key=lambda x: x[1])


def with_compute_dtype(run, dtype: str):
    """``run`` with its model rebuilt in compute dtype ``dtype`` ("" keeps it)."""
    if not dtype:
        return run
    config = run.config.copy_and_resolve_references()
    config.model.compute_dtype = dtype
    return run._replace(config=config, model=model_from_config(config))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best")
    ap.add_argument("--ema", action="store_true", help="the EMA parameters")
    ap.add_argument("--data", default="", help="dataset source (default: the run's config)")
    ap.add_argument("--split", default="test", choices=["train", "val", "test"])
    ap.add_argument("--graphs", type=int, default=0, help="first G graphs of the split (0: all)")
    ap.add_argument("--draws", type=int, default=4, help="noise draws per graph and level")
    ap.add_argument("--levels", default=LEVELS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="write the table as JSON here")
    ap.add_argument("--compute_dtype", default="", help="override the run's model compute "
                    "dtype (float32 / bfloat16)")
    ap.add_argument("--matmul_precision", default="", help="jax_default_matmul_precision "
                    "(e.g. highest: true float32 products instead of TF32 on NVIDIA GPUs)")
    args = ap.parse_args()
    if args.matmul_precision:
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)
    run = with_compute_dtype(load_run(args.workdir, args.checkpoint, use_ema=args.ema),
                             args.compute_dtype)
    if not isinstance(run.process, BitFlipProcess):
        sys.exit(f"per_level_nll.py: {args.workdir} is a {run.process.name!r} run; this "
                 f"diagnostic reads bit-flip runs only")
    ds = load_dataset(args.data or run.config.data.source)
    graphs = getattr(ds, args.split) or sys.exit(f"per_level_nll.py: no {args.split} split")
    graphs = graphs[:args.graphs] if args.graphs else graphs
    batch = graphs_to_batch(graphs, run.max_nodes)
    adj0, mask = jnp.asarray(batch.adj), jnp.asarray(batch.node_mask)
    pm = np.asarray(pair_mask(np.asarray(batch.node_mask)))
    train = graphs_to_batch(ds.train, run.max_nodes)
    tpm = np.asarray(pair_mask(np.asarray(train.node_mask)))
    density = float(np.asarray(train.adj)[tpm].sum() / tpm.sum())
    rho = run.process.prior_density
    B = adj0.shape[0]
    denoise = lambda a, m, t, b: run.model.apply(run.params, a, m, t, b)

    @jax.jit
    def one(key, t, bb):
        return level_stats(denoise, key, adj0, mask, jnp.full((B,), bb, jnp.float32),
                           jnp.full((B,), t, jnp.int32), rho, density)

    rows = []
    head = (f"{'beta_bar':>9} {'flipped':>8} {'nll':>9} {'blind_nll':>9} {'wrong':>8} "
            f"{'blind_wrong':>11} {'missed':>7} {'(added':>7} {'removed)':>8} {'false_alarm':>11} "
            f"{'edges':>7} {'E[edges]':>8}")
    print(f"{args.workdir} ({args.checkpoint}{', EMA' if args.ema else ''}); {B} {args.split} "
          f"graphs x {args.draws} draws; data density {density:.4f}, prior rho {rho:.4f}; "
          f"{int(pm.sum()) / B:.0f} pairs per graph; per-graph means (NLL in bits)")
    print(head)
    for i, (t, bb) in enumerate(probe_levels(run.process, [float(x) for x in
                                                              args.levels.split(",")])):
        stats = [one(jax.random.fold_in(jax.random.key(args.seed), 1000 * i + d), t, bb)
                 for d in range(args.draws)]
        row = {"beta_bar": bb, "t_index": t}
        for k in stats[0]:
            row[k] = float(np.mean([np.asarray(s[k]) for s in stats]))
        rows.append(row)
        print(f"{bb:9.2e} {row['flipped']:8.2f} {row['nll_bits']:9.2f} "
              f"{row['blind_nll_bits']:9.2f} {row['wrong']:8.2f} {row['blind_wrong']:11.2f} "
              f"{row['missed']:7.2f} {row['missed_added']:7.2f} {row['missed_removed']:8.2f} "
              f"{row['false_alarm']:11.2f} {row['edges']:7.1f} {row['expected_edges']:8.1f}",
              flush=True)
    if args.out:
        meta = {"workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
                "compute_dtype": run.config.model.compute_dtype,
                "matmul_precision": args.matmul_precision or "default",
                "device": jax.devices()[0].device_kind,
                "split": args.split, "graphs": B, "draws": args.draws, "density": density,
                "rho": rho, "seed": args.seed}
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "levels": rows}, f, indent=2)


if __name__ == "__main__":
    main()
