"""Numerical robustness (issue 19): bad and ill-conditioned inputs give right answers or clear errors."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap.maskers import Gaussian
from test_linear import oracle_linear

# --- 1. non-finite model output in the effects paths --------------------------------------------


def nan_model(X):
    """Finite except where feature 0 exceeds 1.5: NaN there (a model that breaks on some rows)."""
    return jnp.where(X[:, 0] > 1.5, jnp.nan, X[:, 0] * X[:, 1] + X[:, 2])


def effects_data():
    X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    X[:, 0] = np.clip(X[:, 0], -1.4, 1.4)
    X[7, 0] = 2.0  # only row 7 makes the model NaN
    return X


@pytest.mark.parametrize("which", ["h_statistic", "functional_anova", "partial_dependence"])
def test_effects_raise_on_non_finite_model_output(which):
    X = effects_data()
    call = {
        "h_statistic": lambda: jaxshap.h_statistic(nan_model, X),
        "functional_anova": lambda: jaxshap.functional_anova(nan_model, X),
        "partial_dependence": lambda: jaxshap.partial_dependence(nan_model, X, 0, grid=[0.0, 2.0, 1.0]),
    }[which]
    with pytest.raises(ValueError, match=r"`model` returned NaN or inf") as err:
        call()
    # names the offending row of X (or grid point) so the user can look at it
    where = r"grid point\(s\) \[1\] of `grid` \(1 of 3\)" if which == "partial_dependence" else r"row\(s\) \[7\] of `X` \(1 of 40\)"
    assert re.search(where, str(err.value)), str(err.value)
    # the same model with the bad row dropped runs and gives finite results
    good = np.delete(X, 7, axis=0)
    if which == "h_statistic":
        assert np.isfinite(np.asarray(jaxshap.h_statistic(nan_model, good).overall)).all()


def test_bad_rows_are_named_in_the_users_numbering_after_subsampling():
    X = effects_data()
    with pytest.raises(ValueError, match=r"row\(s\) \[7\] of `X` \(1 of 30\)"):  # 6th in the subsample
        jaxshap.functional_anova(nan_model, X, n_max=30, key=jax.random.key(1))


def test_inf_model_output_also_raises():
    X = effects_data()
    inf_model = lambda X: jnp.where(X[:, 0] > 1.5, jnp.inf, X[:, 0] + X[:, 1])
    with pytest.raises(ValueError, match="NaN or inf"):
        jaxshap.h_statistic(inf_model, X)


def test_check_finite_outputs_names_rows():
    from jaxshap._core._inputs import check_finite_outputs

    check_finite_outputs(np.ones((4, 2)), "`model`")
    values = np.ones((6, 2))
    values[[2, 5], 1] = np.nan
    with pytest.raises(ValueError, match=r"`model` returned NaN or inf at row\(s\) \[2, 5\] \(2 of 6\)"):
        check_finite_outputs(values, "`model`")
    with pytest.raises(ValueError, match=r"\[12, 15\]"):
        check_finite_outputs(values, "`model`", row_ids=np.arange(10, 16))


# --- 2. moments: stable, in float64, constants relative to their own scale -----------------------


def shifted_data(dtype=np.float32):
    rng = np.random.default_rng(3)
    z = rng.normal(size=(400, 3))
    z[:, 1] += 0.8 * z[:, 0]
    data = z.copy()
    data[:, 0] = 1e6 + z[:, 0]  # mean 1e6, std 1: representable in float32 to 0.06
    return data.astype(dtype)


def test_gaussian_fit_moments_of_large_mean_float32_data():
    data = shifted_data()
    masker = Gaussian.fit(data, n_samples=8)
    ref = np.cov(data.astype(np.float64), rowvar=False)
    np.testing.assert_allclose(np.asarray(masker.cov, np.float64), ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(np.asarray(masker.mean, np.float64), data.astype(np.float64).mean(0), rtol=1e-7)


def test_linear_explainer_large_mean_float32_data_matches_oracle():
    data = shifted_data()
    coef = np.array([1.0, -2.0, 0.5])
    ex = jaxshap.LinearExplainer((coef, 0.0), data, "correlation_dependent")
    d64 = data.astype(np.float64)
    mean, cov = d64.mean(0), np.cov(d64, rowvar=False)
    x = d64[:3]
    got = np.asarray(ex(data[:3]).values, np.float64)
    want = np.stack([oracle_linear(coef, 0.0, mean, cov, r)[0][:, 0] for r in x])
    np.testing.assert_allclose(got, want, atol=2e-3 * np.abs(want).max())


@pytest.mark.parametrize("scale", [1e-20, 1e20])
def test_linear_explainer_is_scale_free(scale):
    rng = np.random.default_rng(4)
    z = rng.normal(size=(300, 3))
    z[:, 2] += z[:, 0] - 0.5 * z[:, 1]
    coef = np.array([1.0, 0.5, -1.0])
    ref = jaxshap.LinearExplainer((coef, 0.0), z.astype(np.float32), "correlation_dependent")
    want = np.asarray(ref(z[:4].astype(np.float32)).values)
    scaled = (z * scale).astype(np.float32)
    ex = jaxshap.LinearExplainer((coef / scale, 0.0), scaled, "correlation_dependent")
    got = np.asarray(ex(scaled[:4]).values)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    masker = Gaussian.fit(scaled, n_samples=8)
    corr = np.corrcoef(z, rowvar=False)
    c = np.asarray(masker._g.corr, np.float64)
    np.testing.assert_allclose(c, corr, atol=1e-5)


def test_small_but_real_variance_is_not_constant():
    # a feature measured in tiny units next to one in large units is still a feature
    rng = np.random.default_rng(5)
    z = rng.normal(size=(200, 2))
    z[:, 1] += z[:, 0]
    data = np.column_stack([z[:, 0] * 1e4, z[:, 1] * 1e-4]).astype(np.float32)
    masker = Gaussian.fit(data, n_samples=8)
    assert float(masker._g.scale[1]) > 0
    np.testing.assert_allclose(np.asarray(masker._g.corr)[0, 1], np.corrcoef(z, rowvar=False)[0, 1], atol=1e-5)


def test_data_errors_name_data():
    data = np.random.default_rng(6).normal(size=(20, 2))
    data[3, 1] = np.inf
    with pytest.raises(ValueError, match="`data`"):
        Gaussian.fit(data)
    with pytest.raises(ValueError, match="`data`"):
        jaxshap.LinearExplainer((np.ones(2), 0.0), data, "correlation_dependent")


# --- 3. no eigenvalue floor on well-conditioned covariances -------------------------------------


def conditioned_problem(m, condition, seed):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(m, m)))
    eig = np.geomspace(1.0, 1.0 / condition, m)
    corr = (q * eig) @ q.T
    d = np.sqrt(np.diag(corr))
    corr = corr / np.outer(d, d)  # a correlation matrix with condition number about `condition`
    scale = np.exp(rng.normal(size=m))
    cov = corr * np.outer(scale, scale)
    mean = rng.normal(size=m)
    coef = rng.normal(size=m)
    x = mean + scale * rng.normal(size=(3, m))
    return coef, mean, cov, x


def relative_error(coef, mean, cov, x, dtype):
    ex = jaxshap.LinearExplainer((coef.astype(dtype), 0.0), (mean.astype(dtype), cov.astype(dtype)),
                                 "correlation_dependent", method="exact")
    got = np.asarray(ex(x.astype(dtype)).values, np.float64)
    want = np.stack([oracle_linear(coef, 0.0, mean, cov, r)[0][:, 0] for r in x])
    return np.abs(got - want).max() / np.abs(want).max()


@pytest.mark.parametrize("condition", [1e4, 1e6])
def test_float32_exact_up_to_condition_1e6(condition):
    coef, mean, cov, x = conditioned_problem(6, condition, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no shrinkage warning: nothing is altered
        err = relative_error(coef, mean, cov, x, np.float32)
    assert err < 2e-3, err


def test_float64_exact_up_to_condition_1e12():
    coef, mean, cov, x = conditioned_problem(6, 1e12, 2)
    with jax.enable_x64(True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            err = relative_error(coef, mean, cov, x, np.float64)
    assert err < 1e-5, err


def test_float32_beyond_its_cut_off_uses_a_float64_transform():
    coef, mean, cov, x = conditioned_problem(6, 1e8, 1)
    with pytest.warns(UserWarning, match="numerically singular in float32"):
        err = relative_error(coef, mean, cov, x, np.float32)
    assert err < 3e-2, err  # the float32-regularised answer was about 100% off


def test_singular_covariance_still_regularised_and_finite():
    coef, mean, cov, x = conditioned_problem(6, 1e6, 3)
    z = np.random.default_rng(0).normal(size=(100, 3))
    data = np.column_stack([z, z[:, 0] + z[:, 1]]).astype(np.float32)  # exactly collinear
    with pytest.warns(UserWarning, match="rank-deficient"):
        ex = jaxshap.LinearExplainer((np.ones(4), 0.0), data, "correlation_dependent")
    values = np.asarray(ex(data[:5]).values)
    assert np.isfinite(values).all() and np.abs(values).max() < 50
    np.testing.assert_allclose(values.sum(1), (data[:5] - data.mean(0)).sum(1), rtol=1e-3, atol=1e-3)


# --- 4. LinearExplainer and partial_dependence validation ----------------------------------------


def test_linear_explainer_argument_errors():
    mean, cov, coef = np.zeros(2), np.eye(2), np.ones(2)
    with pytest.raises(ValueError, match="`intercept`.*NaN"):
        jaxshap.LinearExplainer((coef, np.nan), (mean, cov))
    with pytest.raises(ValueError, match="`mean`.*NaN"):
        jaxshap.LinearExplainer((coef, 0.0), (np.array([0.0, np.nan]), None))
    with pytest.raises(TypeError, match="`coef`.*numbers"):
        jaxshap.LinearExplainer((np.array(["a", "b"]), 0.0), (mean, cov))
    with pytest.raises(TypeError, match="`intercept`.*numbers"):
        jaxshap.LinearExplainer((coef, "zero"), (mean, cov))
    with pytest.raises(TypeError, match="`mean`.*numbers"):
        jaxshap.LinearExplainer((coef, 0.0), (np.array(["a", "b"]), cov))
    with pytest.raises(TypeError, match="`cov`.*numbers"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, np.array([["a", "b"], ["c", "d"]])), "correlation_dependent")


def test_partial_dependence_non_numeric_grid():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(TypeError, match="`grid`.*numbers"):
        jaxshap.partial_dependence(lambda X: X.sum(-1), X, 0, grid=["low", "high"])
    with pytest.raises(TypeError, match="`grid`.*numbers"):
        jaxshap.partial_dependence(lambda X: X.sum(-1), X, [0, 1], grid=[["a", "b"]])


# --- 5. finite gradients with a constant column --------------------------------------------------


def constant_column_data():
    rng = np.random.default_rng(8)
    return jnp.asarray(np.column_stack([rng.normal(size=(30, 1)), np.full(30, 2.0)]), jnp.float32)


def test_linear_explainer_gradient_with_constant_column_is_finite():
    data = constant_column_data()
    x = data[:3] + 0.5
    coef = np.array([1.0, 2.0], np.float32)

    def loss(d):
        ex = jaxshap.LinearExplainer((coef, 0.0), d, "correlation_dependent")
        return (ex(x).values ** 2).sum()

    g = np.asarray(jax.grad(loss)(data))
    assert np.isfinite(g).all()
    # the constant column's attribution is coef * (x - mean): its gradient is the plain one
    assert np.abs(g[:, 0]).max() > 0


def test_gaussian_fit_gradient_with_constant_column_is_finite():
    data = constant_column_data()

    def loss(d):
        masker = Gaussian.fit(d, n_samples=16)
        return (masker.conditional_samples(d[0], jnp.array([[True, False]])) ** 2).sum()

    g = np.asarray(jax.grad(loss)(data))
    assert np.isfinite(g).all()


# --- 6. the library's own host linear algebra stays off NumPy's threaded BLAS ---------------------


def test_no_numpy_linear_algebra_on_the_host(monkeypatch):
    rng = np.random.default_rng(9)
    z = rng.normal(size=(50, 3))
    data = np.column_stack([z, z[:, 0] - z[:, 1]])  # singular
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    # slightly indefinite, within the PSD tolerance: a borderline spectrum re-checked in float64
    borderline = (q * np.array([1.0, 0.5, 0.2, -5e-7])) @ q.T

    def forbidden(*args, **kwargs):
        raise AssertionError("NumPy linear algebra was called")

    for name in ("eigvalsh", "eigh", "cholesky", "solve", "inv", "qr", "svd"):
        monkeypatch.setattr(np.linalg, name, forbidden)
    monkeypatch.setattr(np, "cov", forbidden)
    with pytest.warns(UserWarning, match="rank-deficient"):
        jaxshap.LinearExplainer((np.ones(4), 0.0), data, "correlation_dependent")
    with pytest.warns(UserWarning, match="rank-deficient"):
        Gaussian.fit(data, n_samples=8)
    with pytest.warns(UserWarning, match="rank-deficient"):
        Gaussian(np.zeros(4), borderline, n_samples=8)


# --- 7. smaller ----------------------------------------------------------------------------------


def test_float64_values_beyond_float32_range_say_so():
    X = np.ones((3, 2))
    X[1, 0] = 1e300
    ex = jaxshap.LinearExplainer((np.ones(2), 0.0), (np.zeros(2), None))
    with pytest.raises(ValueError, match="too large for float32.*x64"):
        ex(X)


def test_memory_budget_bool_rejected_by_helper():
    from jaxshap._core._validate import memory_budget as check_memory_budget

    assert check_memory_budget(1024) == 1024
    for bad in (True, 0, -5, 1.5, "1GB"):
        with pytest.raises(ValueError, match="`memory_budget`"):
            check_memory_budget(bad)


def test_one_blas_thread_caps_and_restores():
    """The block holds every loaded BLAS at one thread, or with ``lapack=True`` the one behind
    jaxlib's LAPACK and not NumPy's own, and restores the counts (through threadpoolctl)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from jaxshap._core._platform import one_blas_thread

    np.ones((64, 64)) @ np.ones((64, 64))  # NumPy's BLAS is loaded
    jnp.linalg.cholesky(jnp.eye(3)).block_until_ready()  # and the LAPACK jaxlib calls
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        counts = lambda: {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}  # noqa: E731
        before = counts()
        if not before:
            pytest.skip("no BLAS library that threadpoolctl controls")
        with one_blas_thread():
            assert set(counts().values()) == {1}
        assert counts() == before
        numpy_own = {p for p in before if "numpy" in p.split("site-packages")[-1]}
        with one_blas_thread(lapack=True):
            now = counts()
            assert all(now[p] == (before[p] if p in numpy_own else 1) for p in before), now
        assert counts() == before
