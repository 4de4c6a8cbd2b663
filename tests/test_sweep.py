"""The sweep inverse (jaxshap._estimators._kernel_solve.sweep_inverse)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshap._estimators._kernel_solve import spd_inverse, sweep_inverse


def _spd(n, cond, seed):
    """A symmetric positive-definite matrix with eigenvalues spread geometrically over [1, cond]."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    return (q * np.geomspace(1.0, cond, n)) @ q.T


def _rel(x, ref):
    return np.linalg.norm(np.asarray(x, np.float64) - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("n, cond", [(1, 1.0), (2, 10.0), (7, 1e2), (30, 1e3), (90, 1e4)])
def test_sweep_inverse_is_as_accurate_as_the_cholesky_inverse(n, cond):
    """Against the float64 inverse: in float32 within a few times the Cholesky inverse's own error."""
    a = _spd(n, cond, seed=n)
    ref = np.linalg.inv(a)
    a32 = jnp.asarray(a, jnp.float32)
    swept = jax.jit(sweep_inverse)(a32)
    cholesky = spd_inverse(a32)
    floor = 8 * np.finfo(np.float32).eps * cond  # the conditioning's own float32 error
    assert _rel(swept, ref) <= max(3 * _rel(cholesky, ref), floor)
    assert np.abs(np.asarray(swept) @ a - np.eye(n)).max() < 50 * np.finfo(np.float32).eps * cond


def test_sweep_inverse_batches_symmetrises_and_calls_no_lapack():
    mats = np.stack([_spd(12, 50.0, seed=s) for s in range(4)])
    batched = np.asarray(jax.jit(jax.vmap(sweep_inverse))(jnp.asarray(mats, jnp.float32)))
    for one, a in zip(batched, mats):
        np.testing.assert_allclose(one, np.linalg.inv(a), rtol=2e-4, atol=2e-5)
    # a matrix symmetric only up to rounding is read as its symmetric part
    a = mats[0]
    skew = np.triu(np.full_like(a, 1e-3), 1)
    lopsided = jnp.asarray(a + skew - skew.T, jnp.float32)
    np.testing.assert_allclose(np.asarray(sweep_inverse(lopsided)), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
    hlo = jax.jit(jax.vmap(sweep_inverse)).lower(jnp.asarray(mats, jnp.float32)).as_text()
    assert "custom_call" not in hlo


def test_sweep_inverse_is_differentiable():
    """d tr(W A^{-1}) / dA = -A^{-T} W^T A^{-T}, through the symmetrisation: its symmetric part."""
    a = _spd(5, 20.0, seed=3)
    w = np.random.default_rng(4).normal(size=(5, 5))
    grad = np.asarray(jax.grad(lambda x: jnp.sum(sweep_inverse(x) * w))(jnp.asarray(a, jnp.float32)))
    inv = np.linalg.inv(a)
    full = -inv.T @ w @ inv.T
    np.testing.assert_allclose(grad, (full + full.T) / 2, rtol=1e-3, atol=1e-4)
