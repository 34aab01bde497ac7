"""The training input pipeline: dataset -> padded training split -> per-step batch indices.

The small training sets live on the device whole (``device_copy``); each step
gathers its batch by index, so the host only ships ``int32[S, B]`` indices.
Batches are drawn per epoch from a permutation that depends only on
``(seed, epoch)``, so a resumed run sees the same batches as an unbroken one.

Size buckets (``config.data.buckets``; docs/method.md, "Size buckets"): the
training graphs are split by node count into buckets of sizes ``N_1 < ... < N_K``
(each graph in the smallest that holds it), each bucket padded only to its own
``N_b`` with a batch size that grows as ``N_b`` shrinks (:func:`plan_buckets`), and an
epoch is every bucket's batches in a seeded interleaved order
(:func:`bucket_epoch_batches`), or with ``config.data.bucket_order = "sizes"`` bucket
by bucket in size order (:func:`sized_bucket_batches`: the same batches, an order
that lets whole epochs run as one program); each step carries a loss weight that
keeps the epoch's gradient the pair-weighted mean over all training graphs.
"""
from __future__ import annotations

import hashlib
import math
from typing import NamedTuple

import numpy as np

from ddgjax.configuration import BUCKET_ORDERS, parse_buckets

from ddgjax.data import Dataset, load_dataset, max_num_nodes, node_count_distribution
from ddgjax.graphs import GraphBatch, graphs_to_batch


def load_training_data(config) -> tuple[Dataset, GraphBatch, int]:
    """Load ``config.data`` and pad its training split.

    Returns ``(dataset, batch, max_nodes)``; ``max_nodes`` is ``config.data.max_nodes``
    or, if 0, the largest graph of any split. Raises ValueError naming the source
    if the training split is empty.
    """
    ds = load_dataset(config.data.source, seed=config.data.seed,
                      allow_pickle=config.data.allow_pickle)
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


def device_copy_shapes(batch: GraphBatch) -> tuple[tuple, tuple]:
    """``((shape, dtype) of adj, (shape, dtype) of node_mask)`` of ``device_copy(batch)``,
    without making the copy: ``[G+1, N, N]``, ``[G+1, N]``."""
    return tuple(((a.shape[0] + 1,) + a.shape[1:], a.dtype)
                 for a in (batch.adj, batch.node_mask))


def device_copy(batch: GraphBatch) -> GraphBatch:
    """The training split with one empty graph appended (index ``G``), used as batch padding.

    ``[G, N, N]``, ``[G, N]`` -> ``[G+1, N, N]``, ``[G+1, N]`` (numpy; ``device_copy_shapes``).
    """
    out = []
    for a, (shape, dtype) in zip((batch.adj, batch.node_mask), device_copy_shapes(batch)):
        padded = np.zeros(shape, dtype)
        padded[:-1] = a
        out.append(padded)
    return GraphBatch(*out)


def steps_per_epoch(num_graphs: int, batch_size: int) -> int:
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


# ----------------------------------------------------------------------------
# Size buckets


def bucket_bounds(spec, node_counts, max_nodes: int) -> tuple[int, ...]:
    """The bucket sizes ``N_1 < ... < N_K = max_nodes`` of ``config.data.buckets``.

    ``spec`` as :func:`ddgjax.configuration.parse_buckets` reads it (a string, int or
    tuple); ``node_counts`` the training split's node-count distribution
    (``ddgjax.data.NodeCountDistribution``, what a run records, so sampling finds the
    same sizes as training). ``K`` quantile buckets: ``N_k`` is the smallest training node
    count with at least the fraction ``k/K`` of the training graphs at or below it
    (repeated sizes merge, so fewer than K buckets may come out). Explicit sizes are
    clipped to ``max_nodes``. ``max_nodes`` is always the last size, so every graph
    the model can take has a bucket. Returns ``()`` when buckets are off.
    """
    spec = parse_buckets(spec)
    if not spec:
        return ()
    if isinstance(spec, tuple):
        sizes = {min(int(n), int(max_nodes)) for n in spec}
    else:
        counts = np.asarray(node_counts.counts)
        cdf = np.cumsum(np.asarray(node_counts.probs, dtype=np.float64))
        sizes = {int(counts[min(np.searchsorted(cdf, k / spec - 1e-9), len(counts) - 1)])
                 for k in range(1, spec + 1)}
    return tuple(sorted(sizes | {int(max_nodes)}))


