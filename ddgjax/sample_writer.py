"""Sample a trained run into a directory: graphs, pictures and, against the test
split, the MMDs. The library side of ``sample.py``.

A sample directory holds ``samples.json`` (the JSON graph-list format, with the
sampling settings under ``generated_by``), ``grid.png`` (generated vs training
graphs), optionally ``graphml/`` (one file per graph) and ``chain.png`` (the
reverse chain of a few graphs), and, where the dataset has a test split and a
protocol is asked for, ``eval.json``.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import networkx as nx

from ddgjax.data import load_dataset, write_graph_list
from ddgjax.plotting import chain_rows, draw_graph_grid
from ddgjax.reporting import write_json_atomic
from ddgjax.sampling import Run, generate


def write_sample_dir(run: Run, out_dir: str, *, num_samples: int, seed: int, batch_size: int,
                     num_steps: int | None = None, sampler_options: dict | None = None,
                     graphml: bool = False, chain_png: int = 0, protocol: str = "paper",
                     record: dict | None = None,
                     progress: Callable[[int, int], None] | None = None) -> dict:
    """Sample ``num_samples`` graphs of ``run`` into ``out_dir``; returns a summary dict.

    ``record`` (e.g. the workdir and checkpoint) is stored with the samples.
    The summary has the sampling settings and speed (``info``), the generated
    graphs (``graphs``), and the evaluation (``eval``, or None when skipped).
    """
    sampler_options = sampler_options or {}
    os.makedirs(out_dir, exist_ok=True)
    res = generate(run, num_samples, seed=seed, batch_size=batch_size, num_steps=num_steps,
                   progress=progress, **sampler_options)
    graphs = res["graphs"]
    info = {**(record or {}), "checkpoint_epoch": run.meta.get("epoch"), "seed": seed,
            "algorithm": res["algorithm"], "num_steps": res["num_steps"],
            "num_samples": num_samples, "graphs_per_second": res["graphs_per_second"],
            "compile_seconds": res["compile_seconds"], "sampler": res["sampler"]}
    write_graph_list(os.path.join(out_dir, "samples.json"), graphs, name="samples",
                     generated_by=info)
    if graphml:
        gdir = os.path.join(out_dir, "graphml")
        os.makedirs(gdir, exist_ok=True)
        for i, g in enumerate(graphs):
            nx.write_graphml(g, os.path.join(gdir, f"sample_{i:05d}.graphml"))
    cfg = run.config
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    draw_graph_grid(os.path.join(out_dir, "grid.png"),
                    [("generated", graphs[:8]), ("training", ds.train[:8])])
    if chain_png > 0:
        ch = generate(run, chain_png, seed=seed, batch_size=chain_png, num_steps=num_steps,
                      return_chain=True, **sampler_options)
        draw_graph_grid(os.path.join(out_dir, "chain.png"), chain_rows(ch["chain"],
                                                                        ch["num_nodes"]))
    ev = None
    if protocol != "none" and ds.test:
        from ddgjax.metrics import evaluate_generated

        t0 = time.time()
        ev = evaluate_generated(graphs, ds.test, protocol=protocol, train=ds.train)
        ev["eval_seconds"] = time.time() - t0
        ev.update(info)
        write_json_atomic(os.path.join(out_dir, "eval.json"), ev)
    return {"info": info, "result": res, "graphs": graphs, "eval": ev}
