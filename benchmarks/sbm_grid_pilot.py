"""Does the sampler change how SBM samples fail? The same model, the same node counts
and seeds, sampled with several sampler settings ("arms": grids, step counts,
algorithms, levers); each arm's graphs go through the SBM test
(``benchmarks/sbm_failures.py``'s per-graph description, graph-tool's fit when found).

    python benchmarks/sbm_grid_pilot.py --workdir W --checkpoint best_val --ema \
        --nodes 66-96 --num 20 --seeds 0,1 --grids power:3,uniform --out OUT
    python benchmarks/sbm_grid_pilot.py --workdir W --checkpoint latest --ema \
        --nodes 44-187 --num 40 --seeds 0,1 --fit ddgjax --out OUT \
        --arms "a2_64:steps=64;a2_256:steps=256;a1_64:steps=64,algorithm=1"
    python benchmarks/sbm_grid_pilot.py --refit OUT.json --fit graph-tool --out OUT_gt

``--arms``: ``NAME:KEY=VALUE,...`` separated by ``;``; ``steps`` is the number of
sampling steps (default ``--num_steps``), ``zero_estimate=true`` samples a
self-conditioned model (PPGN ``self_condition``) in its unconditioned mode (every call
gets the zero estimate, as half of its training graphs did), every other key a sampler option
(``grid``, ``algorithm``, ``renoise_mix``, ``logit_scale``, ...), except ``guide=NAME`` and
``guidance=W`` (and optionally ``guidance_above=LEVEL``): autoguidance (``ddgjax.guidance``)
by the run ``--guide NAME=WORKDIR`` names (repeatable; its ``--guide_checkpoint``, EMA as
``--ema``) at weight ``W``, in the steps at ``beta_bar >= LEVEL``. Without it, one arm
per ``--grids`` entry. ``--refit`` fits the graphs saved in an earlier output (``.json`` or ``.json.gz``) again
(e.g. with graph-tool on a CPU after sampling on a GPU) without sampling; ``--fit none``
samples without fitting (the GPU's time goes to sampling; ``--refit`` fits later).

Node counts: ``--num`` draws (seed 0) from the training graphs' counts in ``--nodes``,
the same list for every arm. No test graphs are read: validity is a property of each
graph, so this may choose a sampler without touching the test split. Writes
``OUT.json`` (per arm: the summary, per-graph rows, the graphs as edge lists) and
``OUT.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
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
from ddgjax.guidance import guided_run, load_guide  # noqa: E402
from ddgjax.metrics.sbm_fit import sbm_partitions  # noqa: E402
from ddgjax.sampling import (SamplingError, configured_num_steps, generate,  # noqa: E402
                             load_run)


def parse_arms(text: str) -> dict[str, dict]:
    """``"a:steps=64,grid=power:3;b:algorithm=1"`` -> ``{"a": {...}, "b": {...}}`` (values
    read as ``--option`` values are: booleans, integers, floats, else strings)."""
    from ddgjax.cli import parse_option_values

    arms = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, body = part.partition(":")
        name = name.strip()
        if not name or name in arms:
            sys.exit(f"sbm_grid_pilot.py: --arms: expected NAME:KEY=VALUE,... with distinct "
                     f"names, got {part!r}")
        try:
            arms[name] = parse_option_values(
                [item.strip() for item in body.split(",") if item.strip()], f"--arms {name}:")
        except ValueError as e:
            sys.exit(f"sbm_grid_pilot.py: {e}")
    return arms


def fit_arm(graphs, fit) -> tuple[list[dict], str]:
    blocks, label = sbm_partitions(graphs, fit=fit)
    return [describe(g, b) for g, b in zip(graphs, blocks)], label


def graphs_of(arm: dict, result_counts=()):
    """The networkx graphs saved in an arm of an earlier output."""
    import networkx as nx
    out = []
    # outputs written before num_nodes was saved: every seed drew the run's node_counts
    num_nodes = arm.get("num_nodes") or list(result_counts) * (len(arm["edges"])
                                                              // max(len(result_counts), 1))
    for n, edges in zip(num_nodes, arm["edges"]):
        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_edges_from(map(tuple, edges))
        out.append(g)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir")
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--nodes", default="66-96", help="LO-HI: node counts of the samples")
    ap.add_argument("--num", type=int, default=20, help="graphs per arm and seed")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--grids", default="power:3,uniform")
    ap.add_argument("--arms", default="", help="NAME:KEY=VALUE,...;... (module docstring)")
    ap.add_argument("--num_steps", type=int, default=0, help="0: the run's config")
    ap.add_argument("--compute_dtype", default=None, choices=["float32", "bfloat16"])
    ap.add_argument("--fit", default=None, choices=["graph-tool", "ddgjax", "auto", "none"])
    ap.add_argument("--refit", default="", help="an earlier OUT.json: fit its graphs again")
    ap.add_argument("--guide", action="append", default=[],
                    help="NAME=WORKDIR: a guide the arms may name (guide=NAME,guidance=W)")
    ap.add_argument("--guide_checkpoint", default="latest",
                    choices=["latest", "best", "best_val"])
    ap.add_argument("--out", required=True, help="output path without extension")
    args = ap.parse_args()

    if args.refit:
        import gzip
        with (gzip.open if args.refit.endswith(".gz") else open)(args.refit, "rt") as f:
            result = json.load(f)
        for name, arm in result["arms"].items():
            rows, arm["fit"] = fit_arm(graphs_of(arm, result.get("node_counts", ())), args.fit)
            result["fit"] = arm["fit"]
            arm.update(summary=summarize(rows), graphs=rows)
            print(name, json.dumps(arm["summary"]), flush=True)
        write(result, args.out)
        return
    if not args.workdir:
        sys.exit("sbm_grid_pilot.py: --workdir is required (or --refit)")
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
    num_steps = configured_num_steps(cfg, args.num_steps)
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = (parse_arms(args.arms) if args.arms
            else {grid: {"grid": grid} for grid in args.grids.split(",")})
    result = {"workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
              "checkpoint_epoch": run.meta.get("epoch"), "node_counts": counts.tolist(),
              "nodes": args.nodes, "num": args.num,
              "seeds": seeds, "num_steps": num_steps, "device": jax.devices()[0].device_kind,
              "compute_dtype": str(cfg.model.compute_dtype), "arms": {}}
    guides = load_guides(args.guide, args.guide_checkpoint, args.ema, args.compute_dtype)
    result["guides"] = {name: {"workdir": w, "checkpoint": args.guide_checkpoint,
                               "epoch": g.meta.get("epoch")} for name, (w, g) in guides.items()}
    prepared = {name: prepare_arm(name, options, run, guides, num_steps)
                for name, options in arms.items()}  # every arm checked before any samples
    for name, (arm_run, steps, options, sampler_options, zero_estimate) in prepared.items():
        graphs, t0 = [], time.time()
        for seed in seeds:
            res = generate(arm_run, args.num, seed=seed, batch_size=args.num, num_steps=steps,
                           node_counts=counts, **sampler_options)
            graphs += res["graphs"]
        seconds = time.time() - t0
        rows, fit = fit_arm(graphs, args.fit) if args.fit != "none" else ([], "none")
        result["fit"] = fit
        result["arms"][name] = {"options": options, "num_steps": steps, "fit": fit,
                                "zero_estimate": zero_estimate,
                                "summary": summarize(rows) if rows else {},
                                "sample_seconds": seconds,
                                "graphs": rows,
                                "num_nodes": [g.number_of_nodes() for g in graphs],
                                "edges": [sorted(map(list, g.edges())) for g in graphs]}
        print(name, json.dumps(result["arms"][name]["summary"]), flush=True)
        write(result, args.out, quiet=True)  # after every arm: a stopped run keeps its arms
    write(result, args.out)


def prepare_arm(name: str, options: dict, run, guides: dict, num_steps):
    """``(arm_run, steps, options, sampler_options, zero_estimate)`` of one ``--arms``
    entry: ``steps`` (default ``num_steps``), ``zero_estimate`` (the self-conditioned run
    in its unconditioned mode) and ``guide``/``guidance``/``guidance_above`` (a run of
    ``guides``, ``{NAME: (workdir, Run)}``) applied to ``run``; ``options`` as recorded,
    ``sampler_options`` what goes to the sampler. Exits with a line naming the arm for a
    guide that is not given, a weight without a guide (or the reverse), a guide with
    ``zero_estimate`` or a guide the run cannot take."""
    options = dict(options)
    steps = int(options.pop("steps", 0)) or num_steps
    zero_estimate = bool(options.pop("zero_estimate", False))
    guide_name, weight = options.pop("guide", None), options.pop("guidance", None)
    above = float(options.pop("guidance_above", 0.0))
    sampler_options = dict(options)
    arm_run = run
    if zero_estimate:
        if guide_name is not None:
            sys.exit(f"sbm_grid_pilot.py: --arms {name}: zero_estimate and a guide do not go "
                     "together (the guide would keep its own self-conditioning)")
        arm_run = run._replace(process=dataclasses.replace(run.process, self_condition=False))
    if (guide_name is None) != (weight is None) or (guide_name is None and above):
        sys.exit(f"sbm_grid_pilot.py: --arms {name}: give guide=NAME and guidance=W together "
                 "(guidance_above only with them)")
    if guide_name is not None:
        if guide_name not in guides:
            sys.exit(f"sbm_grid_pilot.py: --arms {name}: guide={guide_name!r} is not a "
                     f"--guide NAME=WORKDIR (have: {sorted(guides)})")
        try:
            arm_run = guided_run(arm_run, guides[guide_name][1], weight,
                                 guide_name=f"--guide {guide_name}", above=above)
        except SamplingError as e:
            sys.exit(f"sbm_grid_pilot.py: --arms {name}: {e}")
        options.update(guide=guide_name, guidance=float(weight), guidance_above=above)
    return arm_run, steps, options, sampler_options, zero_estimate


def load_guides(specs, checkpoint, ema, compute_dtype) -> dict:
    """``{NAME: (workdir, Run)}`` from ``--guide NAME=WORKDIR`` entries."""
    guides = {}
    for spec in specs:
        name, sep, workdir = spec.partition("=")
        if not sep or not name or not workdir or name in guides:
            sys.exit(f"sbm_grid_pilot.py: --guide: expected distinct NAME=WORKDIR, got {spec!r}")
        try:
            guides[name] = (workdir, load_guide(workdir, checkpoint, use_ema=ema,
                                                compute_dtype=compute_dtype))
        except SamplingError as e:
            sys.exit(f"sbm_grid_pilot.py: --guide {name}: {e}")
    return guides


TABLE_COLUMNS = ("graphs", "valid", "fails_blocks", "fails_sizes", "fails_wald", "edges_mean",
                 "num_blocks_mean", "min_block_mean", "max_block_mean")


def table_cells(summary: dict) -> list[str]:
    """The ``TABLE_COLUMNS`` cells of an arm's ``summarize`` summary (``–`` where it has
    none: sampled with ``--fit none``)."""
    return ["–" if c not in summary else
            f"{summary[c]:.1%}" if c.startswith(("valid", "fails")) else
            (str(summary[c]) if isinstance(summary[c], int) else f"{summary[c]:.2f}")
            for c in TABLE_COLUMNS]


def write(result: dict, out: str, quiet: bool = False) -> None:
    """``OUT.json`` and the table ``OUT.md``."""
    with open(out + ".json", "w") as f:
        json.dump(result, f)
    cols = TABLE_COLUMNS
    fits = ", ".join(sorted({arm.get("fit", result["fit"]) for arm in result["arms"].values()}))
    lines = [f"SBM sampler pilot: {result['workdir']} ({result['checkpoint']}, epoch "
             f"{result['checkpoint_epoch']}), {result.get('num', '?')} graphs x seeds "
             f"{','.join(map(str, result['seeds']))}, node counts {result.get('nodes', '66-96')}, "
             f"{result['device']} {result['compute_dtype']}; fit: {fits}", "",
             "| arm | steps | options | " + " | ".join(cols) + " | sampling s |",
             "|---|---|---|" + "---|" * (len(cols) + 1)]
    for name, arm in result["arms"].items():
        cells = table_cells(arm["summary"])
        opts = ", ".join(f"{k}={v}" for k, v in arm.get("options", {"grid": name}).items())
        lines.append(f"| {name} | {arm.get('num_steps', result['num_steps'])} | {opts} | "
                     + " | ".join(cells) + f" | {arm['sample_seconds']:.0f} |")
    write_markdown(out, lines, quiet)


def write_markdown(out: str, lines: list[str], quiet: bool = False) -> None:
    """``OUT.md`` from the table's lines (and print them unless ``quiet``)."""
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
