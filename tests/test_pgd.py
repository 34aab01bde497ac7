"""The PolyGraph Discrepancy with logistic regression (ddgjax.metrics.pgd)."""
import networkx as nx
import numpy as np
import pytest
from scipy import optimize

from ddgjax.metrics import compute_mmds
from ddgjax.metrics.pgd import (balanced_subsets, classifier_scores, fit_logistic,
                                js_distance_bound, polygraph_discrepancy, predict_logistic)


def test_newton_fit_is_the_minimiser_of_the_penalised_log_loss():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.3 + rng.normal(size=200) > 0) * 1.0

    def objective(w):                # brute force: the same objective, a generic optimiser
        z = x @ w[:-1] + w[-1]
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * np.sum(w[:-1] ** 2)

    ref = optimize.minimize(objective, np.zeros(6), method="BFGS", options={"gtol": 1e-9}).x
    np.testing.assert_allclose(fit_logistic(x, y), ref, atol=1e-5)
    p = predict_logistic(ref, x)
    assert p.shape == (200,) and np.all((p > 0) & (p < 1))


def test_js_bound_is_zero_at_chance_and_one_at_certainty():
    half = np.full(50, 0.5)
    assert js_distance_bound(half, half) == pytest.approx(0.0, abs=1e-4)  # eps 1e-10 in the logs
    assert js_distance_bound(np.ones(50), np.zeros(50)) == pytest.approx(1.0, abs=1e-9)
    # a classifier worse than chance is clipped to 0, not a negative distance
    assert js_distance_bound(np.full(50, 0.2), np.full(50, 0.8)) == 0.0


def test_scores_separate_different_distributions_and_not_equal_ones():
    rng = np.random.default_rng(1)
    same = classifier_scores(rng.normal(size=(400, 3)), rng.normal(size=(400, 3)))
    apart = classifier_scores(rng.normal(size=(400, 3)), rng.normal(3.0, 1.0, size=(400, 3)))
    assert max(same) < 0.2
    assert min(apart) > 0.9
    with pytest.raises(ValueError, match="equal counts"):
        classifier_scores(np.zeros((10, 2)), np.zeros((12, 2)))


def test_pgd_reports_the_descriptor_chosen_by_cross_validation():
    rng = np.random.default_rng(2)
    ref = {"a": rng.normal(size=(300, 2)), "b": rng.normal(size=(300, 4))}
    gen = {"a": rng.normal(size=(200, 2)), "b": rng.normal(2.0, 1.0, size=(200, 3))}
    out = polygraph_discrepancy(ref, gen)
    assert out["pgd_descriptor"] == "b"          # the shifted one (histograms padded 3 -> 4)
    assert out["pgd"] == out["pgd_b"] > 0.8 > 0.2 > out["pgd_a"]
    r, g = balanced_subsets(ref, gen)
    assert len(r["a"]) == len(r["b"]) == len(g["a"]) == 200
    assert polygraph_discrepancy({"a": ref["a"][:5]}, {"a": gen["a"][:5]})["pgd"] is None


def test_polygraph_protocol_reports_pgd():
    ref = [nx.cycle_graph(n) for n in range(8, 28)]
    out = compute_mmds(ref, [nx.star_graph(n) for n in range(8, 28)], protocol="polygraph")
    assert out["pgd"] > 0.5 and out["pgd_descriptor"] in ("degree", "clustering", "orbit",
                                                          "spectral")
    assert "pgd" not in compute_mmds(ref, ref, protocol="spectre")
