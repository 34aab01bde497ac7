"""Why generated SBM graphs fail the SPECTRE SBM test: per graph, the fitted blocks and the
first rule of the test that each failing graph breaks, beside the same for real graphs.

    python benchmarks/sbm_failures.py --reference spectre_sbm:test \
        --generated docs/results/samples/spectre_sbm_epoch1900_seed0.json ... \
        --out docs/results/sbm_failures_epoch1900

The test (``ddgjax.metrics.validity.sbm_blocks_pass``) fits blocks (graph-tool when it is
found, else ddgjax's fit; the output names it), then asks in order:

1. ``blocks``: 2 to 5 fitted blocks;
2. ``sizes``: every block 20 to 40 nodes;
3. ``wald``: mean Wald p-value over the block pairs > 0.9 (intra 0.3, inter 0.005).

A graph failing rule 3 is further described by its estimated intra and inter edge
probabilities (mean over blocks / block pairs). Writes ``OUT.json`` (per graph and
summaries) and ``OUT.md`` (the table).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.evaluate import load_graphs  # noqa: E402
from ddgjax.metrics.sbm_fit import sbm_partitions  # noqa: E402
from ddgjax.metrics.validity import (sbm_block_counts, sbm_first_failure,  # noqa: E402
                                     sbm_wald_pvalue)

RULES = ("blocks", "sizes", "wald")


def describe(g, blocks) -> dict:
    """The fitted blocks of one graph and the first rule it breaks (None: valid)."""
    sizes, e = sbm_block_counts(g, blocks)
    n_b = len(sizes)
    row = {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "num_blocks": n_b,
           "sizes": [int(s) for s in sizes]}
    if n_b == 0:
        return {**row, "fails": "blocks"}
    intra = np.diag(e) / np.maximum(sizes * (sizes - 1), 1)
    off = ~np.eye(n_b, dtype=bool)
    inter = (e / np.maximum(np.outer(sizes, sizes), 1))[off] if n_b > 1 else np.zeros(0)
    row.update(p_intra=float(intra.mean()),
               p_inter=float(inter.mean()) if inter.size else float("nan"),
               wald_p=sbm_wald_pvalue(sizes, e))
    row["fails"] = sbm_first_failure(sizes, e)
    return row


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    out = {"graphs": n, "valid": sum(r["fails"] is None for r in rows) / n}
    for rule in RULES:
        out[f"fails_{rule}"] = sum(r["fails"] == rule for r in rows) / n
    for key in ("nodes", "edges", "num_blocks", "p_intra", "p_inter", "wald_p"):
        vals = np.array([r.get(key, np.nan) for r in rows], np.float64)
        out[f"{key}_mean"] = float(np.nanmean(vals))
    out["min_block_mean"] = float(np.mean([min(r["sizes"]) if r["sizes"] else 0 for r in rows]))
    out["max_block_mean"] = float(np.mean([max(r["sizes"]) if r["sizes"] else 0 for r in rows]))
    # graphs failing the Wald rule only: which side of the estimate is off
    wald = [r for r in rows if r["fails"] == "wald"]
    out["wald_failures_inter_above_0.005"] = sum(r["p_inter"] > 0.005 for r in wald)
    out["wald_failures_intra_below_0.3"] = sum(r["p_intra"] < 0.3 for r in wald)
    return out


SIZE_CLASSES = ((1, 65), (66, 97), (98, 129), (130, 187))  # the training buckets' ranges


def by_size(rows: list[dict]) -> list[dict]:
    """Valid share, mean fitted blocks and failures per node-count class."""
    out = []
    for lo, hi in SIZE_CLASSES:
        rs = [r for r in rows if lo <= r["nodes"] <= hi]
        if rs:
            out.append({"nodes": f"{lo}-{hi}", "graphs": len(rs),
                        "valid": sum(r["fails"] is None for r in rs) / len(rs),
                        "num_blocks_mean": float(np.mean([r["num_blocks"] for r in rs])),
                        **{f"fails_{k}": sum(r["fails"] == k for r in rs) for k in RULES}})
    return out


def write_markdown(result: dict, path: str) -> str:
    """The summary table and the by-size table of ``result``, written to ``path``."""
    cols = [("graphs", "{:d}"), ("valid", "{:.1%}"), ("fails_blocks", "{:.1%}"),
            ("fails_sizes", "{:.1%}"), ("fails_wald", "{:.1%}"), ("nodes_mean", "{:.1f}"),
            ("edges_mean", "{:.1f}"), ("num_blocks_mean", "{:.2f}"),
            ("min_block_mean", "{:.1f}"), ("max_block_mean", "{:.1f}"),
            ("p_intra_mean", "{:.3f}"), ("p_inter_mean", "{:.4f}"), ("wald_p_mean", "{:.3f}")]
    lines = [f"SBM test, fit: {result['fit']}", "",
             "| set | " + " | ".join(c for c, _ in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for name, s in result["sets"].items():
        lines.append(f"| {name} | " + " | ".join(fmt.format(s['summary'][c]) for c, fmt in cols)
                     + " |")
    lines += ["", "By node count:", "",
              "| set | nodes | graphs | valid | mean fitted blocks | fails blocks / sizes / wald |",
              "|---|---|---|---|---|---|"]
    for name, s in result["sets"].items():
        for r in by_size(s["graphs"]):
            lines.append(f"| {name} | {r['nodes']} | {r['graphs']} | {r['valid']:.0%} | "
                         f"{r['num_blocks_mean']:.1f} | {r['fails_blocks']} / {r['fails_sizes']}"
                         f" / {r['fails_wald']} |")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", default="spectre_sbm:test", metavar="PATH[:SPLIT]")
    ap.add_argument("--generated", nargs="+", help="JSON graph lists")
    ap.add_argument("--fit", default=None, choices=["graph-tool", "ddgjax", "auto"])
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--markdown_only", action="store_true",
                    help="rewrite OUT.md from an existing OUT.json (no fit)")
    args = ap.parse_args()
    if args.markdown_only:
        with open(args.out + ".json") as f:
            print(write_markdown(json.load(f), args.out + ".md"))
        return
    if not args.generated:
        ap.error("--generated is required (unless --markdown_only)")

    sets = {"reference " + args.reference: load_graphs(args.reference, "--reference")[0]}
    generated = []
    for path in args.generated:
        generated += load_graphs(path, "--generated")[0]
    sets["generated"] = generated
    result = {"reference": args.reference, "generated": args.generated, "sets": {}}
    for name, graphs in sets.items():
        blocks, label = sbm_partitions(graphs, fit=args.fit)
        rows = [describe(g, b) for g, b in zip(graphs, blocks)]
        result["fit"] = label
        result["sets"][name] = {"summary": summarize(rows), "graphs": rows}
        print(name, json.dumps(result["sets"][name]["summary"]), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    print(write_markdown(result, args.out + ".md"))


if __name__ == "__main__":
    main()
