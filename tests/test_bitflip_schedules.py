"""The bit-flip schedules and grids (ddgjax.processes.bitflip.schedules): beta_bar tables,
step betas, the levels a sampler visits."""
import numpy as np
import pytest

from ddgjax.processes.base import sampling_levels
from ddgjax.processes.bitflip.schedules import (make_schedule, parse_grid, sampling_grid,
                                                step_betas)


def flip_matrix(beta):
    return np.array([[1 - beta, beta], [beta, 1 - beta]], dtype=np.float64)


@pytest.mark.parametrize("name", ["linear", "cosine"])
@pytest.mark.parametrize("T", [1, 5, 32, 256])
def test_cumulative_product_equals_closed_form(name, T):
    s = make_schedule(name, T)
    assert s.beta_bar64[0] == 0.0 and s.beta_bar64[T] == 0.5
    Q = np.eye(2)
    for t in range(1, T + 1):
        Q = Q @ flip_matrix(s.beta64[t])
        np.testing.assert_allclose(Q, flip_matrix(s.beta_bar64[t]), atol=1e-12)
        assert 0.0 < s.beta64[t] <= 0.5
    assert s.beta.dtype == np.float32 and s.beta_bar.dtype == np.float32


def test_linear_is_linear():
    s = make_schedule("linear", 32)
    np.testing.assert_allclose(s.beta_bar64, np.arange(33) / 64)


def test_strided_step_betas_compose():
    s = make_schedule("linear", 32)
    lv = sampling_levels(32, 8)[::-1]
    b = step_betas(s.beta_bar64[lv])
    Q = np.eye(2)
    for k in range(1, len(lv)):
        Q = Q @ flip_matrix(b[k])
        np.testing.assert_allclose(Q, flip_matrix(s.beta_bar64[lv[k]]), atol=1e-12)


def test_bad_schedule():
    with pytest.raises(ValueError, match="unknown noise schedule"):
        make_schedule("quadratic", 10)
    with pytest.raises(ValueError, match="positive integer"):
        make_schedule("linear", 0)


def test_sampling_grid_levels():
    s = make_schedule("linear", 8)
    t, bb = sampling_grid(s, 4, "trained")
    np.testing.assert_array_equal(t, [8, 6, 4, 2, 0])
    np.testing.assert_allclose(bb, t / 16.0)
    t, bb = sampling_grid(s, 20, "uniform")  # more steps than trained levels
    np.testing.assert_allclose(bb, np.arange(20, -1, -1) / 40.0)
    assert t[0] == 8 and t[-1] == 0 and np.all(t[:-1] >= 1)
    t, bb = sampling_grid(s, 4, "power:2")
    np.testing.assert_allclose(bb, 0.5 * (np.array([4, 3, 2, 1, 0]) / 4.0) ** 2)
    np.testing.assert_array_equal(t, [8, 4, 2, 1, 0])  # nearest level (4.5 rounds to even), >= 1
    np.testing.assert_allclose(sampling_grid(s, 6, "power:1")[1],
                               sampling_grid(s, 6, "uniform")[1], atol=1e-15)
    for bad in ("cosine", "power:0", "power:x", "trained:2", "mid:2", "power", "power:inf"):
        with pytest.raises(ValueError, match="unknown sampling grid"):
            parse_grid(bad)
    # levels that float32 cannot hold apart (a step from 0 to 0 would empty Algorithm 1's
    # graphs) are refused by grid and step count; just above the limit is fine
    for grid, steps in (("power:13", 1024), ("power:16", 256)):
        with pytest.raises(ValueError, match=f"sampling grid '{grid}' with {steps} steps"):
            sampling_grid(s, steps, grid)
    assert sampling_grid(s, 4096, "power:10")[1][-2] > 0
