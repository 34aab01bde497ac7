"""The number of blocks graph-tool's SBM fit finds in sampled graphs, against the number
asked for (a model conditioned on ``communities``; docs/results.md, "Conditional
generation").

    python benchmarks/block_counts.py OUT/communities3_w1.json.gz --want 3 [--sweeps 100]

Prints and (``--out``) writes per file: the share of graphs whose fit has exactly the
requested number of blocks, the mean block count, the histogram. The fit is
``minimize_blockmodel_dl`` plus ``--sweeps`` merge-split sweeps (PolyGraph's 100).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.data import read_graph_list  # noqa: E402
from ddgjax.metrics.graph_tool_bridge import find_graph_tool, graph_tool_blocks  # noqa: E402


def block_count_row(graphs, want: int, runtime, sweeps: int) -> dict:
    """``{"share", "mean_blocks", "histogram"}`` of the fitted block counts of ``graphs``."""
    counts = np.asarray([len(set(b.tolist()) - {-1})
                         for b in graph_tool_blocks(graphs, runtime, refinement_steps=sweeps)])
    hist = {int(k): int(v) for k, v in zip(*np.unique(counts, return_counts=True))}
    return {"want": want, "num_graphs": len(graphs), "share": float(np.mean(counts == want)),
            "mean_blocks": float(counts.mean()), "histogram": hist}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--want", type=int, default=0,
                    help="the requested count (0: read it from the file name, ...<k>_w...)")
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    runtime = find_graph_tool()
    if runtime is None:
        raise SystemExit("graph-tool not found (docs/evaluation.md says how to install it)")
    rows = []
    for path in args.files:
        want = args.want or int(re.search(r"(\d+)_w", os.path.basename(path)).group(1))
        row = {"file": path, **block_count_row(read_graph_list(path).graphs, want, runtime,
                                               args.sweeps)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"graph_tool": runtime.version, "sweeps": args.sweeps, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
