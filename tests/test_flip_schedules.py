"""The bit-flip schedules (ddgjax.processes.flip_schedules): beta_bar tables, step betas."""
import numpy as np
import pytest

from ddgjax.processes.base import sampling_levels
from ddgjax.processes.flip_schedules import make_schedule, step_betas


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
