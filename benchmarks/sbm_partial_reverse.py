"""At which noise level does an SBM chain lose the partition? Real training graphs are
noised to a level ``beta_bar = L`` (``q(A_L | A_0)``) and the sampler runs from there down
to 0 with the model, over the steps of its 64-step grid below ``L``; each result goes
through the SBM test (``benchmarks/sbm_failures.py``'s per-graph description).

    python benchmarks/sbm_partial_reverse.py --workdir W --checkpoint best_val --ema \
        --nodes 66-96 --num 20 --levels 0.1,0.2,0.3,0.4,0.5 --fit ddgjax --out OUT

At ``L = 0.5`` the noised graph is the prior (Erdős–Rényi of the training density): that
arm is plain sampling with the graphs' node counts. At small ``L`` the chain starts
close to a real graph, and a well-trained model should give it back valid. The level
where validity falls is where the chain decides the partition wrongly. The clean graphs
themselves are fitted too (arm ``data``), for the validity of the reference. Only
training graphs are read. Sampler: Algorithm 2 with the ``--logit_scale`` lever on the
``--grid`` (default: the recipe's 0.9 and ``power:3``). Writes ``OUT.json`` and ``OUT.md``.
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

from sbm_failures import summarize  # noqa: E402
from sbm_grid_pilot import TABLE_COLUMNS, fit_arm, table_cells, write_markdown  # noqa: E402

from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.graphs import batch_to_graphs, graphs_to_batch  # noqa: E402
from ddgjax.processes.bitflip import (SamplerLevers, q_sample, reverse_step,  # noqa: E402
                                      sampling_grid)
from ddgjax.sampling import load_run  # noqa: E402


def levels_from(start: float, grid_levels: np.ndarray) -> np.ndarray:
    """The levels a chain started at ``start`` visits: ``start``, then the grid's levels
    below it, down to 0 (descending, ``float64[K + 1]``)."""
    below = [b for b in grid_levels if b < start - 1e-12]
    return np.asarray([start] + below, np.float64)


def partial_reverse(run, key, adj0, node_mask, start: float, grid_levels: np.ndarray,
                    levers: SamplerLevers):
    """``A_0`` samples ``[B, N, N]`` of chains started from ``q(A_start | adj0)``."""
    import jax
    import jax.numpy as jnp

    rho = run.process.prior_density
    T = run.process.num_timesteps
    model, params = run.model, run.params
    denoise = lambda a, m, t, s: model.apply(params, a, m, t, s)

    @jax.jit
    def step(k, adj, b_now, b_prev):
        t = jnp.where(b_now > 0, jnp.clip(jnp.round(2.0 * T * b_now), 1, T), 0).astype(jnp.int32)
        return reverse_step(denoise, jax.random.fold_in(key, k), adj, node_mask, t, b_now,
                            b_prev, 2, rho=rho, levers=levers)

    B = adj0.shape[0]
    adj = q_sample(jax.random.fold_in(key, 10_000_019), jnp.asarray(adj0, jnp.float32),
                   node_mask, jnp.full((B,), start, jnp.float32), rho)
    levels = levels_from(start, grid_levels)
    for k in range(len(levels) - 1):
        adj = step(k, adj, jnp.float32(levels[k]), jnp.float32(levels[k + 1]))
    return np.asarray(adj), len(levels) - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--nodes", default="66-96", help="LO-HI: node counts of the graphs")
    ap.add_argument("--num", type=int, default=20, help="training graphs (seeded draw)")
    ap.add_argument("--levels", default="0.1,0.2,0.3,0.4,0.5")
    ap.add_argument("--num_steps", type=int, default=64, help="steps of the full grid")
    ap.add_argument("--grid", default="power:3")
    ap.add_argument("--logit_scale", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit", default="ddgjax", choices=["graph-tool", "ddgjax", "auto"])
    ap.add_argument("--out", required=True, help="output path without extension")
    args = ap.parse_args()

    import jax

    run = load_run(args.workdir, args.checkpoint, use_ema=args.ema, compute_dtype="float32")
    cfg = run.config
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    lo, hi = (int(x) for x in args.nodes.split("-"))
    pool = [g for g in ds.train if lo <= g.number_of_nodes() <= hi]
    if not pool:
        sys.exit(f"sbm_partial_reverse.py: no training graph has {lo}-{hi} nodes")
    pick = np.random.default_rng(args.seed).permutation(len(pool))[:args.num]
    graphs = [pool[i] for i in pick]
    batch = graphs_to_batch(graphs, hi)
    _, grid_levels = sampling_grid(run.process.schedule, args.num_steps, args.grid)
    levers = SamplerLevers(logit_scale=args.logit_scale)
    result = {"workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
              "checkpoint_epoch": run.meta.get("epoch"), "nodes": args.nodes,
              "num": len(graphs), "num_nodes": [g.number_of_nodes() for g in graphs],
              "grid": args.grid, "num_steps": args.num_steps, "logit_scale": args.logit_scale,
              "seed": args.seed, "device": jax.devices()[0].device_kind, "arms": {}}
    rows_data, fit = fit_arm(graphs, args.fit)
    result["fit"] = fit
    result["arms"]["data"] = {"level": 0.0, "steps": 0, "summary": summarize(rows_data),
                              "graphs": rows_data, "seconds": 0.0}
    print("data", json.dumps(result["arms"]["data"]["summary"]), flush=True)
    key = jax.random.key(args.seed)
    for level in (float(x) for x in args.levels.split(",")):
        t0 = time.time()
        adj, steps = partial_reverse(run, jax.random.fold_in(key, int(level * 1e6)), batch.adj,
                                     batch.node_mask, level, grid_levels, levers)
        out = batch_to_graphs(adj, np.asarray(batch.node_mask).sum(-1))
        seconds = time.time() - t0
        rows, _ = fit_arm(out, args.fit)
        name = f"from_{level:g}"
        result["arms"][name] = {"level": level, "steps": steps, "summary": summarize(rows),
                                "graphs": rows, "seconds": seconds,
                                "edges": [sorted(map(list, g.edges())) for g in out]}
        print(name, steps, "steps", json.dumps(result["arms"][name]["summary"]), flush=True)
        write(result, args.out, quiet=True)
    write(result, args.out)


def write(result: dict, out: str, quiet: bool = False) -> None:
    """``OUT.json`` and the table ``OUT.md``."""
    with open(out + ".json", "w") as f:
        json.dump(result, f)
    cols = TABLE_COLUMNS
    lines = [f"SBM partial reverse chains: {result['workdir']} ({result['checkpoint']}, epoch "
             f"{result['checkpoint_epoch']}), {result['num']} training graphs of "
             f"{result['nodes']} nodes, grid {result['grid']} ({result['num_steps']} steps), "
             f"logit scale {result['logit_scale']}, seed {result['seed']}, "
             f"{result['device']}; fit: {result['fit']}", "",
             "| start level | steps | " + " | ".join(cols) + " | s |",
             "|---|---|" + "---|" * (len(cols) + 1)]
    for name, arm in result["arms"].items():
        cells = table_cells(arm["summary"])
        label = "clean graphs" if name == "data" else f"{arm['level']:g}"
        lines.append(f"| {label} | {arm['steps']} | " + " | ".join(cells)
                     + f" | {arm['seconds']:.0f} |")
    write_markdown(out, lines, quiet)


if __name__ == "__main__":
    main()
