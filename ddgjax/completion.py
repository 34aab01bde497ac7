"""Graph completion with a trained bit-flip model (host side): check the partly known
adjacencies, pad them into fixed-shape batches, run the jitted completion sampler
(``ddgjax.processes.bitflip.inpainting``), convert to graphs.

A request is a list of ``(adjacency [n, n] 0/1, known [n, n] bool)`` pairs; completion
``s`` of input ``g`` uses the key ``fold_in(key(seed), g * num_samples + s)``, so results
do not depend on the batch size. The two common masks: ``extend_graph`` (``k`` new nodes,
every pair touching them unknown) and ``hide_pairs`` (a random fraction of the pairs
unknown). docs/method.md, "Graph completion".
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from ddgjax.graphs import batch_to_graphs, node_mask_from_counts
from ddgjax.processes.bitflip.inpainting import completer
from ddgjax.sampling import Run, SamplingError, graph_keys


def check_completion_input(adjacency, known, max_nodes: int,
                           where: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Validate one request; returns ``(adj float32 [n, n], known bool [n, n])`` with the
    diagonal of both cleared and the adjacency zero on unknown pairs.

    SamplingError (prefixed by ``where``, e.g. the file and graph) unless: both are square
    ``[n, n]`` arrays of the same shape, ``1 <= n <= max_nodes``; ``adjacency`` holds only 0/1
    (or booleans); ``known`` holds booleans or 0/1 and is symmetric; ``adjacency`` is
    symmetric on the known pairs. The diagonal is ignored. A ``networkx.Graph`` with nodes
    ``0..n-1`` may stand for the adjacency.
    """
    if isinstance(adjacency, nx.Graph):
        try:
            adjacency = _as_adjacency(adjacency)
        except ValueError as e:
            raise SamplingError(f"{where}{e}") from e
    adj = np.asarray(adjacency)
    kn = np.asarray(known)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise SamplingError(f"{where}adjacency: expected a square [n, n] array, got shape "
                            f"{adj.shape}")
    if kn.shape != adj.shape:
        raise SamplingError(f"{where}known: expected the adjacency's shape {adj.shape}, got "
                            f"{kn.shape}")
    n = adj.shape[0]
    if n < 1 or n > max_nodes:
        raise SamplingError(f"{where}adjacency: {n} nodes; this model makes graphs of 1.."
                            f"{max_nodes} nodes (max_nodes={max_nodes})")
    if not np.isin(adj, (0, 1)).all():
        raise SamplingError(f"{where}adjacency: expected 0/1 entries, got values "
                            f"{sorted(set(np.unique(adj).tolist()) - {0, 1})[:5]}")
    if kn.dtype != bool:
        if not np.isin(kn, (0, 1)).all():
            raise SamplingError(f"{where}known: expected a boolean (or 0/1) mask")
        kn = kn.astype(bool)
    off = ~np.eye(n, dtype=bool)
    kn = kn & off
    if not np.array_equal(kn, kn.T):
        i, j = np.argwhere(kn != kn.T)[0]
        raise SamplingError(f"{where}known: the mask must be symmetric; known[{i}, {j}] = "
                            f"{bool(kn[i, j])} but known[{j}, {i}] = {bool(kn[j, i])}")
    adj = (adj != 0) & off
    both = kn & (adj != adj.T)
    if both.any():
        i, j = np.argwhere(both)[0]
        raise SamplingError(f"{where}adjacency: not symmetric on known pair ({i}, {j}): "
                            f"adjacency[{i}, {j}] = {int(adj[i, j])}, adjacency[{j}, {i}] = "
                            f"{int(adj[j, i])}")
    return (adj & kn).astype(np.float32), kn


