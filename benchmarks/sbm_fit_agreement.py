"""Our SBM fit against graph-tool's, graph by graph (issue 13, item 2).

Graph sets: the three splits of SPECTRE's SBM dataset, and stand-ins for generated
graphs, ``--num_standin`` each: the first test graphs with a fraction of their edges
rewired to random non-edges (5%, 10%, 20%); Erdos-Renyi graphs with those graphs'
node and edge counts; fresh draws from SPECTRE's generator (2-5 blocks of 20-40
nodes, p = 0.3 / 0.005).
For each set and fit: the SBM pass rate; per set, the agreement rate (both pass or
both fail) and the confusion table (graph-tool rows, ours columns).

    python benchmarks/sbm_fit_agreement.py --out docs/results/sbm_fit/agreement.json \\
        --graph_tool_cache /tmp/sbm_gt_blocks.json

graph-tool's fit takes about 5 s of CPU per graph (1000 merge-split sweeps); the cache
file keeps its blocks so that reruns (e.g. after changing our fit) skip it, and
``graph_tool_seconds`` is then null. Needs graph-tool
somewhere (ddgjax.metrics.graph_tool_bridge says where it looks).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import networkx as nx
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.data import read_graph_list, select_split  # noqa: E402
from ddgjax.metrics.sbm_fit import (dc_description_length,  # noqa: E402
                                    own_fit_on_benchmark_vertices, resolve_sbm_fit,
                                    sbm_partitions)
from ddgjax.metrics.validity import (sbm_block_counts, sbm_blocks_pass,  # noqa: E402
                                     sbm_wald_pvalue)

DATA = os.path.join(REPO, "..", "shared", "data", "spectre_sbm.json")
REWIRE_FRACTIONS = (0.05, 0.10, 0.20)
# Variants of our fit compared with graph-tool: name -> fit_sbm keyword arguments.
OUR_VARIANTS = {
    "ndc (before)": {"model": "ndc", "split_moves": False},
    "dc": {"model": "dc", "split_moves": False},
    "dc + split moves": {"model": "dc", "split_moves": True},
}


def rewire(g: nx.Graph, fraction: float, rng: np.random.Generator) -> nx.Graph:
    """``g`` with ``round(fraction * m)`` edges moved to uniformly random non-edges."""
    h = nx.Graph()
    h.add_nodes_from(range(g.number_of_nodes()))
    edges = list(g.edges)
    k = int(round(fraction * len(edges)))
    drop = set(rng.choice(len(edges), size=k, replace=False).tolist())
    h.add_edges_from(e for i, e in enumerate(edges) if i not in drop)
    n = h.number_of_nodes()
    while h.number_of_edges() < len(edges):
        i, j = rng.integers(n, size=2)
        if i != j and not g.has_edge(i, j) and not h.has_edge(i, j):
            h.add_edge(int(i), int(j))
    return h


def spectre_like_sbm(rng: np.random.Generator) -> nx.Graph:
    """One draw of SPECTRE's SBM generator: 2-5 blocks of 20-40 nodes, p 0.3 / 0.005."""
    sizes = rng.integers(20, 41, size=int(rng.integers(2, 6)))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    p = np.where(labels[:, None] == labels[None, :], 0.3, 0.005)
    u = np.triu(rng.random(p.shape) < p, 1)
    g = nx.Graph()
    g.add_nodes_from(range(len(labels)))
    g.add_edges_from(zip(*np.nonzero(u)))
    return g


def graph_sets(seed: int = 0, num_standin: int = 20) -> dict:
    """name -> list of graphs (module docstring); stand-ins from the first test graphs."""
    ds = read_graph_list(DATA)
    sets = {s: list(select_split(ds, s)) for s in ("train", "val", "test")}
    base = sets["test"][:num_standin]
    rng = np.random.default_rng(seed)
    for f in REWIRE_FRACTIONS:
        sets[f"test_rewired_{int(f * 100)}pct"] = [rewire(g, f, rng) for g in base]
    sets["er_like_test"] = [nx.gnm_random_graph(g.number_of_nodes(), g.number_of_edges(),
                                                seed=int(rng.integers(1 << 30)))
                            for g in base]
    sets["fresh_sbm"] = [spectre_like_sbm(rng) for _ in range(num_standin)]
    return sets


def graph_key(g: nx.Graph) -> str:
    """A content hash of a graph (nodes in order, edges) for the cache."""
    idx = {v: i for i, v in enumerate(g.nodes)}
    edges = sorted(tuple(sorted((idx[u], idx[v]))) for u, v in g.edges)
    return hashlib.sha1(json.dumps([g.number_of_nodes(), edges]).encode()).hexdigest()


def fit_details(graphs, blocks) -> list:
    """Per graph: ``{"valid", "num_blocks", "sizes", "pvalue", "dc_dl"}`` from its labels.

    ``dc_dl`` is the description length graph-tool minimises (nats, on the nodes the
    fit saw), so two fits of one graph can be compared on graph-tool's own objective.
    """
    out = []
    for g, b in zip(graphs, blocks):
        sizes, e = sbm_block_counts(g, b)
        keep = np.asarray(b) >= 0
        adj = nx.to_numpy_array(g, nodelist=list(g.nodes))[np.ix_(keep, keep)]
        out.append({"valid": bool(sbm_blocks_pass(sizes, e)), "num_blocks": int(len(sizes)),
                    "sizes": sorted(int(s) for s in sizes),
                    "pvalue": round(float(sbm_wald_pvalue(sizes, e)), 4) if len(sizes) else 0.0,
                    "dc_dl": round(dc_description_length(adj, np.asarray(b)[keep]), 2)
                    if keep.any() else None})
    return out