def assign_buckets(num_nodes, bounds) -> np.ndarray:
    """``int[G]``: for each node count, the index of the smallest bucket size >= it."""
    num_nodes = np.asarray(num_nodes)
    if num_nodes.size and num_nodes.max() > bounds[-1]:
        raise ValueError(f"a graph of {num_nodes.max()} nodes is larger than the largest "
                         f"bucket ({bounds[-1]})")
    return np.searchsorted(np.asarray(bounds), num_nodes, side="left")


def bucket_batch_cap(batch_size: int, max_nodes: int, size: int) -> int:
    """The most graphs of bucket size ``size`` per step: ``floor(B * (max_nodes / size)^2)``,
    so a step holds about as many padded pairs (the activations' memory) as a step of
    ``batch_size`` graphs at ``max_nodes``."""
    return max(1, int(math.floor(batch_size * (max_nodes / size) ** 2 + 1e-9)))


class BucketPlan(NamedTuple):
    """How the training split trains in size buckets (:func:`plan_buckets`).

    Only buckets holding training graphs appear. Per bucket ``b``: ``sizes[b]`` its node
    count ``N_b``; ``members[b]`` the training-graph indices it holds (ascending);
    ``batch_sizes[b]`` graphs per step; ``steps[b]`` its steps per epoch; ``weights[b]``
    the loss weight of its steps; ``pairs[b]`` the real node pairs of its graphs.
    """

    sizes: tuple
    members: tuple
    batch_sizes: tuple
    steps: tuple
    weights: tuple
    pairs: tuple

    @property
    def steps_per_epoch(self) -> int:
        return int(sum(self.steps))

    def describe(self) -> list[dict]:
        """One JSON-able row per bucket."""
        return [{"nodes": int(n), "graphs": int(len(m)), "batch": int(b), "steps": int(s),
                 "weight": float(w)}
                for n, m, b, s, w in zip(self.sizes, self.members, self.batch_sizes,
                                         self.steps, self.weights)]


def plan_buckets(num_nodes, bounds, batch_size: int, max_nodes: int,
                 num_devices: int = 1) -> BucketPlan:
    """Assign the training graphs (``num_nodes[G]``) to buckets and size their batches.

    Batch rule, per bucket of size ``N_b`` holding ``G_b`` graphs: at most
    ``cap = bucket_batch_cap(B, max_nodes, N_b)`` graphs a step, so
    ``steps_b = ceil(G_b / cap)``, and the bucket's graphs are spread evenly over them:
    ``B_b = ceil(G_b / steps_b)``, rounded up to a multiple of ``num_devices``.
    (A bucket at ``max_nodes`` gets at most ``B``; without buckets that is the plain
    batch.) Loss weight: a step's loss is the per-pair mean of its batch, as without
    buckets, times ``w_b = (P_b / P) * (S / steps_b)`` with ``P_b`` the real pairs of
    the bucket, ``P`` of the training split and ``S`` the steps of an epoch, so that the
    epoch's summed gradient weighs every pair alike, as uniform batches would. That
    holds exactly for plain SGD; the weight multiplies the gradient before the
    optimizer, so gradient clipping and Adam's normalisation see the weighted gradient
    and the equality is only approximate there (a heavy bucket is clipped more often).
    """
    num_nodes = np.asarray(num_nodes, dtype=np.int64)
    which = assign_buckets(num_nodes, bounds)
    pairs_of = num_nodes * (num_nodes - 1) / 2.0
    sizes, members, batches, steps, pairs = [], [], [], [], []
    for b, size in enumerate(bounds):
        m = np.flatnonzero(which == b).astype(np.int32)
        if not m.size:
            continue
        cap = bucket_batch_cap(batch_size, max_nodes, size)
        n_steps = math.ceil(m.size / cap)
        bsz = math.ceil(m.size / n_steps)
        bsz = math.ceil(bsz / num_devices) * num_devices
        sizes.append(int(size))
        members.append(m)
        batches.append(int(bsz))
        steps.append(int(math.ceil(m.size / bsz)))
        pairs.append(float(pairs_of[m].sum()))
    total_steps, total_pairs = sum(steps), max(sum(pairs), 1.0)
    weights = [p / total_pairs * total_steps / s for p, s in zip(pairs, steps)]
    return BucketPlan(tuple(sizes), tuple(members), tuple(batches), tuple(steps),
                      tuple(weights), tuple(pairs))


