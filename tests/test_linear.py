"""LinearExplainer: interventional and Gaussian correlation-dependent Shapley values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

# --- an independent NumPy oracle, written from the definition ---------------------------------


def conditional_mean(mean, cov, x, subset):
    """E[X | X_S = x_S] for X ~ N(mean, cov), by solving with the sub-blocks directly."""
    out = mean.astype(np.float64).copy()
    s = list(subset)
    if not s:
        return out
    rest = [j for j in range(len(mean)) if j not in subset]
    out[s] = x[s]
    if rest:
        reg = np.linalg.solve(cov[np.ix_(s, s)], cov[np.ix_(s, rest)]).T
        out[rest] = mean[rest] + reg @ (x[s] - mean[s])
    return out


def oracle_shapley(value, m):
    """Shapley values of a set function ``value(frozenset) -> array`` and its empty-set value."""
    return shapley_from_game(value, m), np.asarray(value(frozenset()), np.float64)


def oracle_linear(coef, intercept, mean, cov, x):
    """Observational Shapley values of a linear model at one row: ([M, K], [K])."""
    coef = np.atleast_2d(coef)
    return oracle_shapley(lambda s: coef @ conditional_mean(mean, cov, x, s) + intercept, len(mean))


def random_problem(m, seed, k=None):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, m))
    cov = a @ a.T / m + 0.2 * np.eye(m)
    scale = np.exp(rng.normal(size=m))  # features in different units
    cov = cov * np.outer(scale, scale)
    mean = rng.normal(size=m)
    coef = rng.normal(size=m if k is None else (k, m))
    intercept = 0.5 if k is None else rng.normal(size=k)
    x = rng.multivariate_normal(mean, cov, size=3)
    return coef, intercept, mean, cov, x


# --- the Janzing et al. (2020) example ---------------------------------------------------------


@pytest.mark.parametrize("method", ["exact", "sampled"])
def test_janzing_example_observational_and_interventional(method):
    rho = 0.7
    cov = np.array([[1.0, rho], [rho, 1.0]])
    x = np.array([[1.0, 2.0], [-0.5, 0.3], [2.0, -1.0]])
    model = (np.array([1.0, 0.0]), 0.0)
    obs = jaxshap.LinearExplainer(model, (np.zeros(2), cov), "correlation_dependent", method=method, n_permutations=4)
    expected = np.stack([x[:, 0] - rho * x[:, 1] / 2, rho * x[:, 1] / 2], axis=1)
    np.testing.assert_allclose(np.asarray(obs(x).values), expected, atol=1e-5)
    inter = jaxshap.LinearExplainer(model, (np.zeros(2), cov), "interventional")
    np.testing.assert_allclose(np.asarray(inter(x).values), np.stack([x[:, 0], 0 * x[:, 0]], 1), atol=1e-6)


def test_interventional_formula_and_base_value():
    coef, b, mean, cov, x = random_problem(5, 1)
    data = np.random.default_rng(2).multivariate_normal(mean, cov, size=50)
    expl = jaxshap.LinearExplainer((coef, b), data)(x)
    mu = data.mean(0)
    np.testing.assert_allclose(np.asarray(expl.values), coef * (x - mu), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.base_values), np.full(3, coef @ mu + b), rtol=1e-5)
    assert expl.stderr is None


# --- against the brute-force oracle ------------------------------------------------------------


def test_exact_mode_matches_oracle_m8():
    coef, b, mean, cov, x = random_problem(8, 3)
    ex = jaxshap.LinearExplainer((coef, b), (mean, cov), "correlation_dependent")
    assert ex.method == "exact"
    expl = ex(x)
    for r in range(x.shape[0]):
        phi, base = oracle_linear(coef, b, mean, cov, x[r])
        np.testing.assert_allclose(np.asarray(expl.values[r]), phi[:, 0], rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(float(expl.base_values[r]), base[0], rtol=1e-5)
    # efficiency, every row
    pred = x @ coef + b
    np.testing.assert_allclose(np.asarray(expl.values.sum(1) + expl.base_values), pred, rtol=1e-4, atol=1e-4)
    assert expl.stderr is None


def test_sampled_mode_matches_oracle_within_mc_error_and_is_keyed():
    coef, b, mean, cov, x = random_problem(8, 4)
    phi = np.stack([oracle_linear(coef, b, mean, cov, row)[0][:, 0] for row in x])

    def run(n, seed):
        ex = jaxshap.LinearExplainer(
            (coef, b), (mean, cov), "correlation_dependent", method="sampled", n_permutations=n, key=seed
        )
        return np.asarray(ex(x).values)

    few, many = run(20, 0), run(2000, 0)
    err_few, err_many = np.abs(few - phi).max(), np.abs(many - phi).max()
    scale = np.abs(phi).max()
    assert err_many < 0.03 * scale  # 1000 antithetic pairs: well within a few percent
    assert err_many < err_few  # the error shrinks with the budget
    np.testing.assert_array_equal(run(20, 0), few)  # keyed: reproducible
    assert np.abs(run(20, 1) - few).max() > 0  # another key, another estimate
    np.testing.assert_allclose(few.sum(1), (x - mean) @ coef, rtol=1e-4, atol=1e-4)  # efficiency


@pytest.mark.parametrize("rotations", [(0,), (0, 3)])
def test_walk_kernel_matches_prefix_regressions(rotations):
    """The Cholesky-of-the-precision walk kernel against explicit sub-block solves along each walk."""
    import jax

    from jaxshap._estimators import _gaussian

    with jax.enable_x64(True):
        rng = np.random.default_rng(4)
        m, k = 7, 2
        a = rng.normal(size=(m, m))
        corr = a @ a.T / m + 0.2 * np.eye(m)
        d = np.sqrt(np.diag(corr))
        corr = corr / np.outer(d, d)
        beta = rng.normal(size=(k, m))
        order = rng.permutation(m)
        got = np.asarray(
            _gaussian.antithetic_linear_steps(
                _gaussian.precision_matrix(corr), beta, corr @ beta.T, np.asarray(order), rotations
            )
        )

        def weights(subset):  # beta E[z | z_S] = w . z, with w zero outside S
            w = np.zeros((k, m))
            s = sorted(subset)
            if s:
                w[:, s] = np.linalg.solve(corr[np.ix_(s, s)], (corr @ beta.T)[s]).T
            return w

        want = np.zeros((k, m, m))  # [k, z coordinate, feature]
        for r in rotations:
            turned = np.roll(order, -r)
            for walk in (turned[::-1], turned):
                for j, feature in enumerate(walk):
                    want[:, :, feature] += weights(walk[: j + 1]) - weights(walk[:j])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got.sum(-1), 2 * len(rotations) * beta, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [2, 4, 6])
def test_sampled_transform_efficiency_for_every_budget_shape(n):
    """Groups of four walks, a trailing pair, or both: every budget telescopes to beta."""
    coef, b, mean, cov, x = random_problem(9, 6)
    ex = jaxshap.LinearExplainer((coef, b), (mean, cov), "correlation_dependent", method="sampled", n_permutations=n)
    np.testing.assert_allclose(np.asarray(ex(x).values).sum(1), (x - mean) @ coef, rtol=1e-4, atol=1e-4)


def test_sampled_and_exact_transforms_agree_in_float64():
    import jax

    with jax.enable_x64(True):
        coef, b, mean, cov, _ = random_problem(6, 5)
        exact = jaxshap.LinearExplainer((coef, b), (mean, cov), "correlation_dependent", method="exact")
        sampled = jaxshap.LinearExplainer(
            (coef, b), (mean, cov), "correlation_dependent", method="sampled", n_permutations=20000
        )
        assert exact.transform.dtype == np.float64
        diff = np.abs(np.asarray(exact.transform) - np.asarray(sampled.transform)).max()
        assert diff < 0.01 * np.abs(np.asarray(exact.transform)).max()


def test_multi_output_matches_oracle():
    coef, b, mean, cov, x = random_problem(5, 6, k=3)
    data = (mean, cov)
    expl = jaxshap.LinearExplainer((coef, b), data, "correlation_dependent")(x)
    assert expl.values.shape == (3, 5, 3) and expl.base_values.shape == (3, 3)
    assert expl.output_names == ["Output 0", "Output 1", "Output 2"]
    for r in range(x.shape[0]):
        phi, base = oracle_linear(coef, b, mean, cov, x[r])
        np.testing.assert_allclose(np.asarray(expl.values[r]), phi, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(np.asarray(expl.base_values[r]), base, rtol=1e-5, atol=1e-6)
    inter = jaxshap.LinearExplainer((coef, b), data, "interventional")(x)
    np.testing.assert_allclose(
        np.asarray(inter.values), (x - mean)[:, :, None] * coef.T[None], rtol=1e-5, atol=1e-6
    )


def test_sklearn_model_and_dataframe_names():
    pd = pytest.importorskip("pandas")
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 4)) @ rng.normal(size=(4, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 3.0
    frame = pd.DataFrame(X, columns=list("abcd"))
    model = LinearRegression().fit(frame.to_numpy(), y)
    expl = jaxshap.LinearExplainer(model, frame, "correlation_dependent")(X[:5])
    assert expl.feature_names == list("abcd")
    np.testing.assert_allclose(
        np.asarray(expl.values.sum(1) + expl.base_values), model.predict(X[:5]), rtol=1e-4, atol=1e-3
    )


# --- numerics: rank deficiency and bad input ---------------------------------------------------


def test_duplicated_column_gives_finite_shared_values():
    rng = np.random.default_rng(8)
    base = rng.normal(size=(300, 3))
    data = np.column_stack([base, base[:, 0]])  # column 3 duplicates column 0
    coef = np.array([1.0, 0.5, -1.0, 1.0])
    with pytest.warns(UserWarning, match="rank-deficient"):
        ex = jaxshap.LinearExplainer((coef, 0.0), data, "correlation_dependent")
    x = data[:10]
    values = np.asarray(ex(x).values)
    assert np.isfinite(values).all()
    assert np.abs(values).max() < 10 * np.abs(x).max() * np.abs(coef).sum()
    # The two copies are indistinguishable: equal coefficients give equal credit.
    np.testing.assert_allclose(values[:, 0], values[:, 3], atol=1e-3 * np.abs(values).max())
    np.testing.assert_allclose(values.sum(1), (x - data.mean(0)) @ coef, rtol=1e-4, atol=1e-4)


def test_fewer_rows_than_features_is_finite_and_sensible():
    rng = np.random.default_rng(9)
    data = rng.normal(size=(6, 12))
    coef = rng.normal(size=12)
    with pytest.warns(UserWarning, match="rank-deficient"):
        ex = jaxshap.LinearExplainer((coef, 1.0), data, "correlation_dependent", method="sampled", n_permutations=64)
    x = rng.normal(size=(5, 12))
    values = np.asarray(ex(x).values)
    assert np.isfinite(values).all()
    assert np.abs(values).max() < 1e3
    np.testing.assert_allclose(values.sum(1), (x - data.mean(0)) @ coef, rtol=1e-3, atol=1e-3)


def test_nearly_collinear_no_huge_values():
    rng = np.random.default_rng(10)
    z = rng.normal(size=(500, 1))
    data = np.column_stack([z, z + 1e-6 * rng.normal(size=(500, 1)), rng.normal(size=(500, 1))])
    coef = np.array([1.0, 1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = jaxshap.LinearExplainer((coef, 0.0), data, "correlation_dependent")
    values = np.asarray(ex(data[:20]).values)
    assert np.isfinite(values).all() and np.abs(values).max() < 50


def test_constant_feature_is_independent():
    rng = np.random.default_rng(11)
    data = np.column_stack([rng.normal(size=(100, 2)), np.full(100, 3.0)])
    coef = np.array([1.0, 2.0, 5.0])
    ex = jaxshap.LinearExplainer((coef, 0.0), data, "correlation_dependent")
    x = np.array([[0.5, 0.1, 4.0]])
    values = np.asarray(ex(x).values)
    assert np.isfinite(values).all()
    np.testing.assert_allclose(values[0, 2], 5.0 * (4.0 - 3.0), rtol=1e-5)


def test_bad_covariances_and_shapes_raise():
    mean = np.zeros(3)
    good = np.eye(3)
    coef = np.ones(3)
    not_psd = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="positive semi-definite"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, not_psd), "correlation_dependent")
    with pytest.raises(ValueError, match="symmetric"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, good + np.triu(np.ones((3, 3)), 1)), "correlation_dependent")
    with pytest.raises(ValueError, match=r"shape \[3, 3\]"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, np.eye(4)), "correlation_dependent")
    with pytest.raises(ValueError, match="mean"):
        jaxshap.LinearExplainer((coef, 0.0), (np.zeros(4), np.eye(4)), "correlation_dependent")
    with pytest.raises(ValueError, match="features"):
        jaxshap.LinearExplainer((coef, 0.0), np.zeros((10, 4)), "interventional")
    with pytest.raises(ValueError, match="intercept"):
        jaxshap.LinearExplainer((np.ones((2, 3)), np.zeros(3)), (mean, good))
    with pytest.raises(ValueError, match="feature_perturbation"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, good), "observational")
    with pytest.raises(ValueError, match="n_permutations"):
        jaxshap.LinearExplainer((coef, 0.0), (mean, good), "correlation_dependent", n_permutations=3)
    with pytest.raises(TypeError, match="coef_"):
        jaxshap.LinearExplainer(lambda x: x, (mean, good))
    ex = jaxshap.LinearExplainer((coef, 0.0), (mean, good), "correlation_dependent")
    with pytest.raises(ValueError, match="features"):
        ex(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="NaN"):
        ex(np.array([[np.nan, 0.0, 0.0]]))


# --- against shap ------------------------------------------------------------------------------


def test_against_shap_correlation_dependent():
    shap = pytest.importorskip("shap")
    coef, b, mean, cov, x = random_problem(6, 12)
    data = np.random.default_rng(13).multivariate_normal(mean, cov, size=400)
    ours = np.asarray(jaxshap.LinearExplainer((coef, b), data, "correlation_dependent")(x).values)
    np.random.seed(0)  # shap samples its permutations with NumPy's global generator
    ref = shap.LinearExplainer((coef, b), data, feature_perturbation="correlation_dependent", nsamples=2000)
    theirs = ref.shap_values(x)
    # shap's transform is itself estimated from 2000 (non-antithetic) permutations.
    np.testing.assert_allclose(ours, theirs, atol=0.03 * np.abs(theirs).max())
    np.testing.assert_allclose(float(ref.expected_value), (coef @ data.mean(0) + b), rtol=1e-5)


def test_sampled_transform_chunking_is_invisible():
    """The vectorised path (chunks of groups, the accelerator default) equals the scan of one group
    at a time, including padding and a trailing pair."""
    import jax
    import jax.numpy as jnp

    from jaxshap._estimators import _gaussian

    coef, _, _, cov, _ = random_problem(7, 8)
    d = np.sqrt(np.diag(cov))
    corr = jnp.asarray(cov / np.outer(d, d), jnp.float32)
    beta = jnp.asarray(coef * d, jnp.float32)[None]
    key = jax.random.key(3)
    one = _gaussian.sampled_transform(key, corr, beta, 22, chunk=1)  # 5 groups and a pair
    for chunk in (2, 3):
        np.testing.assert_allclose(_gaussian.sampled_transform(key, corr, beta, 22, chunk=chunk), one, rtol=1e-5, atol=1e-6)


def test_construction_on_host_parameters_compiles_nothing():
    """Fitted coefficients and background rows are shaped and averaged on the host: building the
    explainer compiles no program (each eager JAX operation would compile one per shape, about
    0.3 s of a small job's second run), and the base value is the float64 one rounded once."""
    import jax
    from conftest import CountCompiles

    rng = np.random.default_rng(3)
    data = rng.normal(5.0, 2.0, size=(37, 7))
    coef, intercept = rng.normal(size=(1, 7)), np.array([0.25])  # a binary classifier's [1, M]
    jax.clear_caches()
    with CountCompiles() as compiles:
        ex = jaxshap.LinearExplainer((coef, intercept), data)
    assert compiles.names == []
    mean = data.mean(0)
    assert float(ex.expected_value) == np.float32(coef[0] @ mean + intercept[0])
    expl = ex(data[:3])
    np.testing.assert_allclose(expl.values, coef[0] * (data[:3] - mean), rtol=1e-5, atol=1e-5)
