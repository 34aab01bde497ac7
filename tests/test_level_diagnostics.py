"""The per-level diagnostic: the structure-blind posterior by brute-force Bayes, and
the bookkeeping of NLL and expected wrong pairs on denoisers whose answers we know."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ddgjax.graphs import pair_mask
from ddgjax.level_diagnostics import LN2, blind_logits, level_stats

from helpers import random_batch


@pytest.mark.parametrize("rho", [0.5, 0.1])
def test_blind_posterior_is_bayes_float64(rho):
    d = 0.2
    for bb in (0.01, 0.2, 0.45):
        alpha = 1 - 2 * bb
        for a_t in (0.0, 1.0):
            q = lambda a0: (alpha * a0 + (1 - alpha) * rho)  # q(a_t = 1 | a0)
            lik = lambda a0: q(a0) if a_t else 1 - q(a0)
            post = lik(1) * d / (lik(1) * d + lik(0) * (1 - d))
            got = jax.nn.sigmoid(blind_logits(jnp.full((1, 1, 1), a_t), jnp.asarray([bb]),
                                              rho, d))
            np.testing.assert_allclose(float(got[0, 0, 0]), post, rtol=1e-5)


def test_level_stats_bookkeeping():
    adj0, mask = random_batch(3, [9, 7, 4], 10, p=0.3)
    adj0, mask = jnp.asarray(adj0), jnp.asarray(mask)
    B, rho, d = 3, 0.3, 0.3
    bb = jnp.full((B,), 0.2)
    t = jnp.ones((B,), jnp.int32)
    key = jax.random.key(4)
    blind = lambda a, m, tt, b: blind_logits(a, b, rho, d)
    s = level_stats(blind, key, adj0, mask, bb, t, rho, d)
    np.testing.assert_allclose(s["nll_bits"], s["blind_nll_bits"], rtol=1e-6)
    np.testing.assert_allclose(s["wrong"], s["blind_wrong"], rtol=1e-6)
    np.testing.assert_allclose(s["missed"] + s["false_alarm"], s["wrong"], rtol=1e-5)
    np.testing.assert_allclose(s["missed_added"] + s["missed_removed"], s["missed"], rtol=1e-5)
    np.testing.assert_array_equal(s["pairs"], [36, 21, 6])
    assert float(s["flipped"].sum()) > 0
    oracle = lambda a, m, tt, b: 40.0 * (2 * adj0 - 1)
    o = level_stats(oracle, key, adj0, mask, bb, t, rho, d)
    assert float(o["nll_bits"].max()) < 1e-6 and float(o["wrong"].max()) < 1e-6
    np.testing.assert_array_equal(o["flipped"], s["flipped"])  # same key, same noise
    # a denoiser that copies A_t confidently is wrong on exactly the flipped pairs
    copy = lambda a, m, tt, b: 40.0 * (2 * a - 1)
    c = level_stats(copy, key, adj0, mask, bb, t, rho, d)
    np.testing.assert_allclose(c["wrong"], s["flipped"], atol=1e-4)
    np.testing.assert_allclose(c["missed"], s["flipped"], atol=1e-4)
    np.testing.assert_allclose(c["nll_bits"], s["flipped"] * 40.0 / LN2, rtol=1e-3, atol=1e-6)
    assert float(jnp.sum(jnp.where(pair_mask(mask), adj0, 0))) > 0


def test_expected_edges_is_the_sum_of_edge_probabilities():
    adj0, mask = random_batch(5, [9, 7, 4], 10, p=0.3)
    adj0, mask = jnp.asarray(adj0), jnp.asarray(mask)
    pm = np.asarray(pair_mask(mask))
    const = lambda a, m, tt, b: jnp.full(a.shape, np.log(0.25 / 0.75), jnp.float32)
    s = level_stats(const, jax.random.key(0), adj0, mask, jnp.full((3,), 0.1),
                    jnp.ones((3,), jnp.int32), 0.3, 0.3)
    np.testing.assert_allclose(s["expected_edges"], 0.25 * pm.sum(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(s["edges"], np.where(pm, np.asarray(adj0), 0).sum(axis=(1, 2)))
