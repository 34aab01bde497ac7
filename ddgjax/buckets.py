"""Size buckets: graphs grouped by node count, each group padded only to its own size.

``config.data.buckets`` (docs/method.md, "Size buckets") splits the node counts into
buckets of sizes ``N_1 < ... < N_K = max_nodes``; each graph belongs to the smallest
bucket that holds it. Training pads each bucket's graphs to its ``N_b`` with a batch
that grows as ``N_b`` shrinks (:func:`plan_buckets`) and takes an epoch as every
bucket's batches in a seeded interleaved order (:func:`bucket_epoch_batches`), each step
with a loss weight that keeps the epoch's gradient the pair-weighted mean over all
training graphs. Sampling finds the same sizes again from the node-count distribution a
run records (:func:`run_bucket_sizes`) and draws each bucket's graphs at its size
(:func:`sampling_groups`).

Everything here is host-side NumPy; nothing is jitted.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ddgjax.graphs import GraphBatch
from ddgjax.input_pipeline import device_copy

BUCKETS_FIELD = "config.data.buckets"


def parse_buckets(value) -> int | tuple[int, ...]:
    """``config.data.buckets`` -> 0 (off), ``K`` (that many quantile buckets of the
    training node counts) or an ascending tuple of bucket sizes (largest node count each
    bucket holds).

    The config field is a string, so that it survives the command line and
    ``config.json`` alike: ``""`` or ``"0"`` (off), ``"4"`` (K = 4), ``"64,96,128,187"``
    (explicit sizes; a single size needs a trailing comma, ``"128,"``). An int, list or
    tuple is read the same way. Raises ValueError naming the field for anything else.
    """
    bad = ValueError(f"{BUCKETS_FIELD}: expected '' (off), a number of quantile buckets "
                     f"('4') or comma-separated bucket sizes ('64,96,128,187'), got {value!r}")
    if value is None or isinstance(value, bool):
        if value:
            raise bad
        return 0
    if isinstance(value, str):
        text = value.strip().strip("()[]").strip()
        if not text:
            return 0
        if "," not in text:
            value = text
        else:
            value = [v for v in (p.strip() for p in text.split(",")) if v]
            if not value:
                raise bad
    try:
        if isinstance(value, (list, tuple)):
            sizes = [int(v) for v in value]
            if any(str(v).strip() != str(int(v)) for v in value if isinstance(v, str)):
                raise ValueError
            if any(n < 1 for n in sizes) or not sizes:
                raise bad
            return tuple(sorted(set(sizes)))
        k = int(value)
        if isinstance(value, float) and k != value:
            raise ValueError
    except (TypeError, ValueError):
        raise bad from None
    if k < 0:
        raise bad
    return k


def bucket_bounds(spec, node_counts, max_nodes: int) -> tuple[int, ...]:
    """The bucket sizes ``N_1 < ... < N_K = max_nodes`` of ``config.data.buckets``.

    ``spec`` as :func:`parse_buckets` reads it (a string, int or tuple); ``node_counts``
    the training split's node-count distribution (``ddgjax.data.NodeCountDistribution``,
    what a run records, so sampling finds the same sizes as training). ``K`` quantile
    buckets: ``N_k`` is the smallest training node count with at least the fraction
    ``k/K`` of the training graphs at or below it (repeated sizes merge, so fewer than K
    buckets may come out). Explicit sizes are clipped to ``max_nodes``. ``max_nodes`` is
    always the last size, so every graph the model can take has a bucket. Returns ``()``
    when buckets are off.
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


def run_bucket_sizes(config, node_counts, max_nodes: int) -> tuple[int, ...]:
    """The bucket sizes of a run: :func:`bucket_bounds` of its ``config.data.buckets``
    against its training node counts. Training and sampling both ask this, so a run
    samples in the buckets it trained in."""
    return bucket_bounds(config.data.buckets, node_counts, max_nodes)


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


