"""Reaching graph-tool's SBM fit from ddgjax, in this interpreter or another one.

graph-tool is not on PyPI; Debian ships it for its own Python (``apt-get install
python3-graph-tool`` gives ``/usr/bin/python3`` the module), conda-forge for conda
environments. ddgjax therefore looks for it in this order:

1. ``$DDGJAX_GRAPH_TOOL_PYTHON``, when set: the interpreter to use (an empty value or
   ``none`` turns graph-tool off);
2. the running interpreter (``import graph_tool`` works);
3. ``/usr/bin/python3`` (Debian's package), when it can import graph-tool.

The fit itself lives in :mod:`ddgjax.metrics._graph_tool_worker` (imported here, or run
as a script by the other interpreter with the graphs as JSON on stdin, all graphs in one
call). :func:`graph_tool_blocks` returns one label array per graph; the Wald test is
done by :mod:`ddgjax.metrics.validity` whichever fit produced the blocks.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, Sequence

import networkx as nx
import numpy as np

ENV_VAR = "DDGJAX_GRAPH_TOOL_PYTHON"
SYSTEM_PYTHONS = ("/usr/bin/python3",)
WORKER = Path(__file__).with_name("_graph_tool_worker.py")
PROBE_TIMEOUT_S = 120


class GraphToolRuntime(NamedTuple):
    """Where graph-tool runs: ``python`` is None for this interpreter, else a path."""
    python: str | None
    version: str

    @property
    def label(self) -> str:
        """The fit's name in results, e.g. ``"graph-tool 2.45"``."""
        return f"graph-tool {self.version}"


def _probe_interpreter(python: str) -> str | None:
    """graph-tool's version under ``python``, or None if it cannot import it."""
    if not python or not Path(python).exists():
        return None
    try:
        out = subprocess.run([python, str(WORKER)], input=json.dumps({"version_only": True}),
                             capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    try:
        return str(json.loads(out.stdout)["version"])
    except (ValueError, KeyError):
        return None


def _in_process_version() -> str | None:
    """graph-tool's version if this interpreter imports it, else None."""
    try:
        from ddgjax.metrics import _graph_tool_worker
        return _graph_tool_worker.graph_tool_version()
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def find_graph_tool() -> GraphToolRuntime | None:
    """The graph-tool runtime to use (module docstring for the order), or None.

    Cached for the process; :func:`reset_graph_tool_cache` forgets the answer.
    """
    if ENV_VAR in os.environ:
        python = os.environ[ENV_VAR].strip()
        if python.lower() in ("", "none", "0", "off"):
            return None
        version = _probe_interpreter(python)
        return GraphToolRuntime(python, version) if version else None
    version = _in_process_version()
    if version:
        return GraphToolRuntime(None, version)
    for python in SYSTEM_PYTHONS:
        if Path(python).resolve() == Path(sys.executable).resolve():
            continue                      # this interpreter: already tried
        version = _probe_interpreter(python)
        if version:
            return GraphToolRuntime(python, version)
    return None


def reset_graph_tool_cache() -> None:
    """Forget which graph-tool runtime was found (after changing ``$DDGJAX_GRAPH_TOOL_PYTHON``)."""
    find_graph_tool.cache_clear()


def graph_to_request(g: nx.Graph) -> dict:
    """``{"n", "edges"}`` of ``g`` with nodes numbered in ``g.nodes`` order.

    That is the order the original benchmark's ``nx.adjacency_matrix(G)`` uses.
    """
    index = {v: i for i, v in enumerate(g.nodes)}
    edges = [[index[u], index[v]] for u, v in g.edges if u != v]
    return {"n": g.number_of_nodes(), "edges": edges}


def blocks_from_reply(result: dict, n: int) -> np.ndarray:
    """``int[n]`` labels from one worker result; -1 for nodes outside the fit.

    Nodes outside the fit are the trailing isolated ones (no graph-tool vertex) and
    every node of a graph whose fit failed.
    """
    out = np.full(n, -1, np.int64)
    if "blocks" in result:
        b = np.asarray(result["blocks"], np.int64)
        out[:len(b)] = b
    return out


class GraphToolError(RuntimeError):
    """graph-tool's interpreter could not be run or gave no usable answer."""


def _run_subprocess(python: str, request: dict) -> dict:
    out = subprocess.run([python, str(WORKER)], input=json.dumps(request),
                         capture_output=True, text=True)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise GraphToolError(f"graph-tool worker under {python} failed "
                             f"(exit {out.returncode}): {last}")
    try:
        return json.loads(out.stdout)
    except ValueError as err:
        raise GraphToolError(f"graph-tool worker under {python} wrote no JSON: {err}") from err


def graph_tool_blocks(graphs: Sequence[nx.Graph], runtime: GraphToolRuntime, seed: int = 0,
                      refinement_steps: int = 1000, workers: int | None = None):
    """graph-tool's block labels for every graph: ``list[int[n]]`` (-1 = not fitted).

    Args:
      graphs: the graphs (any node labels; ``g.nodes`` order numbers them).
      runtime: from :func:`find_graph_tool`.
      seed: seeds graph-tool and NumPy before each graph's fit.
      refinement_steps: merge-split sweeps after ``minimize_blockmodel_dl`` (the
        benchmark's validity uses 1000).
      workers: processes for the batch (default: all CPU cores).

    Raises:
      GraphToolError: the other interpreter failed or answered nonsense.
    """
    workers = int(workers or os.cpu_count() or 1)
    requests = [graph_to_request(g) for g in graphs]
    if runtime.python is None:
        from ddgjax.metrics import _graph_tool_worker
        results = _graph_tool_worker.fit_batch(requests, seed, refinement_steps, workers)
    else:
        reply = _run_subprocess(runtime.python, {"graphs": requests, "seed": seed,
                                                 "refinement_steps": refinement_steps,
                                                 "workers": workers})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(requests):
            raise GraphToolError(f"graph-tool worker under {runtime.python} returned "
                                 f"{'no' if results is None else len(results)} results "
                                 f"for {len(requests)} graphs")
    return [blocks_from_reply(r, q["n"]) for r, q in zip(results, requests)]
