"""Would choosing among SBM training runs by their validation validity pick the better
test V.U.N.? (issue 13)

Each run's training log (``metrics_NAME.jsonl``) holds its validation evaluations: the
fraction of 128 samples that pass the SBM test with our fit, every few hundred epochs;
``checkpoints/best_val`` is the checkpoint of the highest. This reads, for every run in the
given folders, that best validation validity (the number a selection rule would see) and
the run's test V.U.N. from ``NAME_ourfit.json`` (and ``NAME_graph_tool.json`` where present:
``benchmarks/check_samples.py`` over its 5 x 40 samples from ``best_val``), then reports
the rank correlation between the two and what "keep the run with the best validation
validity" would have kept. Nothing here reads a test graph: it only joins files.

    python benchmarks/sbm_seed_selection.py docs/results/sbm/round51_53/r5{1,2,3} \
        [--only NAME,...] --out docs/results/sbm/seed_selection.json
"""
from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np


def best_validation(metrics_path: str) -> tuple[int, float, int]:
    """``(epoch, validity, evaluations)`` of the best validation evaluation in a training
    log: the highest ``valid``, ties to the lower average MMD (the rule ``best_val`` uses)."""
    evals = []
    with open(metrics_path) as f:
        for line in f:
            rec = json.loads(line)
            if "validation" in rec and rec["validation"].get("valid") is not None:
                evals.append((rec["epoch"], rec["validation"]))
    if not evals:
        raise ValueError(f"{metrics_path}: no validation evaluation with a 'valid' field")
    epoch, v = max(evals, key=lambda e: (e[1]["valid"], -e[1].get("avg", 0.0)))
    return epoch, float(v["valid"]), len(evals)


def scored_vun(path: str) -> float | None:
    """Mean V.U.N. over the sample files of a check_samples.py result (1024-step files,
    named ``*_T1024_*``, left out); None when the file is missing."""
    if not os.path.exists(path):
        return None
    files = json.load(open(path))["files"]
    vals = [r["vun"] for name, r in files.items() if "T1024" not in name]
    return float(np.mean(vals)) if vals else None


def rank_correlation(a, b) -> float:
    """Spearman's rho (average ranks for ties)."""
    def ranks(x):
        x = np.asarray(x, float)
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for v in np.unique(x):          # ties share their mean rank
            r[x == v] = r[x == v].mean()
        return r
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def collect(folders, only=None) -> list[dict]:
    rows = []
    for folder in folders:
        for m in sorted(glob.glob(os.path.join(folder, "metrics_*.jsonl"))):
            name = os.path.basename(m)[len("metrics_"):-len(".jsonl")]
            if only and name not in only:
                continue
            ours = scored_vun(os.path.join(folder, f"{name}_ourfit.json"))
            if ours is None:
                continue
            epoch, valid, n = best_validation(m)
            rows.append({"folder": folder, "name": name, "best_val_epoch": epoch,
                         "val_valid": valid, "val_evaluations": n, "test_vun_ourfit": ours,
                         "test_vun_graph_tool": scored_vun(
                             os.path.join(folder, f"{name}_graph_tool.json"))})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--only", default="", help="comma-separated run names to keep")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    rows = collect(args.folders, only)
    if len(rows) < 2:
        raise SystemExit(f"{args.folders}: fewer than two runs with both a training log and "
                         f"an _ourfit.json")
    val = [r["val_valid"] for r in rows]
    test = [r["test_vun_ourfit"] for r in rows]
    kept = max(rows, key=lambda r: r["val_valid"])
    summary = {"runs": len(rows), "spearman_val_vs_test": rank_correlation(val, test),
               "pearson_val_vs_test": float(np.corrcoef(val, test)[0, 1]),
               "kept_by_validation": kept["name"], "kept_test_vun_ourfit": kept["test_vun_ourfit"],
               "mean_test_vun_ourfit": float(np.mean(test)),
               "best_test_vun_ourfit": float(np.max(test)), "rows": rows}
    print("| run | folder | best validation validity (epoch, of n) | test V.U.N. our fit | graph-tool |")
    print("|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["val_valid"]):
        gt = r["test_vun_graph_tool"]
        print(f"| {r['name']} | {r['folder']} | {100 * r['val_valid']:.1f} % "
              f"({r['best_val_epoch']}, {r['val_evaluations']}) | "
              f"{100 * r['test_vun_ourfit']:.1f} % | "
              f"{'' if gt is None else f'{100 * gt:.1f} %'} |")
    print(f"runs {len(rows)}; Spearman {summary['spearman_val_vs_test']:.2f}, Pearson "
          f"{summary['pearson_val_vs_test']:.2f}; kept by validation: {kept['name']} "
          f"({100 * kept['test_vun_ourfit']:.1f} % on test; mean of all "
          f"{100 * summary['mean_test_vun_ourfit']:.1f} %, best "
          f"{100 * summary['best_test_vun_ourfit']:.1f} %)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
