"""A PolyGraph Discrepancy (PGD) with an offline classifier: logistic regression.

PolyGraph (2026) scores generated graphs by how well a classifier tells their
descriptors from the reference graphs' descriptors. For one descriptor, with ``p(x)``
the classifier's probability that ``x`` is a reference graph, on held-out graphs::

    D = (E_ref[log2 p] + E_gen[log2 (1 - p)]) / 2 + 1,   score = sqrt(clip(D, 0, 1))

a lower bound on the Jensen-Shannon distance between the two distributions (0: the
classifier does no better than chance; 1: it separates them). The protocol (facts from
the ``polygraph-benchmark`` package's documentation and source; the code here is ours):
each set is split in halves at random (``default_rng(seed)``), the descriptors are
standardised on the fitting halves, a 4-fold stratified cross-validation on the fitting
halves gives each descriptor's *selection* score, the classifier refit on both fitting
halves gives the *reported* score on the held-out halves, and PGD is the reported score
of the descriptor with the largest selection score.

**Not comparable to published PGD values.** The benchmark's classifier is TabPFN,
whose weights cannot be fetched here; ours is an L2-regularised logistic regression
(penalty ``||w||^2 / 2``, as scikit-learn's default ``C = 1``), fitted by Newton's method
in float64, a weaker classifier and hence a looser (smaller) bound. The descriptors are
the four the MMDs use (degree and clustering histograms, normalised; mean 4-node orbit
counts; the Laplacian spectrum's histogram); the benchmark also uses 5-node orbits and a
random GIN embedding, which we do not compute. Both sets are cut to the smaller one's
size (a seeded random subset) so that the classes are balanced, as the bound assumes.
"""
from __future__ import annotations

import numpy as np

from ddgjax.metrics.stats import pad_columns

LOG_EPS = 1e-10
NUM_FOLDS = 4


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0,
                 max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Weights ``float64[F + 1]`` (last: bias, not penalised) minimising
    ``sum_i logloss(y_i, sigmoid(x_i w + b)) + l2 ||w||^2 / 2`` by Newton's method.

    ``x``: ``[n, F]``; ``y``: ``[n]`` in {0, 1}. The objective is strictly convex for
    ``l2 > 0``, so the Newton steps (halved while they do not decrease it) converge."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    xb = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    penalty = np.full(xb.shape[1], l2)
    penalty[-1] = 0.0
    w = np.zeros(xb.shape[1])

    def objective(w):
        z = xb @ w
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(penalty * w * w))

    value = objective(w)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + penalty * w
        hess = (xb * (p * (1.0 - p))[:, None]).T @ xb + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-8:
            candidate = objective(w - t * step)
            if candidate <= value:
                break
            t *= 0.5
        w, previous, value = w - t * step, value, candidate
        if previous - value <= tol * max(1.0, abs(value)):
            break
    return w


