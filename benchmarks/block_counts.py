"""The number of blocks graph-tool's SBM fit finds in sampled graphs, against the number
asked for (a model conditioned on ``communities``; docs/conditional.md, "Results"), and
why graphs fail the SBM validity test (docs/results.md, "PolyGraph SBM-L and Lobster-L").

    python benchmarks/block_counts.py OUT/communities3_w1.json.gz --want 3 [--sweeps 100]
    python benchmarks/block_counts.py docs/results/samples/sbm_l_seed0.json.gz --failures --first 128

Prints and (``--out``) writes per file: the share of graphs whose fit has exactly the
requested number of blocks, the mean block count, the histogram. The fit is
``minimize_blockmodel_dl`` plus ``--sweeps`` merge-split sweeps (PolyGraph's 100).
``--failures`` adds why graphs fail the SBM validity test: how many break each rule
first (``blocks``: not 2-5 blocks, ``sizes``: a block outside 20-40 nodes, ``wald``: the
mean Wald p-value at most 0.9; ``valid``: none), with ``--want`` optional.
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
from ddgjax.metrics.validity import sbm_block_counts, sbm_first_failure  # noqa: E402


def block_count_row(graphs, want: int | None, runtime, sweeps: int,
                    failures: bool = False) -> dict:
    """``{"share", "mean_blocks", "histogram"}`` of the fitted block counts of ``graphs``
    (``share`` only with a ``want``), and with ``failures`` the count of graphs breaking
    each rule of the SBM validity test first (``sbm_first_failure``; ``valid``: none)."""
    blocks = graph_tool_blocks(graphs, runtime, refinement_steps=sweeps)
    counts = np.asarray([len(set(b.tolist()) - {-1}) for b in blocks])
    hist = {int(k): int(v) for k, v in zip(*np.unique(counts, return_counts=True))}
    row = {"want": want, "num_graphs": len(graphs), "mean_blocks": float(counts.mean()),
           "histogram": hist}
    if want:
        row["share"] = float(np.mean(counts == want))
    if failures:
        first = [sbm_first_failure(*sbm_block_counts(g, b)) or "valid"
                 for g, b in zip(graphs, blocks)]
        row["first_failure"] = {k: first.count(k) for k in ("valid", "blocks", "sizes", "wald")}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--want", type=int, default=0,
                    help="the requested count (0: read it from the file name, ...<k>_w...)")
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--failures", action="store_true",
                    help="also count which rule of the SBM validity test each graph breaks first")
    ap.add_argument("--first", type=int, default=0, help="only the first N graphs of each file")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    runtime = find_graph_tool()
    if runtime is None:
        raise SystemExit("graph-tool not found (docs/evaluation.md says how to install it)")
    rows = []
    for path in args.files:
        named = re.search(r"(\d+)_w", os.path.basename(path))
        want = args.want or (int(named.group(1)) if named else None)
        if want is None and not args.failures:
            ap.error(f"{path}: no requested count in the name (...<k>_w...); pass --want")
        graphs = read_graph_list(path).graphs[:args.first or None]
        row = {"file": path, **block_count_row(graphs, want, runtime, args.sweeps,
                                               args.failures)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"graph_tool": runtime.version, "sweeps": args.sweeps, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