def agreement(gt_valid, our_valid) -> dict:
    """Pass rates, agreement rate and the confusion table of two validity masks."""
    a = np.asarray(gt_valid, bool)
    b = np.asarray(our_valid, bool)
    return {"num_graphs": int(len(a)), "graph_tool_pass": float(a.mean()),
            "ddgjax_pass": float(b.mean()), "agreement": float((a == b).mean()),
            "confusion": {"both_pass": int((a & b).sum()), "graph_tool_only": int((a & ~b).sum()),
                          "ddgjax_only": int((~a & b).sum()), "both_fail": int((~a & ~b).sum())}}


def graph_tool_blocks_cached(graphs, cache: dict, seed: int, steps: int):
    """graph-tool's blocks for ``graphs``, fitting only those missing from ``cache``.

    Returns ``(blocks, num_fitted)``.
    """
    keys = [f"{graph_key(g)}:{seed}:{steps}" for g in graphs]
    todo = [i for i, k in enumerate(keys) if k not in cache]
    if todo:
        blocks, _ = sbm_partitions([graphs[i] for i in todo], fit="graph-tool", seed=seed,
                                   refinement_steps=steps)
        for i, b in zip(todo, blocks):
            cache[keys[i]] = b.tolist()
    return [np.asarray(cache[k]) for k in keys], len(todo)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(REPO, "docs/results/sbm_fit/agreement.json"))
    p.add_argument("--graph_tool_cache", default=None, help="JSON file of graph-tool blocks")
    p.add_argument("--seed", type=int, default=0, help="seed of both fits")
    p.add_argument("--refinement_steps", type=int, default=1000)
    p.add_argument("--sets", default=None, help="comma-separated subset of the graph sets")
    p.add_argument("--num_standin", type=int, default=20,
                   help="graphs per stand-in set (rewired, ER, fresh draws)")
    args = p.parse_args()

    _, gt_label = resolve_sbm_fit("graph-tool")
    cache = {}
    if args.graph_tool_cache and os.path.exists(args.graph_tool_cache):
        with open(args.graph_tool_cache) as f:
            cache = json.load(f)
    sets = graph_sets(seed=0, num_standin=args.num_standin)
    if args.sets:
        sets = {k: sets[k] for k in args.sets.split(",")}
    report = {"graph_tool": gt_label, "ddgjax_variants": OUR_VARIANTS, "seed": args.seed,
              "refinement_steps": args.refinement_steps, "sets": {}}
    for name, graphs in sets.items():
        t0 = time.time()
        gt_blocks, fitted = graph_tool_blocks_cached(graphs, cache, args.seed,
                                                     args.refinement_steps)
        t_gt = time.time() - t0
        if args.graph_tool_cache:
            with open(args.graph_tool_cache, "w") as f:
                json.dump(cache, f)
        gt_det = fit_details(graphs, gt_blocks)
        row = {"num_graphs": len(graphs),
               "graph_tool_pass": float(np.mean([d["valid"] for d in gt_det])),
               "graph_tool_seconds": round(t_gt, 1) if fitted == len(graphs) else None,
               "graph_tool_valid": "".join("1" if d["valid"] else "0" for d in gt_det),
               "ddgjax": {}}
        for variant, kwargs in OUR_VARIANTS.items():
            t0 = time.time()
            our_blocks = [own_fit_on_benchmark_vertices(g, seed=args.seed, **kwargs)
                          for g in graphs]
            t_ours = time.time() - t0
            our_det = fit_details(graphs, our_blocks)
            res = agreement([d["valid"] for d in gt_det], [d["valid"] for d in our_det])
            del res["num_graphs"], res["graph_tool_pass"]
            res["same_num_blocks"] = float(np.mean([a["num_blocks"] == b["num_blocks"]
                                                    for a, b in zip(gt_det, our_det)]))
            res["ddgjax_valid"] = "".join("1" if d["valid"] else "0" for d in our_det)
            res["seconds_per_graph"] = round(t_ours / len(graphs), 3)
            dis = [{"index": i, "graph_tool": a, "ddgjax": b}
                   for i, (a, b) in enumerate(zip(gt_det, our_det)) if a["valid"] != b["valid"]]
            res["disagreements_where_graph_tool_dl_is_higher"] = sum(
                d["graph_tool"]["dc_dl"] is not None and d["ddgjax"]["dc_dl"] is not None
                and d["graph_tool"]["dc_dl"] > d["ddgjax"]["dc_dl"] for d in dis)
            res["disagreements"] = dis
            row["ddgjax"][variant] = res
            print(f"{name:22s} n={len(graphs):3d} gt={row['graph_tool_pass']:.3f} "
                  f"{variant:17s} ours={res['ddgjax_pass']:.3f} agree={res['agreement']:.3f} "
                  f"{res['confusion']} dl_higher={res['disagreements_where_graph_tool_dl_is_higher']}",
                  flush=True)
        report["sets"][name] = row
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
