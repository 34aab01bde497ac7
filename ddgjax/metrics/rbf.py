"""PolyGraph's RBF MMD^2: Gaussian kernels on descriptor vectors, with a bandwidth scaled
to the data, the largest MMD^2 over a fixed set of base bandwidths.

For descriptors ``X`` (reference) and ``Y`` (generated), ``D`` the squared Euclidean
distances and ``c = sqrt(mean D_XY)`` (1 if that is 0)::

    k_s(x, y) = exp(-||x - y||^2 / (2 (c s)^2)),   RBF-MMD^2 = max_s MMD_s^2 (biased)

over ``s`` in :data:`BASE_BANDWIDTHS` (the values the polygraph-benchmark package uses;
the formula is from its documentation, the code is ours). Computed in float64 NumPy.
"""
from __future__ import annotations

import numpy as np

from ddgjax.metrics.stats import pad_columns

BASE_BANDWIDTHS = (0.01, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def squared_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``float64[len(x), len(y)]``: ``||x_i - y_j||^2`` (clipped at 0 against rounding)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    d = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * x @ y.T
    return np.maximum(d, 0.0)


def rbf_mmd2_max(x, y, base_bandwidths=BASE_BANDWIDTHS) -> float:
    """The largest biased MMD^2 over the scaled bandwidths (module docstring).

    ``x``: ``[n, F1]``, ``y``: ``[m, F2]`` descriptors; the shorter ones are zero-padded
    (histograms of different lengths)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    width = max(x.shape[1], y.shape[1])
    x, y = pad_columns(x, width), pad_columns(y, width)
    dxx, dyy, dxy = squared_distances(x, x), squared_distances(y, y), squared_distances(x, y)
    mean_xy = float(dxy.mean())
    scale = np.sqrt(mean_xy) if mean_xy > 0 else 1.0
    best = -np.inf
    for s in base_bandwidths:
        two_var = 2.0 * (scale * s) ** 2
        value = (np.exp(-dxx / two_var).mean() + np.exp(-dyy / two_var).mean()
                 - 2.0 * np.exp(-dxy / two_var).mean())
        best = max(best, float(value))
    return best
