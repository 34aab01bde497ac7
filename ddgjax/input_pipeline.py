"""The training input pipeline: dataset -> padded training split -> per-step batch indices.

The small training sets live on the device whole (``device_copy``); each step
gathers its batch by index, so the host only ships ``int32[S, B]`` indices.
Batches are drawn per epoch from a permutation that depends only on
``(seed, epoch)``, so a resumed run sees the same batches as an unbroken one.
Size buckets (``config.data.buckets``) are ``ddgjax.buckets``.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from ddgjax.data import Dataset, load_dataset, max_num_nodes, node_count_distribution
from ddgjax.graphs import GraphBatch, graphs_to_batch


def load_training_data(config) -> tuple[Dataset, GraphBatch, int]:
    """Load ``config.data`` and pad its training split.

    Returns ``(dataset, batch, max_nodes)``; ``max_nodes`` is ``config.data.max_nodes``
    or, if 0, the largest graph of any split. Raises ValueError naming the source
    if the training split is empty.
    """
    ds = load_dataset(config.data.source, allow_pickle=config.data.allow_pickle)
    if not ds.train:
        raise ValueError(f"{config.data.source}: the training split is empty")
    max_nodes = config.data.max_nodes or max_num_nodes(ds.train + ds.test + ds.val)
    batch = graphs_to_batch(ds.train, max_nodes, source=f"{config.data.source} (train split)")
    return ds, batch, max_nodes


def dataset_record(source: str, ds: Dataset, max_nodes: int) -> dict:
    """What a trained run must remember of its data (``dataset.json``): the source,
    split sizes, ``max_nodes``, the training split's node-count distribution and a
    digest of its graphs (so a resumed run can tell whether its data changed)."""
    return {"source": source, "name": ds.name, "max_nodes": int(max_nodes),
            "num_train": len(ds.train), "num_test": len(ds.test), "num_val": len(ds.val),
            "node_counts": node_count_distribution(ds.train).to_dict(),
            "train_digest": graphs_digest(ds.train)}


def graphs_digest(graphs) -> str:
    """SHA-256 (hex, first 16 characters) of a list of graphs: node counts and sorted edges,
    in list order."""
    h = hashlib.sha256()
    for g in graphs:
        edges = sorted((min(u, v), max(u, v)) for u, v in g.edges())
        h.update(f"{g.number_of_nodes()}:{edges};".encode())
    return h.hexdigest()[:16]


def device_copy(batch: GraphBatch) -> GraphBatch:
    """The training split with one empty graph appended (index ``G``), used as batch padding.

    ``[G, N, N]``, ``[G, N]`` -> ``[G+1, N, N]``, ``[G+1, N]`` (numpy).
    """
    out = []
    for a in (batch.adj, batch.node_mask):
        padded = np.zeros((a.shape[0] + 1,) + a.shape[1:], a.dtype)
        padded[:-1] = a
        out.append(padded)
    return GraphBatch(*out)


def steps_per_epoch(num_graphs: int, batch_size: int) -> int:
    """``ceil(num_graphs / batch_size)``: an epoch's steps (the last batch padded)."""
    return math.ceil(num_graphs / batch_size)


def epoch_batches(num_graphs: int, batch_size: int, seed: int, epoch: int) -> np.ndarray:
    """``int32[steps, batch_size]`` shuffled graph indices of one epoch.

    The permutation depends only on (seed, epoch). The last batch is padded
    with index ``num_graphs`` (the empty graph of ``device_copy``).
    """
    perm = np.random.default_rng([seed, epoch]).permutation(num_graphs)
    steps = steps_per_epoch(num_graphs, batch_size)
    idx = np.full(steps * batch_size, num_graphs, dtype=np.int32)
    idx[:num_graphs] = perm
    return idx.reshape(steps, batch_size)


def batches_for_epochs(num_graphs: int, batch_size: int, seed: int, first_epoch: int,
                       end_epoch: int) -> np.ndarray:
    """``int32[S, batch_size]``: the batches of epochs ``first_epoch .. end_epoch - 1`` in order."""
    return np.concatenate([epoch_batches(num_graphs, batch_size, seed, e)
                           for e in range(first_epoch, end_epoch)])