def bucket_data(batch: GraphBatch, plan: BucketPlan) -> list[GraphBatch]:
    """Each bucket's graphs padded to its size, with the empty padding graph appended
    (``device_copy``): ``[G_b + 1, N_b, N_b]``, ``[G_b + 1, N_b]`` (numpy)."""
    return [device_copy(GraphBatch(batch.adj[m, :n, :n], batch.node_mask[m, :n]))
            for n, m in zip(plan.sizes, plan.members)]


def bucket_epoch_batches(plan: BucketPlan, seed: int, epoch: int, order: str = "random"):
    """One epoch in buckets: ``(bucket int32[S], batches, weights float32[S])``.

    Step ``s`` trains bucket ``bucket[s]`` on ``batches[s]`` (``int32[B_b]``, indices into
    that bucket's arrays of :func:`bucket_data`; its last batch is padded with index
    ``G_b``, the empty graph) with loss weight ``weights[s]``. Every training graph
    appears once; graphs are shuffled within their bucket, drawn from ``(seed, epoch)``
    only. ``order`` (``BUCKET_ORDERS``): ``"random"`` interleaves the buckets' steps in
    an order drawn from ``(seed, epoch)`` too; ``"sizes"`` takes them bucket by bucket,
    smallest first. Both orders give each bucket the same batches.
    """
    if order not in BUCKET_ORDERS:
        raise ValueError(f"bucket order {order!r}: expected one of {BUCKET_ORDERS}")
    rng = np.random.default_rng([seed, epoch, len(plan.sizes)])
    per_bucket = []
    for m, bsz, steps in zip(plan.members, plan.batch_sizes, plan.steps):
        idx = np.full(steps * bsz, m.size, dtype=np.int32)
        idx[:m.size] = rng.permutation(m.size)
        per_bucket.append(idx.reshape(steps, bsz))
    buckets = np.repeat(np.arange(len(plan.sizes)), plan.steps).astype(np.int32)
    if order == "random":
        buckets = rng.permutation(buckets).astype(np.int32)
    taken = [0] * len(plan.sizes)
    batches = []
    for b in buckets:
        batches.append(per_bucket[b][taken[b]])
        taken[b] += 1
    weights = np.asarray(plan.weights, dtype=np.float32)[buckets]
    return buckets, batches, weights


def bucket_batches_for_epochs(plan: BucketPlan, seed: int, first_epoch: int, end_epoch: int):
    """:func:`bucket_epoch_batches` of epochs ``first_epoch .. end_epoch - 1``, concatenated."""
    parts = [bucket_epoch_batches(plan, seed, e) for e in range(first_epoch, end_epoch)]
    return (np.concatenate([p[0] for p in parts]), [b for p in parts for b in p[1]],
            np.concatenate([p[2] for p in parts]))


def sized_bucket_batches(plan: BucketPlan, seed: int, first_epoch: int,
                         end_epoch: int) -> list[np.ndarray]:
    """The batches of epochs ``first_epoch .. end_epoch - 1`` in size order, per bucket:
    ``int32[E, steps_b, B_b]`` for bucket ``b`` (``E = end_epoch - first_epoch``), i.e.
    :func:`bucket_epoch_batches` with ``order="sizes"``, grouped by bucket."""
    starts = np.concatenate([[0], np.cumsum(plan.steps)])
    out = [[] for _ in plan.sizes]
    for e in range(first_epoch, end_epoch):
        _, batches, _ = bucket_epoch_batches(plan, seed, e, "sizes")
        for b in range(len(plan.sizes)):
            out[b].append(np.stack(batches[starts[b]:starts[b + 1]]))
    return [np.stack(o).astype(np.int32) for o in out]


def sized_step_weights(plan: BucketPlan) -> np.ndarray:
    """``float32[S]``: the loss weights of one epoch's steps in size order."""
    return np.repeat(np.asarray(plan.weights, dtype=np.float32), plan.steps)