def predict_logistic(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``float64[n]``: ``sigmoid(x w[:-1] + w[-1])``."""
    z = np.asarray(x, np.float64) @ w[:-1] + w[-1]
    return 1.0 / (1.0 + np.exp(-z))


def js_distance_bound(p_ref: np.ndarray, p_gen: np.ndarray) -> float:
    """The module docstring's ``score`` from the classifier's probabilities on held-out
    reference (``p_ref``) and generated (``p_gen``) graphs."""
    d = 0.5 * (np.log2(np.asarray(p_ref) + LOG_EPS).mean()
               + np.log2(1.0 - np.asarray(p_gen) + LOG_EPS).mean()) + 1.0
    return float(np.sqrt(np.clip(d, 0.0, 1.0)))


def _standardiser(fit_rows: np.ndarray):
    """``a -> (a - mean) / std`` with the fitting rows' column statistics (std 0 -> 1)."""
    mean, std = fit_rows.mean(0), fit_rows.std(0)
    std = np.where(std > 0, std, 1.0)
    return lambda a: (a - mean) / std


def _fit_and_score(x_ref_fit, x_gen_fit, x_ref_out, x_gen_out) -> float:
    x = np.concatenate([x_ref_fit, x_gen_fit])
    if np.all(x == x[0]):        # nothing to learn: the chance classifier
        return 0.0
    y = np.concatenate([np.ones(len(x_ref_fit)), np.zeros(len(x_gen_fit))])
    w = fit_logistic(x, y)
    return js_distance_bound(predict_logistic(w, x_ref_out), predict_logistic(w, x_gen_out))


def classifier_scores(ref: np.ndarray, gen: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """``(selection, reported)`` scores of one descriptor (module docstring).

    ``ref``: ``[n, F]`` and ``gen``: ``[n, F]`` descriptors (equal counts, ``n >= 8``)."""
    ref, gen = np.asarray(ref, np.float64), np.asarray(gen, np.float64)
    if len(ref) != len(gen) or len(ref) < 2 * NUM_FOLDS:
        raise ValueError(f"classifier_scores needs equal counts of at least {2 * NUM_FOLDS} "
                         f"graphs, got {len(ref)} reference and {len(gen)} generated")
    rng = np.random.default_rng(seed)
    ref_fit = rng.choice(len(ref), len(ref) // 2, replace=False)
    gen_fit = rng.choice(len(gen), len(gen) // 2, replace=False)
    ref_out = np.setdiff1d(np.arange(len(ref)), ref_fit)
    gen_out = np.setdiff1d(np.arange(len(gen)), gen_fit)
    scale = _standardiser(np.concatenate([ref[ref_fit], gen[gen_fit]]))
    r_fit, g_fit, r_out, g_out = (scale(a) for a in (ref[ref_fit], gen[gen_fit],
                                                    ref[ref_out], gen[gen_out]))
    # stratified folds: each class's fitting rows dealt round-robin after a shuffle
    ref_fold = rng.permutation(len(r_fit)) % NUM_FOLDS
    gen_fold = rng.permutation(len(g_fit)) % NUM_FOLDS
    folds = [_fit_and_score(r_fit[ref_fold != k], g_fit[gen_fold != k],
                            r_fit[ref_fold == k], g_fit[gen_fold == k])
             for k in range(NUM_FOLDS)]
    return float(np.mean(folds)), _fit_and_score(r_fit, g_fit, r_out, g_out)


def balanced_subsets(ref: dict, gen: dict, seed: int = 0) -> tuple[dict, dict]:
    """Both descriptor dicts (name -> ``[n, F]``) cut to the smaller set's size: the same
    seeded random rows for every descriptor."""
    n_ref, n_gen = len(next(iter(ref.values()))), len(next(iter(gen.values())))
    n = min(n_ref, n_gen)
    rng = np.random.default_rng(seed)
    ref_rows = np.sort(rng.choice(n_ref, n, replace=False)) if n_ref > n else np.arange(n)
    gen_rows = np.sort(rng.choice(n_gen, n, replace=False)) if n_gen > n else np.arange(n)
    return ({k: np.asarray(v)[ref_rows] for k, v in ref.items()},
            {k: np.asarray(v)[gen_rows] for k, v in gen.items()})


def polygraph_discrepancy(ref: dict, gen: dict, seed: int = 0) -> dict:
    """PGD over the descriptors (name -> ``[n, F]``, the same names in both dicts; the
    shorter of two histograms is zero-padded).

    Returns ``{"pgd": float, "pgd_descriptor": name, "pgd_<name>": reported score}``;
    ``pgd`` is None when fewer than 8 graphs are in the smaller set."""
    ref, gen = balanced_subsets(ref, gen, seed)
    if len(next(iter(ref.values()))) < 2 * NUM_FOLDS:
        return {"pgd": None, "pgd_descriptor": None}
    scores = {}
    for name in ref:
        r, g = np.asarray(ref[name], np.float64), np.asarray(gen[name], np.float64)
        width = max(r.shape[1], g.shape[1])
        scores[name] = classifier_scores(pad_columns(r, width), pad_columns(g, width), seed)
    best = max(scores, key=lambda k: scores[k][0])
    return {"pgd": scores[best][1], "pgd_descriptor": best,
            **{f"pgd_{k}": v[1] for k, v in scores.items()}}
