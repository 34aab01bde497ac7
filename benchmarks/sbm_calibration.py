"""Is the denoiser calibrated on held-out graphs? Per noise level, the fit of an affine
recalibration ``sigmoid(a * logit + b)`` of ``p_theta(A_0 | A_t)`` to the graphs of a split.

    python benchmarks/sbm_calibration.py --workdir W --checkpoint best_val --split val \
        --levels 0.02,0.1,0.2,0.3,0.4,0.5 [--num_graphs 32] --out OUT.json

For each level ``beta_bar``, every graph is noised once (``A_t ~ q(A_t | A_0)``, the run's
prior; a fixed key per graph), the EMA model gives logits on its real pairs, and ``(a, b)``
minimises the binary cross-entropy against ``A_0`` over all those pairs (Newton's method on
the two parameters: a convex problem). A calibrated model has ``a ~ 1, b ~ 0`` and gains
nothing from the refit. Reported per level: the cross-entropy (nats per pair) before and
after, ``a``, ``b``, the edge rate of the graphs and the mean predicted probability. Each
graph runs alone at its bucket's size (or ``max_nodes``), on whatever device JAX has.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.graphs import graphs_to_batch  # noqa: E402
from ddgjax.input_pipeline import bucket_bounds  # noqa: E402
from ddgjax.processes.bitflip import q_sample  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402


def fit_affine(logits: np.ndarray, labels: np.ndarray, iters: int = 50) -> tuple[float, float]:
    """``(a, b)`` minimising the mean BCE of ``sigmoid(a * logits + b)`` against ``labels``
    (float64 Newton steps on the 2 x 2 system)."""
    x, y = logits.astype(np.float64), labels.astype(np.float64)
    a, b = 1.0, 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(a * x + b)))
        r, w = p - y, p * (1.0 - p)
        grad = np.array([np.mean(r * x), np.mean(r)])
        hess = np.array([[np.mean(w * x * x), np.mean(w * x)], [np.mean(w * x), np.mean(w)]])
        step = np.linalg.solve(hess + 1e-12 * np.eye(2), grad)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-10:
            break
    return float(a), float(b)


def bce(logits: np.ndarray, labels: np.ndarray, a: float = 1.0, b: float = 0.0) -> float:
    z = a * logits.astype(np.float64) + b
    return float(np.mean(np.logaddexp(0.0, z) - labels * z))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val")
    ap.add_argument("--split", default="val", choices=["train", "val"])
    ap.add_argument("--levels", default="0.02,0.05,0.1,0.2,0.3,0.4,0.45,0.5")
    ap.add_argument("--num_graphs", type=int, default=0, help="the split's first N (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    run = load_run(args.workdir, args.checkpoint, use_ema=True)
    cfg = run.config
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    graphs = getattr(ds, args.split)
    graphs = graphs[:args.num_graphs] if args.num_graphs else graphs
    if not graphs:
        raise SystemExit(f"{cfg.data.source}: the {args.split} split has no graphs")
    sizes = bucket_bounds(cfg.data.buckets, run.node_counts, run.max_nodes) or (run.max_nodes,)
    rho, T = run.process.prior_density, cfg.diffusion.num_timesteps

    @jax.jit
    def logits_at(key, adj0, mask, level):
        noisy = q_sample(key[None], adj0, mask, level[None], rho)
        t = jnp.clip(jnp.round(level / 0.5 * T), 1, T).astype(jnp.int32)[None]
        return run.model.apply(run.params, noisy, mask, t, level[None]).astype(jnp.float32)

    rows = []
    for level in (float(v) for v in args.levels.split(",")):
        t0 = time.time()
        xs, ys = [], []
        for i, g in enumerate(graphs):
            n = g.number_of_nodes()
            size = next(s for s in sizes if s >= n)
            batch = graphs_to_batch([g], size)
            key = jax.random.fold_in(jax.random.key(args.seed), i)
            out = np.asarray(logits_at(key, batch.adj, batch.node_mask, jnp.float32(level)))[0]
            iu = np.triu_indices(n, 1)
            xs.append(out[:n, :n][iu])
            ys.append(batch.adj[0, :n, :n][iu])
        x, y = np.concatenate(xs), np.concatenate(ys).astype(np.float64)
        a, b = fit_affine(x, y)
        row = {"beta_bar": level, "pairs": int(len(y)), "bce": bce(x, y),
               "bce_recalibrated": bce(x, y, a, b), "a": a, "b": b, "edge_rate": float(y.mean()),
               "mean_predicted": float(np.mean(1.0 / (1.0 + np.exp(-x.astype(np.float64))))),
               "seconds": time.time() - t0}
        rows.append(row)
        print(json.dumps({k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}),
              flush=True)
    with open(args.out, "w") as f:
        json.dump({"workdir": args.workdir, "checkpoint": args.checkpoint, "split": args.split,
                   "epoch": run.meta.get("epoch"), "graphs": len(graphs), "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
