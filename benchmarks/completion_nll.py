"""Two tables: test-set likelihoods of trained models, and graph completion.

    python benchmarks/completion_nll.py --nll_workdir planar_60=runs/planar_60 \
        --completion_workdir runs/planar_60 --num_steps 128 \
        --hidden 0.1,0.3,0.5 --add_nodes 10 --num_samples 8 --resample 4,3 --out OUT

**Likelihood table** (one row per ``--nll_workdir NAME=PATH``): the negative ELBO of the
test split of the run's own dataset (``ddgjax.likelihood.nll``: every level, ``--num_draws``
draws of ``A_t`` per level and graph; mean over graphs of bits per pair with its
Monte-Carlo standard error, and the levels used), beside the Erdős–Rényi baseline with the
training split's edge density (the Bernoulli cross-entropy of the test pairs).

**Completion table** (the model of ``--completion_workdir`` on the test split of
``--dataset``, default the run's dataset): for each test graph (first ``--num_graphs``),
``hidden F``: a random fraction ``F`` of its pairs is unknown (seeded per graph);
``+K nodes``: ``K`` random nodes are taken out and regrown -- they are moved to the end of
the node order and every pair touching them is unknown, which is ``extend_graph`` of the
remaining graph by ``K`` nodes with the truth known (and keeps the graph within the
model's ``max_nodes``). Each setting is completed ``--num_samples`` times by the model
without resampling and with RePaint resampling (``--resample JUMP,ROUNDS``), and by the
baseline that fills the unknown pairs with Bernoulli(training density) draws. Reported:
accuracy on the hidden pairs, F1 of the hidden edges, and the fraction of completed
graphs that are planar and connected (mean over graphs and samples).

Writes ``OUT.json`` (every number, the settings and the command) and ``OUT.md`` (the two
tables in markdown).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import networkx as nx
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.cli import parse_option_values  # noqa: E402
from ddgjax.completion import complete, hide_pairs  # noqa: E402
from ddgjax.data import load_dataset  # noqa: E402
from ddgjax.evaluate import load_graphs  # noqa: E402
from ddgjax.likelihood import density_bits_per_pair, edge_density, nll  # noqa: E402
from ddgjax.sampling import configured_num_steps, load_run  # noqa: E402


def run_dataset(run):
    cfg = run.config
    return load_dataset(cfg.data.source, allow_pickle=cfg.data.allow_pickle)


def nll_row(name: str, workdir: str, args) -> dict:
    """One row of the likelihood table."""
    run = load_run(workdir, args.checkpoint, use_ema=args.ema)
    ds = run_dataset(run)
    test = ds.test[:args.num_graphs] if args.num_graphs else ds.test
    t0 = time.time()
    res = nll(run, test, num_draws=args.num_draws, seed=args.seed, batch_size=args.batch_size,
              num_levels=args.num_levels or None, grid=args.grid, algorithm=args.algorithm)
    d = edge_density(ds.train)
    cfg = run.config
    return {"name": name, "workdir": workdir, "dataset": cfg.data.source,
            "model": cfg.model.name, "loss": cfg.diffusion.get("loss"),
            "continuous_time": bool(cfg.diffusion.get("continuous_time", False)),
            "prior": cfg.diffusion.get("prior", "uniform"),
            "epoch": run.meta.get("epoch"), "num_test_graphs": len(test),
            "bits_per_pair": res["mean_bits_per_pair"],
            "se_bits_per_pair": res["se_mean_bits_per_pair"],
            "bits_per_graph": float(res["bits_per_graph"].mean()),
            "train_density": d,
            "er_density_bits_per_pair": float(density_bits_per_pair(test, d).mean()),
            "grid": res["levels"]["grid"], "num_levels": res["levels"]["num_levels"],
            "num_draws": res["num_draws"], "algorithm": res["algorithm"],
            "seconds": time.time() - t0}


def regrow_request(g: nx.Graph, k: int, seed: int):
    """``(truth adjacency, known)``: ``k`` random nodes of ``g`` moved to the end, every pair
    touching them unknown."""
    n = g.number_of_nodes()
    rng = np.random.default_rng(seed)
    gone = rng.choice(n, size=k, replace=False)
    order = [v for v in range(n) if v not in set(gone.tolist())] + gone.tolist()
    adj = nx.to_numpy_array(g, nodelist=order, dtype=np.uint8)
    known = np.zeros((n, n), bool)
    known[:n - k, :n - k] = True
    np.fill_diagonal(known, False)
    return adj, known


def score(truth: np.ndarray, known: np.ndarray, completions: np.ndarray) -> dict:
    """Hidden-pair accuracy, hidden-edge F1 and planar-and-connected fraction of completions
    ``[S, n, n]`` of one graph (means over the samples)."""
    hid = np.triu(~known, 1)
    t = truth[hid].astype(bool)
    acc, f1, ok = [], [], []
    for c in completions:
        p = c[hid].astype(bool)
        acc.append(float((p == t).mean()) if hid.any() else 1.0)
        tp = float((p & t).sum())
        f1.append(2 * tp / max(float(p.sum() + t.sum()), 1.0))
        g = nx.from_numpy_array(c)
        ok.append(bool(nx.is_connected(g) and nx.check_planarity(g)[0]))
    return {"accuracy": float(np.mean(acc)), "edge_f1": float(np.mean(f1)),
            "planar_connected": float(np.mean(ok))}


def density_fill(truth, known, density, num_samples, seed):
    """``[S, n, n]``: the known pairs kept, the unknown ones Bernoulli(density)."""
    rng = np.random.default_rng(seed)
    n = len(truth)
    out = []
    for _ in range(num_samples):
        up = np.triu(rng.random((n, n)) < density, 1)
        fill = (up | up.T).astype(np.uint8)
        out.append(np.where(known, truth, fill).astype(np.uint8))
    return np.stack(out)


def completion_rows(args) -> tuple[list, dict]:
    run = load_run(args.completion_workdir, args.checkpoint, use_ema=args.ema)
    ds = run_dataset(run)
    graphs = load_graphs(args.dataset, "--dataset")[0] if args.dataset else ds.test
    graphs = graphs[:args.num_graphs] if args.num_graphs else graphs
    d = edge_density(ds.train)
    settings = [(f"hidden {f:g}", lambda g, i, f=f: hide_pairs(g, f, args.seed + i))
                for f in args.hidden]
    if args.add_nodes:
        settings.append((f"+{args.add_nodes} nodes",
                         lambda g, i: regrow_request(g, args.add_nodes, args.seed + i)))
    jump, rounds = args.resample
    methods = [("model", 0, 0)] + ([(f"model + RePaint ({jump},{rounds})", jump, rounds)]
                                   if rounds else [])
    options = parse_option_values(args.option)
    rows = []
    for label, make in settings:
        reqs = [make(g, i) for i, g in enumerate(graphs)]
        for mname, j, r in methods:
            t0 = time.time()
            res = complete(run, reqs, args.num_samples, seed=args.seed,
                           batch_size=args.batch_size,
                           num_steps=configured_num_steps(run.config, args.num_steps),
                           resample_jump=j, resample_rounds=r, **options)
            per = [score(a, k, res["adj"][g, :, :len(a), :len(a)])
                   for g, (a, k) in enumerate(reqs)]
            rows.append({"setting": label, "method": mname, "seconds": time.time() - t0,
                         **{m: float(np.mean([p[m] for p in per])) for m in per[0]},
                         "sampler": res["sampler"]})
        per = [score(a, k, density_fill(a, k, d, args.num_samples, args.seed + g))
               for g, (a, k) in enumerate(reqs)]
        rows.append({"setting": label, "method": f"density fill (p={d:.3f})", "seconds": 0.0,
                     **{m: float(np.mean([p[m] for p in per])) for m in per[0]}})
        truth_ok = np.mean([score(a, k, a[None])["planar_connected"] for a, k in reqs])
        rows[-1]["truth_planar_connected"] = float(truth_ok)
    info = {"workdir": args.completion_workdir, "dataset": args.dataset or run.config.data.source,
            "num_graphs": len(graphs), "num_samples": args.num_samples, "train_density": d,
            "epoch": run.meta.get("epoch")}
    return rows, info


def markdown(nll_rows: list, comp_rows: list, comp_info: dict | None) -> str:
    out = []
    if nll_rows:
        out += ["Test-set negative ELBO (an upper bound on the NLL), bits per pair of real "
                "nodes; ± the Monte-Carlo standard error of the mean over graphs.", "",
                "| model | dataset | test graphs | bits/pair (± MC s.e.) | bits/graph | "
                "ER(train density) bits/pair | levels |",
                "|---|---|---|---|---|---|---|"]
        for r in nll_rows:
            out.append(f"| {r['name']} | {r['dataset']} | {r['num_test_graphs']} | "
                       f"{r['bits_per_pair']:.4f} ± {r['se_bits_per_pair']:.4f} | "
                       f"{r['bits_per_graph']:.1f} | {r['er_density_bits_per_pair']:.4f} "
                       f"(p={r['train_density']:.3f}) | {r['num_levels']} ({r['grid']}), "
                       f"{r['num_draws']} draws |")
        out.append("")
    if comp_rows:
        out += [f"Completion: {comp_info['workdir']} on {comp_info['num_graphs']} graphs of "
                f"{comp_info['dataset']}, {comp_info['num_samples']} completions each.", "",
                "| setting | method | hidden-pair accuracy | hidden-edge F1 | planar & connected |",
                "|---|---|---|---|---|"]
        for r in comp_rows:
            out.append(f"| {r['setting']} | {r['method']} | {r['accuracy']:.4f} | "
                       f"{r['edge_f1']:.3f} | {r['planar_connected']:.3f} |")
        out.append("")
    return "\n".join(out)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nll_workdir", action="append", default=[], metavar="NAME=PATH",
                    help="a run for the likelihood table (repeatable)")
    ap.add_argument("--completion_workdir", default="", help="the run for the completion table")
    ap.add_argument("--dataset", default="", metavar="PATH[:SPLIT]",
                    help="graphs to complete (default: the completion run's test split)")
    ap.add_argument("--checkpoint", default=None, choices=["best", "latest", "best_val"],
                    help="default: each run's config.sample.checkpoint")
    ap.add_argument("--ema", action="store_true", default=None,
                    help="use EMA parameters (default: config.sample.use_ema)")
    ap.add_argument("--num_graphs", type=int, default=0, help="first N test graphs (0: all)")
    ap.add_argument("--num_draws", type=int, default=8, help="ELBO draws per level and graph")
    ap.add_argument("--num_levels", type=int, default=0, help="ELBO levels (0: the model's T)")
    ap.add_argument("--grid", default=None, help="ELBO grid (default: trained; uniform for "
                    "continuous-time models)")
    ap.add_argument("--algorithm", type=int, choices=(1, 2), default=1,
                    help="the reverse model of the bound (docs/method.md, 'Likelihood')")
    ap.add_argument("--hidden", type=lambda s: [float(x) for x in s.split(",") if x],
                    default=[0.1, 0.3, 0.5])
    ap.add_argument("--add_nodes", type=int, default=10)
    ap.add_argument("--num_samples", type=int, default=8, help="completions per graph")
    ap.add_argument("--resample", type=lambda s: tuple(int(x) for x in s.split(",")),
                    default=(4, 3), help="RePaint JUMP,ROUNDS (0,0: only without)")
    ap.add_argument("--num_steps", type=int, default=0, help="completion steps (0: config)")
    ap.add_argument("--option", action="append", default=[], help="sampler option NAME=VALUE")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    args = ap.parse_args(argv)
    if len(args.resample) != 2:
        ap.error("--resample: expected JUMP,ROUNDS")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    nll_rows = []
    for item in args.nll_workdir:
        name, sep, path = item.partition("=")
        name, path = (name, path) if sep else (os.path.basename(item.rstrip("/")), item)
        nll_rows.append(nll_row(name, path, args))
        print(json.dumps(nll_rows[-1]), flush=True)
    comp_rows, comp_info = [], None
    if args.completion_workdir:
        comp_rows, comp_info = completion_rows(args)
        for r in comp_rows:
            print(json.dumps({k: v for k, v in r.items() if k != "sampler"}), flush=True)
    md = markdown(nll_rows, comp_rows, comp_info)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"command": "python " + " ".join(sys.argv), "nll": nll_rows,
                   "completion": comp_rows, "completion_info": comp_info}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
