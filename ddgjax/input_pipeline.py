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
import os

import numpy as np

from ddgjax.data import (BUNDLED_NAMES, Dataset, load_dataset, max_num_nodes,
                         node_count_distribution)
from ddgjax.data.datasets import BUILTIN_PREFIX, MIX_PREFIX
from ddgjax.data.large_sets import LARGE_NAMES
from ddgjax.graphs import GraphBatch, GraphFormatError, graphs_to_batch


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
    for pos, g in enumerate(ds.train):
        if g.number_of_nodes() > max_nodes:
            index = ds.index["train"][pos] if ds.index else pos
            raise GraphFormatError(
                f"{config.data.source}: graph {index} (of the file, in its train split) has "
                f"{g.number_of_nodes()} nodes, more than config.data.max_nodes = {max_nodes}")
    batch = graphs_to_batch(ds.train, max_nodes, source=f"{config.data.source} (train split)")
    return ds, batch, max_nodes


def training_conditions(config, ds: Dataset):
    """The :class:`ddgjax.conditioning.Conditions` of ``config.condition`` over the training
    split (None: an unconditional run). Raises ConditionError naming the graph that lacks
    a label or property, ValueError naming ``config.condition.dropout`` out of [0, 1)."""
    from ddgjax.conditioning import conditions_from_graphs, parse_condition_on

    c = config.condition
    if not 0.0 <= float(c.dropout) < 1.0:
        raise ValueError(f"config.condition.dropout: expected a probability in [0, 1), got "
                         f"{c.dropout!r}")
    use_label, properties = parse_condition_on(c.on)
    return conditions_from_graphs(
        ds.train, use_label, properties,
        source=f"{config.data.source} (train split)",
        indices=ds.index.get("train") if ds.index else None)


def dataset_record(source: str, ds: Dataset, max_nodes: int) -> dict:
    """What a trained run must remember of its data (``dataset.json``): the source as
    given, the absolute ``path`` of a data file or directory (None for bundled, large,
    builtin and ``mix:`` sources; see :func:`data_path`), split sizes, ``max_nodes``, the
    training split's node-count distribution, and digests of the training split and of all the data (so a resumed
    run, or an evaluation, can tell whether the data changed wherever it now lies)."""
    return {"source": source, "path": data_path(source), "name": ds.name,
            "max_nodes": int(max_nodes),
            "num_train": len(ds.train), "num_test": len(ds.test), "num_val": len(ds.val),
            "node_counts": node_count_distribution(ds.train).to_dict(),
            "train_digest": graphs_digest(ds.train), "data_digest": data_digest(ds)}


def data_path(source: str) -> str | None:
    """The absolute path a source reads, or None for a dataset named by the package (bundled,
    large or ``builtin:NAME``) and for a ``mix:NAME1,...`` source. A mix has no one path:
    where its components are files, they are found again by the source as written
    (relative paths from the working directory), and the record's ``data_digest`` still
    tells whether their content changed."""
    if (source in BUNDLED_NAMES or source in LARGE_NAMES or source.startswith(BUILTIN_PREFIX)
            or source.startswith(MIX_PREFIX)):
        return None
    return os.path.abspath(os.path.expanduser(source))


def data_digest(ds: Dataset) -> str:
    """Digest of a dataset's content: each split's graphs (``graphs_digest``), in order."""
    parts = "|".join(graphs_digest(graphs) for graphs in (ds.train, ds.test, ds.val))
    return hashlib.sha256(parts.encode()).hexdigest()[:16]


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

    ``[G, N, N]``, ``[G, N]`` (, ``cond [G, D]``) -> ``[G+1, N, N]``, ``[G+1, N]``
    (, ``[G+1, D]``, the padding graph's condition the null one) (numpy).
    """
    out = []
    for a in batch:
        if a is None:
            out.append(None)
            continue
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
