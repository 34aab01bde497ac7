"""Diagnose a trained model per noise level: how well does it denoise at each t?

    python benchmarks/per_level_error.py --workdir runs/tables/planar_60_ppgn_simple \
        --data ../shared/data/planar_60.json --graphs 16

For each level t: the fraction of real pairs that q_sample flipped, the
fraction the model's p(A_0 | A_t) gets wrong (logit sign), and the mean
per-pair negative log-likelihood, on the first ``--graphs`` training graphs.
A model that only predicts the edge density at level t has an error equal to
the density. A diagnostic of bit-flip runs (``ddgjax.processes.bitflip``; the
maths: docs/method.md).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.graphs import graphs_to_batch, pair_mask  # noqa: E402
from ddgjax.processes import BitFlipProcess, bitflip  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default="", help="dataset source (default: the run's config)")
    ap.add_argument("--graphs", type=int, default=16)
    ap.add_argument("--checkpoint", default="best")
    args = ap.parse_args()
    run = load_run(args.workdir, args.checkpoint)
    if not isinstance(run.process, BitFlipProcess):
        sys.exit(f"per_level_error.py: {args.workdir} is a {run.process.name!r} run; this "
                 f"diagnostic reads bit-flip runs only")
    schedule = run.process.schedule
    ds = load_dataset(args.data or run.config.data.source)
    batch = graphs_to_batch(ds.train[:args.graphs], run.max_nodes)
    adj0, mask = jnp.asarray(batch.adj), jnp.asarray(batch.node_mask)
    pm = pair_mask(mask)
    B, T = adj0.shape[0], schedule.num_timesteps
    density = float(jnp.sum(jnp.where(pm, adj0, 0)) / pm.sum())

    @jax.jit
    def level(t, key):
        bb = jnp.full((B,), jnp.asarray(schedule.beta_bar)[t])  # the model's noise_level
        adj_t = bitflip.q_sample(key, adj0, mask, bb)
        logits = run.model.apply(run.params, adj_t, mask, jnp.full((B,), t), bb)
        nll = bitflip.binary_nll(logits, adj0)
        wrong = (logits > 0) != (adj0 > 0.5)
        n = pm.sum()
        return (jnp.sum(jnp.where(pm, adj_t != adj0, 0)) / n,
                jnp.sum(jnp.where(pm, wrong, 0)) / n, jnp.sum(jnp.where(pm, nll, 0)) / n)

    print(f"edge density {density:.4f}; T = {T}")
    print("t  beta_bar  flipped  model_wrong  nll")
    for t in sorted({1, 2, 3, 4, 6, 8, 12, 16, 24, T} & set(range(1, T + 1))):
        flipped, wrong, nll = (float(x) for x in level(t, jax.random.key(t)))
        print(f"{t:<3d} {schedule.beta_bar64[t]:.4f}    {flipped:.4f}   {wrong:.4f}       {nll:.4f}")


if __name__ == "__main__":
    main()
