"""Check committed samples from the files alone: MMDs against a dataset's test split
(our evaluation) and validity, uniqueness and novelty recomputed with networkx.

    python benchmarks/check_samples.py --data planar_60 --protocol paper \\
        docs/results/planar_60/samples_seed0.json.gz
    python benchmarks/check_samples.py --data spectre_planar_64 --protocol spectre \\
        docs/results/spectre_planar_64/samples_seed{0,1,2,3,4}.json.gz

Files are JSON graph lists, gzip-compressed when the name ends in ``.gz``. One row per
file, then the mean and standard deviation over the files. Nothing about the model or
the sampler is read: only the graphs.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ddgjax.data import load_dataset, read_graph_list  # noqa: E402
from ddgjax.metrics import evaluate_generated  # noqa: E402

KEYS = ("degree", "clustering", "orbit", "spectral", "avg", "avg_ratio", "valid", "unique",
        "novel", "vun",
        "rbf_degree", "rbf_clustering", "rbf_orbit", "rbf_spectral", "pgd", "pgd_degree",
        "pgd_clustering", "pgd_orbit", "pgd_spectral",
        "degree_ratio", "clustering_ratio", "orbit_ratio", "spectral_ratio")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--data", required=True, help="dataset name or file (its test split is "
                    "the reference, its training split the novelty set)")
    ap.add_argument("--protocol", default="paper", choices=["paper", "spectre", "spectre_emd", "polygraph"])
    ap.add_argument("--validity", default="planar", choices=["planar", "sbm", "lobster", "none"],
                    help="none: no validity rule (no V.U.N.)")
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    ap.add_argument("--grid", default="", help="also draw a PNG here: 8 test graphs, then 8 "
                    "graphs of each of the first 4 files")
    args = ap.parse_args()
    ds = load_dataset(args.data)
    rows, grid = {}, [("test split", list(ds.test[:8]))]
    for path in args.files:
        graphs = read_graph_list(path).graphs
        if len(grid) < 5:
            grid.append((os.path.basename(path), list(graphs[:8])))
        ev = evaluate_generated(graphs, ds.test, protocol=args.protocol, train=ds.train,
                                validity=None if args.validity == "none" else args.validity)
        rows[path] = {"num_graphs": len(graphs), **{k: ev[k] for k in KEYS if k in ev}}
        for key in ("sbm_fit", "pgd_descriptor"):  # which SBM fit decided validity; which
            if key in ev:                          # descriptor gave PGD
                rows[path][key] = ev[key]
        print(os.path.basename(path), json.dumps({k: round(v, 5) if isinstance(v, float) else v
                                                  for k, v in rows[path].items()}), flush=True)
    keys = [k for k in KEYS if all(k in r and r[k] is not None for r in rows.values())]
    summary = {k: {"mean": float(np.mean([r[k] for r in rows.values()])),
                   "std": float(np.std([r[k] for r in rows.values()]))} for k in keys}
    print("mean ± std over files:", ", ".join(f"{k} {v['mean']:.4g} ± {v['std']:.2g}"
                                             for k, v in summary.items()))
    if args.grid:
        from ddgjax.plotting import draw_graph_grid
        draw_graph_grid(args.grid, grid)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"data": args.data, "protocol": args.protocol, "validity": args.validity,
                       "files": rows, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