# ----------------------------------------------------------------------------
# Training in buckets


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
                 num_devices: int = 1, max_batch: int = 0) -> BucketPlan:
    """Assign the training graphs (``num_nodes[G]``) to buckets and size their batches.

    Batch rule, per bucket of size ``N_b`` holding ``G_b`` graphs: at most
    ``cap = bucket_batch_cap(B, max_nodes, N_b)`` graphs a step (and at most
    ``max_batch`` when it is positive: small graphs then take more, smaller steps), so
    ``steps_b = ceil(G_b / cap)``, and the bucket's graphs are spread evenly over them:
    ``B_b = ceil(G_b / steps_b)``, rounded up to a multiple of ``num_devices``.
    (A bucket at ``max_nodes`` gets at most ``B``; without buckets that is the plain
    batch.) Loss weight: a step's loss is the per-pair mean of its batch, as without
    buckets, times ``w_b = (P_b / P) * (S / steps_b)`` with ``P_b`` the real pairs of
    the bucket, ``P`` of the training split and ``S`` the steps of an epoch, so that the
    epoch's summed gradient weighs every pair alike, as uniform batches would. That
    holds exactly for plain SGD; the weight multiplies the gradient before the
    optimizer, so Adam's normalisation sees the weighted gradient and the equality is
    only approximate there.
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
        if max_batch > 0:
            cap = min(cap, max_batch)
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
    (``input_pipeline.device_copy``): ``[G_b + 1, N_b, N_b]``, ``[G_b + 1, N_b]`` (numpy)."""
    return [device_copy(GraphBatch(batch.adj[m, :n, :n], batch.node_mask[m, :n],
                                   None if batch.cond is None else batch.cond[m]))
            for n, m in zip(plan.sizes, plan.members)]


def bucket_epoch_batches(plan: BucketPlan, seed: int, epoch: int):
    """One epoch in buckets: ``(bucket int32[S], batches, weights float32[S])``.

    Step ``s`` trains bucket ``bucket[s]`` on ``batches[s]`` (``int32[B_b]``, indices into
    that bucket's arrays of :func:`bucket_data`; its last batch is padded with index
    ``G_b``, the empty graph) with loss weight ``weights[s]``. Every training graph
    appears once; graphs are shuffled within their bucket and the buckets' steps
    interleaved, both drawn from ``(seed, epoch)`` only, so a resumed run sees the same
    steps as an unbroken one.
    """
    rng = np.random.default_rng([seed, epoch, len(plan.sizes)])
    per_bucket = []
    for m, bsz, steps in zip(plan.members, plan.batch_sizes, plan.steps):
        idx = np.full(steps * bsz, m.size, dtype=np.int32)
        idx[:m.size] = rng.permutation(m.size)
        per_bucket.append(idx.reshape(steps, bsz))
    buckets = np.repeat(np.arange(len(plan.sizes)), plan.steps)
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


# ----------------------------------------------------------------------------
# Sampling in buckets


def sampling_groups(node_counts: np.ndarray, max_nodes: int, bounds, batch_size: int,
                    num_devices: int) -> list[tuple[int, np.ndarray, int]]:
    """``[(N, request indices, batch size)]`` for a sampling request of ``node_counts[M]``.

    Without buckets (``bounds == ()``) one group at ``max_nodes``; else one per bucket
    holding requested graphs, each with batch ``bucket_batch_cap(batch_size, max_nodes,
    N)`` (as many padded pairs as ``batch_size`` graphs at ``max_nodes``), at most the
    group's size rounded up to a power of two; every batch a multiple of ``num_devices``.
    The power of two lets requests that draw other node counts (another seed) reuse a
    bucket's compiled shapes: at most ``log2(cap) + 1`` per bucket, instead of one per
    group size (the samples do not depend on the batch in float32; in bfloat16 a batch
    shape can move a few draws by rounding).
    """
    fit = lambda b, m: max(num_devices, int(math.ceil(min(b, m) / num_devices) * num_devices))
    if not bounds:
        return [(max_nodes, np.arange(len(node_counts)), fit(batch_size, len(node_counts)))]
    which = assign_buckets(node_counts, bounds)
    out = []
    for b, size in enumerate(bounds):
        idx = np.flatnonzero(which == b)
        if idx.size:
            cap = bucket_batch_cap(batch_size, max_nodes, size)
            out.append((int(size), idx, fit(cap, 1 << int(idx.size - 1).bit_length())))
    return out
