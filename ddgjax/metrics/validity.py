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

from ddgjax.metrics.sbm_fit import sbm_partition

SBM_P_INTRA = 0.3
SBM_P_INTER = 0.005
VALIDITY_KINDS = ("planar", "sbm")


# ----------------------------------------------------------------------------
# Planar


def is_planar_valid(g: nx.Graph) -> bool:
    """Connected and planar (SPECTRE's planar validity). Empty graphs are not valid."""
    return g.number_of_nodes() > 0 and nx.is_connected(g) and nx.check_planarity(g)[0]


# ----------------------------------------------------------------------------
# SBM: Wald test on the fitted blocks


def sbm_block_counts(g: nx.Graph, blocks: np.ndarray):
    """Block sizes ``n_r`` and the edge-count matrix (``2 e_rr`` on the diagonal)."""
    adj = nx.to_numpy_array(g, nodelist=sorted(g.nodes), dtype=np.float64)
    np.fill_diagonal(adj, 0.0)
    _, b = np.unique(blocks, return_inverse=True)
    onehot = np.eye(int(b.max()) + 1)[b]
    return onehot.sum(0), onehot.T @ adj @ onehot


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


def is_sbm_valid(g: nx.Graph, p_intra: float = SBM_P_INTRA, p_inter: float = SBM_P_INTER,
                 seed: int = 0, use_graph_tool: bool | None = None) -> bool:
    """SBM validity: 2-5 blocks of 20-40 nodes and mean Wald p-value > 0.9."""
    if g.number_of_nodes() == 0 or g.number_of_edges() == 0:
        return False
    blocks = sbm_partition(g, seed=seed, use_graph_tool=use_graph_tool)
    sizes, e = sbm_block_counts(g, blocks)
    if len(sizes) < 2 or len(sizes) > 5 or sizes.min() < 20 or sizes.max() > 40:
        return False
    return sbm_wald_pvalue(sizes, e, p_intra, p_inter) > 0.9


VALIDITY_FUNCTIONS = {"planar": is_planar_valid, "sbm": is_sbm_valid}


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


def validity_mask(graphs: Sequence[nx.Graph], kind: str) -> np.ndarray:
    """``bool[len]`` validity under ``kind`` in {"planar", "sbm"}."""
    if kind not in VALIDITY_FUNCTIONS:
        raise ValueError(f"unknown validity {kind!r}; choose one of {list(VALIDITY_FUNCTIONS)}")
    fn = VALIDITY_FUNCTIONS[kind]
    return np.array([bool(fn(g)) for g in graphs], dtype=bool)


def vun_metrics(generated: Sequence[nx.Graph], train: Sequence[nx.Graph],
                validity: str) -> dict:
    """``{"valid", "unique", "novel", "vun"}`` as fractions of all generated graphs.

    ``unique`` = first occurrences of isomorphism classes / all; ``novel`` = not
    isomorphic to a training graph / all; ``vun`` = valid and first occurrence and
    novel / all.
    """
    generated = list(generated)
    if not generated:
        raise ValueError("the generated graph list is empty")
    valid = validity_mask(generated, validity)
    unique = first_occurrence_mask(generated)
    novel = novel_mask(generated, train)
    return {"valid": float(valid.mean()), "unique": float(unique.mean()),
            "novel": float(novel.mean()), "vun": float((valid & unique & novel).mean())}
