"""Evaluation metrics: graph statistics, MMDs under two protocols, validity, V.U.N.

Public API:

* :func:`compute_mmds` -- MMD^2 of degree, clustering, orbit (and spectral under
  ``spectre``) between reference and generated networkx graphs, plus ``avg``.
* :func:`evaluate_generated` -- the MMDs, their ratios to the train/test floor, and
  validity / uniqueness / novelty / V.U.N.
* :func:`orbit_counts` -- per-node ORCA orbit counts of a padded batch, in JAX.

The protocols, kernels and their provenance are described in ``docs/evaluation.md``
and in the docstrings of :mod:`ddgjax.metrics.mmd`, :mod:`ddgjax.metrics.validity` and
:mod:`ddgjax.metrics.sbm_fit`.
"""
from __future__ import annotations

from typing import Sequence

import networkx as nx

from ddgjax.metrics.mmd import (PROTOCOLS, KernelSpec, Protocol, compute_mmds, get_protocol,
                                kernel_matrix, mmd2, mmds_from_statistics, prepare_generated,
                                statistics_for)
from ddgjax.metrics.orbits import NUM_ORBITS, orbit_counts
from ddgjax.metrics.stats import GraphStatistics, graph_statistics, strip_graph
from ddgjax.metrics.sbm_fit import fit_sbm
from ddgjax.metrics.validity import (VALIDITY_KINDS, first_occurrence_mask, is_planar_valid,
                                     is_sbm_valid, novel_mask, vun_metrics)

__all__ = [
    "PROTOCOLS", "KernelSpec", "Protocol", "compute_mmds", "evaluate_generated",
    "get_protocol", "kernel_matrix", "mmd2", "mmds_from_statistics", "orbit_counts",
    "NUM_ORBITS", "GraphStatistics", "graph_statistics", "strip_graph", "VALIDITY_KINDS",
    "first_occurrence_mask", "fit_sbm", "is_planar_valid", "is_sbm_valid", "novel_mask",
    "vun_metrics",
]


def evaluate_generated(generated: Sequence[nx.Graph], reference: Sequence[nx.Graph],
                       protocol: str = "paper", train: Sequence[nx.Graph] | None = None,
                       validity: str | None = None) -> dict:
    """Everything we report about a set of generated graphs.

    Args:
      generated: generated graphs (networkx, simple, undirected).
      reference: reference graphs, usually the test split.
      protocol: ``"paper"`` or ``"spectre"``.
      train: training graphs. When given, the train/test floor is computed (the MMDs
        of the training graphs, preprocessed like generated ones, against the
        reference) with each MMD's ratio to it, and novelty is measured against them.
      validity: ``"planar"``, ``"sbm"`` or None; when set (needs ``train``), adds
        ``valid``, ``unique``, ``novel`` and ``vun`` on the generated graphs as given
        (never stripped).

    Returns:
      A flat dict: ``degree``, ``clustering``, ``orbit`` [, ``spectral``], ``avg``;
      ``num_reference``, ``num_generated`` (used in the MMDs) and
      ``num_generated_dropped`` (empty after preprocessing); with ``train``:
      ``<stat>_floor`` and ``<stat>_ratio`` for every statistic and ``avg``
      (``avg_ratio`` is the mean of the degree, clustering and orbit ratios; a ratio
      to a zero floor is None); with ``validity``: ``valid``, ``unique``, ``novel``,
      ``vun`` (fractions of all generated graphs).
    """
    proto = get_protocol(protocol)
    reference = list(reference)
    generated = list(generated)
    if not reference:
        raise ValueError("the reference graph list is empty")
    if not generated:
        raise ValueError("the generated graph list is empty")
    if validity is not None and validity not in VALIDITY_KINDS:
        raise ValueError(f"unknown validity {validity!r}; choose one of {list(VALIDITY_KINDS)}")
    if validity is not None and train is None:
        raise ValueError("validity metrics need the training graphs (for novelty)")

    ref_stats = statistics_for(reference, proto)
    gen, dropped = prepare_generated(generated, proto)
    if not gen:
        raise ValueError("every generated graph is empty; no MMD can be computed")
    out = mmds_from_statistics(ref_stats, statistics_for(gen, proto), proto)
    out.update(num_reference=len(reference), num_generated=len(gen),
               num_generated_dropped=dropped)

    if train is not None:
        train = list(train)
        if not train:
            raise ValueError("the training graph list is empty")
        tr, _ = prepare_generated(train, proto)
        floor = mmds_from_statistics(ref_stats, statistics_for(tr, proto), proto)
        ratios = {}
        for name in proto.statistics + ("avg",):
            out[f"{name}_floor"] = floor[name]
            ratios[name] = out[name] / floor[name] if floor[name] > 0 else None
        core = [ratios[k] for k in ("degree", "clustering", "orbit")]
        ratios["avg"] = None if any(r is None for r in core) else sum(core) / 3
        out.update({f"{k}_ratio": v for k, v in ratios.items()})
    if validity is not None:
        out.update(vun_metrics(generated, train, validity, sbm_sweeps=proto.sbm_sweeps))
    return out
