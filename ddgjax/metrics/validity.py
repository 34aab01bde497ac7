"""Validity (planar, SBM), uniqueness, novelty and V.U.N. of generated graphs.

Definitions (``docs/evaluation.md``; SPECTRE/DiGress conventions):

* planar-valid: connected and planar (a graph with no nodes is not valid);
* SBM-valid: a stochastic block model fitted to the graph has 2-5 blocks of 20-40
  nodes each, and the mean over all ``B x B`` block pairs of the Wald-test p-values
  for ``p_intra = 0.3`` (diagonal) and ``p_inter = 0.005`` (off-diagonal) exceeds 0.9;
* unique: not isomorphic to an *earlier* generated graph (the first of each
  isomorphism class counts as unique);
* novel: not isomorphic to any training graph;
* V.U.N.: the fraction of generated graphs that are valid, unique and novel at once.

The SBM is fitted by :mod:`ddgjax.metrics.sbm_fit` (graph-tool when it imports,
otherwise our own description-length fit). The Wald test then uses the fitted
block sizes ``n_r`` and edge counts exactly as the original:
``p_rr = 2 e_rr / (n_r (n_r - 1) + 1e-6)``, ``p_rs = e_rs / (n_r n_s + 1e-6)``,
``W = (p - p0)^2 / (p (1 - p) + 1e-6)``, p-value ``1 - chi2_1.cdf(W)``.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import networkx as nx
import numpy as np
from scipy import stats as sstats

from ddgjax.metrics.sbm_fit import resolve_sbm_fit, sbm_partitions

SBM_P_INTRA = 0.3
SBM_P_INTER = 0.005
VALIDITY_KINDS = ("planar", "sbm", "lobster")


# ----------------------------------------------------------------------------
# Planar


def is_planar_valid(g: nx.Graph) -> bool:
    """Connected and planar (SPECTRE's planar validity). Empty graphs are not valid."""
    return g.number_of_nodes() > 0 and nx.is_connected(g) and nx.check_planarity(g)[0]


def is_lobster_valid(g: nx.Graph) -> bool:
    """A lobster: a tree whose leaves, removed twice, leave a path (or nothing), i.e.
    every node is at most two hops from one backbone path (GRAN's and PolyGraph's rule)."""
    if g.number_of_nodes() == 0 or not nx.is_tree(g):
        return False
    h = g.copy()
    for _ in range(2):
        leaves = [v for v, d in h.degree() if d <= 1]
        if len(leaves) == h.number_of_nodes():   # a path of 1-2 nodes: nothing left
            return True
        h.remove_nodes_from(leaves)
    return h.number_of_nodes() == 0 or max(d for _, d in h.degree()) <= 2


# ----------------------------------------------------------------------------
# SBM: Wald test on the fitted blocks


def sbm_block_counts(g: nx.Graph, blocks: np.ndarray):
    """Block sizes ``n_r`` and the edge-count matrix (``2 e_rr`` on the diagonal).

    ``blocks`` labels the nodes in ``g.nodes`` order; nodes labelled -1 (left out of
    the fit) count in no block, and neither do their edges.
    """
    adj = nx.to_numpy_array(g, nodelist=list(g.nodes), dtype=np.float64, weight=None)
    np.fill_diagonal(adj, 0.0)
    blocks = np.asarray(blocks)
    keep = blocks >= 0
    if not keep.any():
        return np.zeros(0), np.zeros((0, 0))
    _, b = np.unique(blocks[keep], return_inverse=True)
    onehot = np.eye(int(b.max()) + 1)[b]
    return onehot.sum(0), onehot.T @ adj[np.ix_(keep, keep)] @ onehot


def sbm_wald_pvalue(sizes, e, p_intra: float = SBM_P_INTRA,
                    p_inter: float = SBM_P_INTER) -> float:
    """Mean Wald-test p-value over all ``B x B`` block pairs (SPECTRE's statistic)."""
    sizes = np.asarray(sizes, np.float64)
    e = np.asarray(e, np.float64)
    est_intra = np.diag(e) / (sizes * (sizes - 1) + 1e-6)
    est_inter = e / (np.outer(sizes, sizes) + 1e-6)
    w_intra = (est_intra - p_intra) ** 2 / (est_intra * (1 - est_intra) + 1e-6)
    w = (est_inter - p_inter) ** 2 / (est_inter * (1 - est_inter) + 1e-6)
    np.fill_diagonal(w, w_intra)
    p = 1.0 - sstats.chi2.cdf(np.abs(w), 1)
    return float(p.mean())


def sbm_first_failure(sizes, e, p_intra: float = SBM_P_INTRA,
                      p_inter: float = SBM_P_INTER) -> str | None:
    """The first rule of the SBM test that fitted blocks break, in the test's order:
    ``"blocks"`` (not 2-5 blocks), ``"sizes"`` (a block outside 20-40 nodes), ``"wald"``
    (mean Wald p-value <= 0.9); None when they pass."""
    sizes = np.asarray(sizes)
    if len(sizes) < 2 or len(sizes) > 5:
        return "blocks"
    if sizes.min() < 20 or sizes.max() > 40:
        return "sizes"
    return None if sbm_wald_pvalue(sizes, e, p_intra, p_inter) > 0.9 else "wald"


def sbm_blocks_pass(sizes, e, p_intra: float = SBM_P_INTRA,
                    p_inter: float = SBM_P_INTER) -> bool:
    """The test on fitted blocks: 2-5 blocks of 20-40 nodes, mean Wald p-value > 0.9."""
    return sbm_first_failure(sizes, e, p_intra, p_inter) is None


def sbm_validity(graphs: Sequence[nx.Graph], fit: str | None = None, seed: int = 0,
                 p_intra: float = SBM_P_INTRA, p_inter: float = SBM_P_INTER,
                 refinement_steps: int = 1000):
    """``(bool[len], fit_label)``: SBM validity of every graph and which fit decided it.

    ``fit`` as in :func:`ddgjax.metrics.sbm_fit.resolve_sbm_fit` (graph-tool when it is
    found, else ours); all graphs go to the fit in one batch. A graph with no nodes or
    no edges is invalid.
    """
    graphs = list(graphs)
    todo = [i for i, g in enumerate(graphs) if g.number_of_nodes() and g.number_of_edges()]
    blocks, label = sbm_partitions([graphs[i] for i in todo], fit=fit, seed=seed,
                                   refinement_steps=refinement_steps)
    out = np.zeros(len(graphs), bool)
    for i, b in zip(todo, blocks):
        out[i] = sbm_blocks_pass(*sbm_block_counts(graphs[i], b), p_intra, p_inter)
    if not todo:
        label = resolve_sbm_fit(fit)[1]
    return out, label


def is_sbm_valid(g: nx.Graph, p_intra: float = SBM_P_INTRA, p_inter: float = SBM_P_INTER,
                 seed: int = 0, fit: str | None = None) -> bool:
    """SBM validity of one graph (:func:`sbm_validity`; batch graphs there instead)."""
    return bool(sbm_validity([g], fit=fit, seed=seed, p_intra=p_intra, p_inter=p_inter)[0][0])


VALIDITY_FUNCTIONS = {"planar": is_planar_valid, "sbm": is_sbm_valid,
                      "lobster": is_lobster_valid}


# ----------------------------------------------------------------------------
# Uniqueness, novelty, V.U.N.


def _wl_hash(g: nx.Graph) -> str:
    # networkx >= 3.5 warns that hashes changed across versions; they are only
    # compared within one call here, so the warning does not apply.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(g, iterations=3)


def _bucket_key(g: nx.Graph):
    return (g.number_of_nodes(), g.number_of_edges(), _wl_hash(g))


def first_occurrence_mask(graphs: Sequence[nx.Graph]) -> np.ndarray:
    """``bool[len]``: True where a graph is not isomorphic to any earlier one.

    Graphs are bucketed by (nodes, edges, Weisfeiler-Lehman hash), which isomorphic
    graphs share, and ``nx.is_isomorphic`` decides within a bucket.
    """
    buckets: dict = {}
    out = np.zeros(len(graphs), bool)
    for i, g in enumerate(graphs):
        kept = buckets.setdefault(_bucket_key(g), [])
        if not any(nx.is_isomorphic(g, h) for h in kept):
            kept.append(g)
            out[i] = True
    return out


def novel_mask(graphs: Sequence[nx.Graph], train: Sequence[nx.Graph]) -> np.ndarray:
    """``bool[len]``: True where a graph is isomorphic to no training graph."""
    buckets: dict = {}
    for h in train:
        buckets.setdefault(_bucket_key(h), []).append(h)
    return np.array([not any(nx.is_isomorphic(g, h) for h in buckets.get(_bucket_key(g), []))
                     for g in graphs], dtype=bool)


def validity_with_fit(graphs: Sequence[nx.Graph], kind: str, sbm_fit: str | None = None,
                      sbm_sweeps: int = 1000):
    """``(bool[len], fit_label)``: validity under ``kind`` in :data:`VALIDITY_KINDS`.

    ``fit_label`` names the SBM fit (e.g. ``"graph-tool 2.45"``, ``"ddgjax"``) for
    ``kind="sbm"`` and is None for planar; ``sbm_fit`` picks it
    (:func:`ddgjax.metrics.sbm_fit.resolve_sbm_fit`); ``sbm_sweeps`` is the number of
    merge-split sweeps after the fit (SPECTRE 1000, PolyGraph 100).
    """
    if kind not in VALIDITY_FUNCTIONS:
        raise ValueError(f"unknown validity {kind!r}; choose one of {list(VALIDITY_FUNCTIONS)}")
    if kind == "sbm":
        return sbm_validity(graphs, fit=sbm_fit, refinement_steps=sbm_sweeps)
    fn = VALIDITY_FUNCTIONS[kind]
    return np.array([bool(fn(g)) for g in graphs], dtype=bool), None


def validity_mask(graphs: Sequence[nx.Graph], kind: str, sbm_fit: str | None = None) -> np.ndarray:
    """``bool[len]`` validity under ``kind`` in :data:`VALIDITY_KINDS` (:func:`validity_with_fit`)."""
    return validity_with_fit(graphs, kind, sbm_fit)[0]


def vun_metrics(generated: Sequence[nx.Graph], train: Sequence[nx.Graph],
                validity: str, sbm_fit: str | None = None, sbm_sweeps: int = 1000) -> dict:
    """``{"valid", "unique", "novel", "vun"}`` as fractions of all generated graphs.

    ``unique`` = first occurrences of isomorphism classes / all; ``novel`` = not
    isomorphic to a training graph / all; ``vun`` = valid and first occurrence and
    novel / all. For ``validity="sbm"`` the dict also has ``"sbm_fit"``, the fit that
    decided validity (``"graph-tool 2.45"``, ``"ddgjax"``; ``sbm_fit`` picks it, with
    ``sbm_sweeps`` merge-split sweeps).
    """
    generated = list(generated)
    if not generated:
        raise ValueError("the generated graph list is empty")
    valid, fit_label = validity_with_fit(generated, validity, sbm_fit, sbm_sweeps)
    unique = first_occurrence_mask(generated)
    novel = novel_mask(generated, train)
    out = {"valid": float(valid.mean()), "unique": float(unique.mean()),
           "novel": float(novel.mean()), "vun": float((valid & unique & novel).mean())}
    if fit_label is not None:
        out["sbm_fit"] = fit_label
    return out
