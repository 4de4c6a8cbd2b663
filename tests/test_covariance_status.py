"""The Gaussian preparation returns a status (``Regularisation``); callers decide and warn once."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap._estimators._covariance import Regularisation, default_floor, default_rcond, standard_gaussian


def _correlation_extremes(cov):
    """Smallest and largest eigenvalue of the correlation matrix of ``cov`` (NumPy oracle)."""
    d = np.sqrt(np.diag(cov))
    eig = np.linalg.eigvalsh(cov / np.outer(d, d))
    return eig[0], eig[-1]


def _data(seed, duplicate):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(200, 4))
    if duplicate:
        z[:, 3] = z[:, 0]
    return z


@pytest.mark.parametrize("duplicate", [False, True])
def test_status_says_whether_the_correlations_were_shrunk_and_nothing_is_warned(duplicate):
    z = _data(0, duplicate)
    cov = np.cov(z, rowvar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the status replaces the warning
        g, status = standard_gaussian(z.mean(0), cov, rcond=None)
    assert isinstance(status, Regularisation)
    rcond = default_rcond(jnp.float32)
    assert (status.rcond, status.floor) == (rcond, default_floor(jnp.float32))
    smallest, largest = _correlation_extremes(cov)
    assert status.rank_deficient == (smallest < rcond * largest) == duplicate
    assert status.shrinkage == float(g.shrinkage)
    assert (status.shrinkage > 0) == duplicate
    if duplicate:
        # the shrunk matrix's smallest eigenvalue sits at the floor (relative to the largest)
        eig = np.linalg.eigvalsh(np.asarray(g.corr, np.float64))
        np.testing.assert_allclose(eig[0] / eig[-1], status.floor, rtol=0.05)
        assert "rank-deficient" in status.message("data")


def test_status_carries_a_given_cut_off_and_is_unknown_when_traced():
    z = _data(1, False)
    z[:, 1] += 2.0 * z[:, 0]  # correlated: the smallest eigenvalue well below the largest
    cov = np.cov(z, rowvar=False)
    smallest, largest = _correlation_extremes(cov)
    assert smallest < 0.5 * largest
    cut = 1.5 * smallest / largest  # above the smallest eigenvalue: shrinking is needed
    g, status = standard_gaussian(z.mean(0), cov, rcond=cut)
    assert status.rank_deficient and status.rcond == status.floor == cut
    seen = []

    def traced(mu, c):
        g, status = standard_gaussian(mu, c, rcond=None)
        seen.append(status)
        return g.corr

    jax.jit(traced)(jnp.asarray(z.mean(0)), jnp.asarray(cov))
    assert seen[0].rank_deficient is False and seen[0].shrinkage is None
    with pytest.raises(TypeError, match="rcond"):
        standard_gaussian(z.mean(0), cov, rcond="small")
    with pytest.raises(ValueError, match="rcond"):
        standard_gaussian(z.mean(0), cov, rcond=1.0)


def test_linear_explainer_warns_once_from_the_place_that_decides():
    coef = np.array([1.0, 0.5, -1.0, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jaxshap.LinearExplainer((coef, 0.0), _data(2, True), "correlation_dependent")
    assert len(caught) == 1 and "rank-deficient" in str(caught[0].message)
    assert caught[0].filename == __file__  # blamed on the caller
    # nearly collinear: singular in float32 only, so the transform is built in float64
    z = _data(3, False).astype(np.float32)
    z[:, 3] = z[:, 0] + 1e-5 * _data(4, False)[:, 0].astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = jaxshap.LinearExplainer((coef, 0.0), z, "correlation_dependent")
    assert len(caught) == 1 and "float32" in str(caught[0].message) and caught[0].filename == __file__
    assert "rank-deficient" not in str(caught[0].message)
    assert float(ex.gaussian.shrinkage) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jaxshap.LinearExplainer((coef, 0.0), _data(5, False), "correlation_dependent")
