"""Per-graph sums of the mixing kernels' per-tile statistics: ``jax.ops.segment_sum`` (a
scatter-add: ``ddgjax.models.common.graph_sums_from_tile_parts``, what the kernels use)
against a static gather that XLA fuses into one reduction (``gather_sums``, here only: it
ran at half the scatter's speed on an H200 in round 70, against the scatter of the parts
interleaved; the helper concatenates them), at the Planar-60 sampling shape.

    python benchmarks/tile_sums.py [--graphs 1024] [--nodes 60] [--tile_rows 64] [--out F]

Each version: checked against float64 sums of random parts, then timed as one jitted
``lax.scan`` over 16 different input sets (so no launch gap or cache reuse counts), median
of ``--reps`` device-synchronised calls after a warm-up, divided by 16.
Prints and writes ``{"shape": ..., "rows": [{"version", "ms", "rel_err"}]}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ddgjax.models.common import graph_sums_from_tile_parts  # noqa: E402


def tile_part_index(tiles: int, tile_rows: int, nodes_sq: int) -> np.ndarray:
    """int32 ``[G, K]``: graph ``g``'s parts among the ``2 * tiles`` parts ``[T, 2]`` (part
    ``2 t`` tile ``t``'s rows in the graph of its first row, ``2 t + 1`` those in the next
    graph), padded with ``2 * tiles`` (out of range)."""
    graphs = tiles * tile_rows // nodes_sq
    first = (np.arange(tiles) * tile_rows) // nodes_sq
    ids = np.stack([first, np.minimum(first + 1, graphs - 1)], axis=1).reshape(-1)
    counts = np.bincount(ids, minlength=graphs)
    order = np.argsort(ids, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    index = np.full((graphs, int(counts.max())), 2 * tiles, np.int32)
    index[ids[order], np.arange(2 * tiles) - starts[ids[order]]] = order
    return index


def gather_sums(partial, tile_rows: int, nodes_sq: int):
    """``graph_sums_from_tile_parts`` by a static gather and a sum over its parts."""
    tiles, _, h = partial.shape
    parts = partial.reshape(tiles * 2, 2, h)
    index = jnp.asarray(tile_part_index(tiles, tile_rows, nodes_sq))
    return jnp.take(parts, index, axis=0, mode="fill", fill_value=0).sum(axis=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--tile_rows", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    nodes_sq = a.nodes * a.nodes
    tiles = a.graphs * nodes_sq // a.tile_rows
    stack = jax.random.normal(jax.random.key(0), (16, tiles, 4, a.hidden), jnp.float32)
    rows = []
    for scatter in (True, False):
        fn = graph_sums_from_tile_parts if scatter else gather_sums
        one = lambda p, fn=fn: fn(p, a.tile_rows, nodes_sq)
        f = jax.jit(one)
        scan = jax.jit(lambda ps: jax.lax.scan(lambda c, p: (c + one(p), None),
                                               jnp.zeros_like(one(ps[0])), ps)[0])
        check = np.asarray(stack[0], np.float64)
        graphs = tiles * a.tile_rows // nodes_sq
        want = np.zeros((graphs, 2, a.hidden))
        first = np.arange(tiles) * a.tile_rows // nodes_sq
        np.add.at(want, first, check[:, :2])
        np.add.at(want, np.minimum(first + 1, graphs - 1), check[:, 2:])
        got = np.asarray(f(stack[0]), np.float64)
        rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        scan(stack).block_until_ready()
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            scan(stack).block_until_ready()
            times.append(time.perf_counter() - t0)
        rows.append({"version": "scatter" if scatter else "gather",
                     "ms": 1e3 * float(np.median(times)) / 16, "rel_err": rel})
        print(rows[-1], flush=True)
    res = {"device": str(jax.devices()[0].device_kind),
           "shape": [tiles, 4, a.hidden], "graphs": a.graphs, "tile_rows": a.tile_rows,
           "bytes_in": tiles * 4 * a.hidden * 4, "rows": rows}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