def extend_graph(graph, new_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(adjacency, known)`` for adding ``new_nodes`` nodes to ``graph`` (a
    ``networkx.Graph`` with nodes ``0..n-1`` or an ``[n, n]`` adjacency): the old pairs are
    known, every pair touching a new node (``n .. n + k - 1``) is unknown."""
    adj = _as_adjacency(graph)
    n, k = len(adj), int(new_nodes)
    if k < 0:
        raise ValueError(f"new_nodes: expected a non-negative count, got {new_nodes}")
    out = np.zeros((n + k, n + k), np.uint8)
    out[:n, :n] = adj
    known = np.zeros((n + k, n + k), bool)
    known[:n, :n] = True
    np.fill_diagonal(known, False)
    return out, known


def hide_pairs(graph, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(adjacency, known)`` with ``round(fraction * P)`` of the ``P`` pairs of ``graph``
    unknown, chosen uniformly at random (seeded)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction: expected a value in [0, 1], got {fraction}")
    adj = _as_adjacency(graph)
    n = len(adj)
    iu = np.triu_indices(n, 1)
    P = len(iu[0])
    hidden = np.random.default_rng(seed).permutation(P)[:int(round(fraction * P))]
    upper = np.ones(P, bool)
    upper[hidden] = False
    known = np.zeros((n, n), bool)
    known[iu] = upper
    return adj, known | known.T


def _as_adjacency(graph) -> np.ndarray:
    if isinstance(graph, nx.Graph):
        n = graph.number_of_nodes()
        if set(graph.nodes) != set(range(n)):
            raise ValueError("graph: expected nodes 0..n-1 (relabel with "
                             "networkx.convert_node_labels_to_integers)")
        return nx.to_numpy_array(graph, nodelist=range(n), dtype=np.uint8, weight=None)
    return np.asarray(graph).astype(np.uint8)


_COMPILED: dict = {}


def compiled_completer(model, comp):
    """Jitted ``(params, keys [B], adj [B, N, N], known [B, N, N], node_mask [B, N]) -> [B, N, N]``,
    one per (model, completer), so each batch shape compiles once."""
    key = (model, comp)
    if key not in _COMPILED:
        def run(params, keys, adj, known, node_mask):
            denoise = lambda a, m, t, s: model.apply(params, a, m, t, s)
            return comp(denoise, keys, adj, known, node_mask)

        _COMPILED[key] = jax.jit(run)
    return _COMPILED[key]


def complete(run: Run, requests, num_samples: int = 16, seed: int = 0, batch_size: int = 256,
             num_steps: int | None = None, resample_jump: int = 0, resample_rounds: int = 0,
             where=None, progress=None, **sampler_options) -> dict:
    """Complete every ``(adjacency, known)`` request ``num_samples`` times.

    Args:
      requests: ``(adjacency [n, n], known [n, n])`` pairs (``check_completion_input``).
      num_steps, sampler_options: the sampler's levels and options, as for ``generate``
        (``None`` values: the run's defaults).
      resample_jump, resample_rounds: RePaint resampling (both 0: off).
      where: optional ``where(g) -> str`` naming request ``g`` in errors (file and index).
    Returns a dict: ``adj`` (``uint8[G, S, N, N]``), ``num_nodes`` (``[G]``), ``graphs``
    (``G`` lists of ``S`` networkx graphs), ``sampler`` (the settings), ``seconds``.
    """
    import time

    if num_samples < 1:
        raise SamplingError(f"num_samples: expected a positive number, got {num_samples}")
    if batch_size < 1:
        raise SamplingError(f"batch_size: expected a positive number, got {batch_size}")
    where = where or (lambda g: f"graph {g}: ")
    checked = [check_completion_input(a, k, run.max_nodes, where(g))
               for g, (a, k) in enumerate(requests)]
    if not checked:
        raise SamplingError("completion: no graphs given")
    options = {k: v for k, v in sampler_options.items() if v is not None}
    try:
        comp = completer(run.process, num_steps or None, resample_jump, resample_rounds,
                         **options)
    except ValueError as e:
        raise SamplingError(str(e)) from e
    fn = compiled_completer(run.model, comp)
    N, G, S = run.max_nodes, len(checked), int(num_samples)
    total = G * S
    bs = min(batch_size, total)
    out = []
    t0 = time.time()
    for lo in range(0, total, bs):
        jobs = range(lo, min(lo + bs, total))
        adj = np.zeros((bs, N, N), np.float32)
        known = np.zeros((bs, N, N), bool)
        counts = np.zeros(bs, np.int32)
        for r, j in enumerate(jobs):
            a, k = checked[j // S]
            n = len(a)
            adj[r, :n, :n], known[r, :n, :n], counts[r] = a, k, n
        res = fn(run.params, graph_keys(seed, lo, bs), jnp.asarray(adj), jnp.asarray(known),
                 jnp.asarray(node_mask_from_counts(counts, N)))
        out.append(np.asarray(res, np.uint8)[:len(jobs)])
        if progress is not None:
            progress(jobs[-1] + 1, total)
    adj = np.concatenate(out).reshape(G, S, N, N)
    num_nodes = np.array([len(a) for a, _ in checked], np.int32)
    graphs = [batch_to_graphs(adj[g], np.full(S, num_nodes[g])) for g in range(G)]
    return {"adj": adj, "num_nodes": num_nodes, "graphs": graphs, "sampler": comp.info,
            "seconds": time.time() - t0, "batches": math.ceil(total / bs)}


# ----------------------------------------------------------------------------
# Mask files (``ddgjax-sample --complete GRAPHS.json --known MASKS.json``)


def read_masks(path: str, num_nodes) -> list[np.ndarray]:
    """The known-pair masks of a MASKS.json file, one per input graph.

    Format: ``{"masks": [MASK, ...]}`` (or a bare list), the ``g``-th mask for the ``g``-th
    graph, where ``MASK`` is ``{"unknown": [[i, j], ...]}`` (these pairs are sampled, all
    others known) or ``{"known": [[i, j], ...]}`` (these pairs are known, all others
    sampled); pairs are unordered, ``0 <= i != j < n``.

    Args: num_nodes: ``[G]`` node counts of the graphs. Returns ``G`` bool ``[n, n]`` masks.
    Raises SamplingError naming the file, the mask and the field.
    """
    import json

    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise SamplingError(f"{path}: not a JSON file ({e})") from e
    masks = data.get("masks") if isinstance(data, dict) else data
    if not isinstance(masks, list):
        raise SamplingError(f"{path}: expected a list of masks or an object with field 'masks'")
    if len(masks) != len(num_nodes):
        raise SamplingError(f"{path}: field 'masks' has {len(masks)} masks for "
                            f"{len(num_nodes)} graphs; expected one mask per graph")
    out = []
    for g, (rec, n) in enumerate(zip(masks, num_nodes)):
        where = f"{path}: mask {g}"
        fields = [k for k in ("unknown", "known") if isinstance(rec, dict) and k in rec]
        if len(fields) != 1:
            raise SamplingError(f"{where}: expected an object with exactly one of the fields "
                                "'unknown' or 'known' (a list of [i, j] pairs)")
        field = fields[0]
        pairs = rec[field]
        marked = np.zeros((n, n), bool)
        if not isinstance(pairs, list):
            raise SamplingError(f"{where}: field {field!r} must be a list of [i, j] pairs")
        for p in pairs:
            ok = (isinstance(p, list) and len(p) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in p))
            if not ok or not (0 <= p[0] < n and 0 <= p[1] < n) or p[0] == p[1]:
                raise SamplingError(f"{where}: field {field!r}: bad pair {p!r}; expected [i, j] "
                                    f"with 0 <= i != j < {n} (the graph's node count)")
            marked[p[0], p[1]] = marked[p[1], p[0]] = True
        known = marked if field == "known" else ~marked
        np.fill_diagonal(known, False)
        out.append(known)
    return out


def write_masks(path: str, masks) -> None:
    """Write bool ``[n, n]`` masks as a MASKS.json file (their unknown pairs, ``i < j``)."""
    import json

    recs = [{"unknown": [[int(i), int(j)] for i, j in zip(*np.nonzero(np.triu(~m, 1)))]}
            for m in masks]
    with open(path, "w") as f:
        json.dump({"masks": recs}, f)
