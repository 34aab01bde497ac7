"""Our own SBM fit over many graphs in worker processes.

:func:`ddgjax.metrics.sbm_fit.own_fit_on_benchmark_vertices` is single-threaded Python
and NumPy, 0.1–0.2 s per SPECTRE SBM graph on a 2-core VM, and a training run's
validation fits every one of its samples (128 by default): SBM validations took ~24 s
each, against ~2 s of sampling, while the device
waited (the scoring now runs beside training, :mod:`ddgjax.validation`).

:func:`labels_in_workers` starts ``workers`` fresh interpreters (``python -m
ddgjax.metrics.sbm_fit_pool``), hands each a contiguous share of the graphs as JSON
(node count and edges by node position) and the fit's name on stdin and reads the block
labels back: the same labels as the fit in this process. (The fit is passed in, so
this module does not import :mod:`ddgjax.metrics.sbm_fit`, which uses it.) The workers run in their own session, so
a Ctrl-C on the terminal reaches only the caller (which may hold it until a checkpoint
is written, :func:`ddgjax.interrupts.deferred`); the caller kills them if it stops
first. A worker that fails makes the call fit in this process instead, with a warning.

``$DDGJAX_SBM_FIT_WORKERS`` sets the number of workers (1: no workers); by default
half the CPUs this process may use, at most 8. Calls with fewer than
``MIN_GRAPHS_PER_WORKER`` graphs per worker use fewer workers.
"""
from __future__ import annotations

import concurrent.futures
import importlib
import json
import os
import subprocess
import sys
import warnings
from typing import Callable, Sequence

import networkx as nx
import numpy as np

ENV_VAR = "DDGJAX_SBM_FIT_WORKERS"
MAX_DEFAULT_WORKERS = 8
MIN_GRAPHS_PER_WORKER = 4
# the worker's command line (a test points it at a failing command)
WORKER_COMMAND = (sys.executable, "-m", "ddgjax.metrics.sbm_fit_pool")
# workers are single-threaded: no BLAS threads on top of the processes, and no GPU
WORKER_ENV = {"JAX_PLATFORMS": "cpu", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


def fit_workers() -> int:
    """The number of worker processes: ``$DDGJAX_SBM_FIT_WORKERS``, else half the usable
    CPUs (at most ``MAX_DEFAULT_WORKERS``, at least 1). Raises ValueError naming the
    variable for a value that is not a whole number >= 1."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"${ENV_VAR}: expected a whole number of worker processes >= 1 "
                             f"(1: fit in this process), got {raw!r}")
        return n
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_WORKERS, cpus // 2))


def graph_record(g: nx.Graph) -> dict:
    """``{"n", "edges"}``: ``g`` with its nodes replaced by their positions in ``g.nodes``."""
    index = {v: i for i, v in enumerate(g.nodes)}
    return {"n": len(index), "edges": [[index[u], index[v]] for u, v in g.edges]}


def graph_from_record(record: dict) -> nx.Graph:
    """The graph of :func:`graph_record` (nodes ``0 .. n - 1`` in order)."""
    g = nx.Graph()
    g.add_nodes_from(range(int(record["n"])))
    g.add_edges_from((int(u), int(v)) for u, v in record["edges"])
    return g


def function_name(fn: Callable) -> str:
    """``"module:name"`` of a module-level function (what a worker imports)."""
    return f"{fn.__module__}:{fn.__qualname__}"


def function_from_name(name: str) -> Callable:
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def _fit_here(fit: Callable, graphs: Sequence[nx.Graph], seed: int) -> list[np.ndarray]:
    return [np.asarray(fit(g, seed=seed), np.int64) for g in graphs]


def labels_in_workers(fit: Callable, graphs: Sequence[nx.Graph], seed: int = 0,
                      workers: int | None = None) -> list[np.ndarray]:
    """``fit(g, seed=seed)`` (block labels ``int[n_i]`` in ``g.nodes`` order; ``fit`` a
    module-level function) of every graph, computed by up to ``workers`` (default
    :func:`fit_workers`) worker processes at once."""
    graphs = list(graphs)
    workers = fit_workers() if workers is None else int(workers)
    workers = min(workers, len(graphs) // MIN_GRAPHS_PER_WORKER)
    if workers < 2:
        return _fit_here(fit, graphs, seed)
    shares = np.array_split(np.arange(len(graphs)), workers)
    env = dict(os.environ, **WORKER_ENV)
    procs = []
    try:
        for share in shares:
            procs.append(subprocess.Popen(
                list(WORKER_COMMAND), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, start_new_session=True, text=True))
        requests = [json.dumps({"seed": int(seed), "fit": function_name(fit),
                                "graphs": [graph_record(graphs[i]) for i in share]})
                    for share in shares]
        with concurrent.futures.ThreadPoolExecutor(len(procs)) as pool:
            replies = list(pool.map(lambda pr: pr[0].communicate(pr[1]), zip(procs, requests)))
        out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(graphs)
        for proc, share, (stdout, stderr) in zip(procs, shares, replies):
            if proc.returncode != 0:
                last = (stderr.strip().splitlines() or ["no message"])[-1]
                raise RuntimeError(f"a worker exited with status {proc.returncode}: {last}")
            blocks = json.loads(stdout)["blocks"]
            if len(blocks) != len(share):
                raise RuntimeError(f"a worker returned {len(blocks)} partitions for "
                                   f"{len(share)} graphs")
            for i, b in zip(share, blocks):
                out[i] = np.asarray(b, np.int64)
        return out
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        warnings.warn(f"the SBM fit's worker processes failed ({err}); fitting in this "
                      f"process instead (${ENV_VAR}=1 skips the workers)", RuntimeWarning)
        return _fit_here(fit, graphs, seed)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _worker_main() -> None:
    request = json.load(sys.stdin)
    fits = _fit_here(function_from_name(request["fit"]),
                     [graph_from_record(r) for r in request["graphs"]], int(request["seed"]))
    json.dump({"blocks": [b.tolist() for b in fits]}, sys.stdout)


if __name__ == "__main__":
    _worker_main()
