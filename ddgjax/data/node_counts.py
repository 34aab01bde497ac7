"""Node counts: the largest one (for padding) and their empirical distribution.

Node counts for sampling come from :func:`node_count_distribution` of the
training split (the empirical distribution, i.e. "copy ``n`` from a random
training graph"), drawn with :func:`sample_node_counts`. The distribution
round-trips through JSON (:meth:`NodeCountDistribution.to_dict` /
:meth:`NodeCountDistribution.from_dict`) so that a run can store it.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import networkx as nx
import numpy as np


def max_num_nodes(graphs: Sequence[nx.Graph]) -> int:
    """Largest node count among ``graphs`` (ValueError for an empty list)."""
    if not graphs:
        raise ValueError("max_num_nodes of an empty graph list")
    return max(g.number_of_nodes() for g in graphs)


class NodeCountDistribution(NamedTuple):
    """Empirical distribution of node counts.

    Attributes:
      counts: ``int64[K]`` distinct node counts, ascending.
      probs: ``float64[K]`` their probabilities (sum 1).
    """

    counts: np.ndarray
    probs: np.ndarray

    def to_dict(self) -> dict:
        """JSON-serialisable ``{"counts": [int], "probs": [float]}``."""
        return {"counts": [int(c) for c in self.counts], "probs": [float(p) for p in self.probs]}

    @classmethod
    def from_dict(cls, d: dict) -> "NodeCountDistribution":
        """Inverse of :meth:`to_dict`; validates lengths, positivity and the sum."""
        counts = np.asarray(d["counts"], dtype=np.int64)
        probs = np.asarray(d["probs"], dtype=np.float64)
        if counts.ndim != 1 or counts.shape != probs.shape or counts.size == 0:
            raise ValueError(f"node-count distribution needs equally long non-empty 'counts' and "
                             f"'probs', got {counts.shape} and {probs.shape}")
        if np.any(counts < 1) or np.any(probs < 0) or not np.isclose(probs.sum(), 1.0):
            raise ValueError("node-count distribution needs counts >= 1 and probs >= 0 "
                             f"summing to 1, got sum {probs.sum()}")
        return cls(counts=counts, probs=probs / probs.sum())


def node_count_distribution(graphs: Sequence[nx.Graph]) -> NodeCountDistribution:
    """Empirical node-count distribution of ``graphs`` (normally the training split)."""
    if not graphs:
        raise ValueError("node_count_distribution of an empty graph list")
    sizes = np.asarray([g.number_of_nodes() for g in graphs], dtype=np.int64)
    counts, freq = np.unique(sizes, return_counts=True)
    return NodeCountDistribution(counts=counts, probs=freq / freq.sum())


def sample_node_counts(dist: NodeCountDistribution, num: int,
                       seed_or_rng: int | np.random.Generator) -> np.ndarray:
    """Draw ``num`` node counts i.i.d. from ``dist``.

    Args:
      dist: the distribution.
      num: how many counts.
      seed_or_rng: an int seed or a ``numpy.random.Generator`` (used in place).
    Returns: ``int32[num]``.
    """
    rng = np.random.default_rng(seed_or_rng)
    return rng.choice(dist.counts, size=int(num), p=dist.probs).astype(np.int32)
