"""The bench's NumPy empirical baseline (batched over rows, model only on kept rows) against its
loop definition (one row, one coalition, every training row at a time)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.conditional_baselines import empirical_shapley_loops, empirical_shapley_numpy, empirical_weights
from bench.conditional_baselines import _weights_all_rows


def _data(seed=0, n=60, m=4, categorical=()):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, m))
    data = rng.normal(size=(n, m)) @ a
    for j in categorical:
        data[:, j] = rng.integers(0, 3, size=n)
    data[7] = data[3]  # a duplicated row: tied weights
    return data, rng


def model(z):
    return np.tanh(z[:, 0] - z[:, 1]) + z[:, 2] * z[:, 3] + 0.3 * z[:, 0] ** 2


def two_outputs(z):
    return np.stack([model(z), z[:, 1] - z[:, 3]], 1)


@pytest.mark.parametrize("sigma, eta, cap, categorical", [
    (0.1, 0.95, None, ()), (0.4, 0.7, 5, ()), (2.0, 1.0, None, ()), (0.3, 0.9, 7, (1,)), (0.5, 0.8, None, (0, 2)),
])
def test_batched_weights_are_the_definitions(sigma, eta, cap, categorical):
    data, rng = _data(1, categorical=categorical)
    X = np.concatenate([data[[3, 10]], data[:2] + 0.05 * rng.normal(size=(2, 4))])
    for subset in ([], [0], [1, 3], [0, 1, 2], [0, 1, 2, 3]):
        got = _weights_all_rows(data, X, subset, sigma, eta, categorical, cap)
        want = np.stack([empirical_weights(data, x, subset, sigma, eta, categorical, cap) for x in X])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
        assert ((got > 0) == (want > 0)).all()  # the same rows kept


@pytest.mark.parametrize("outputs", [model, two_outputs])
@pytest.mark.parametrize("cap, categorical", [(None, ()), (6, (1,))])
def test_batched_shapley_values_are_the_loops(outputs, cap, categorical):
    data, rng = _data(2, categorical=categorical)
    X = np.concatenate([data[:2], data[5:6] + 0.1])
    got, base = empirical_shapley_numpy(outputs, data, X, sigma=0.3, eta=0.9, categorical=categorical,
                                        max_samples=cap, return_base=True)
    want = empirical_shapley_loops(outputs, data, X, sigma=0.3, eta=0.9, categorical=categorical, max_samples=cap)
    assert got.shape == want.shape == ((3, 4) if outputs is model else (3, 4, 2))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # efficiency: v(full) = f(x)
    total = got.sum(1) + base
    np.testing.assert_allclose(total, outputs(X), atol=1e-12)


def test_ten_features_run():
    """M = 10 (1024 coalitions) runs and is efficient (v(empty) is the data's mean for a linear model)."""
    rng = np.random.default_rng(3)
    data = rng.normal(size=(200, 10))
    X = data[:2] + 0.01
    beta = np.arange(1.0, 11.0)
    phi, base = empirical_shapley_numpy(lambda z: z @ beta, data, X, sigma=0.1, eta=0.95, return_base=True)
    assert phi.shape == (2, 10)
    np.testing.assert_allclose(base, data.mean(0) @ beta, atol=1e-9)
    np.testing.assert_allclose(phi.sum(1) + base, X @ beta, atol=1e-9)


def test_model_calls_have_one_shape():
    """The model sees chunks of one size (the last padded), so a jitted model compiles once."""
    from bench.conditional_baselines import _evaluate

    rows = np.random.default_rng(4).normal(size=(23, 3))
    seen = []

    def f(z):
        seen.append(z.shape)
        return z.sum(1)

    out, flat = _evaluate(f, rows, chunk=7)
    assert set(seen) == {(7, 3)} and len(seen) == 4 and flat
    np.testing.assert_array_equal(out[:, 0], rows.sum(1))
