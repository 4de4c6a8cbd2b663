"""maskers.Gaussian: observational coalition values under a multivariate normal."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap.maskers import Gaussian
from oracle import shapley_from_game


def np_conditional(mean, cov, x, subset):
    """Conditional mean and covariance of X given X_S = x_S, from the sub-blocks (NumPy)."""
    m = len(mean)
    s = sorted(subset)
    rest = [j for j in range(m) if j not in subset]
    mu = mean.astype(np.float64).copy()
    k = np.zeros((m, m))
    if not s:
        return mu, cov.astype(np.float64)
    mu[s] = x[s]
    if rest:
        reg = np.linalg.solve(cov[np.ix_(s, s)], cov[np.ix_(s, rest)]).T
        mu[rest] = mean[rest] + reg @ (x[s] - mean[s])
        k[np.ix_(rest, rest)] = cov[np.ix_(rest, rest)] - reg @ cov[np.ix_(s, rest)]
    return mu, k


def oracle_quadratic(a, c, mean, cov, x):
    """Shapley values of E[x'Ax + c'x | x_S] over all subsets (closed form per subset)."""
    m = len(mean)

    def v(s):
        mu, k = np_conditional(mean, cov, x, s)
        return mu @ a @ mu + np.trace(a @ k) + c @ mu

    phi = shapley_from_game(v, m)
    return phi, v(frozenset())


def problem(m, seed):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(m, m))
    cov = b @ b.T / m + 0.3 * np.eye(m)
    return rng.normal(size=m), cov, rng


def test_conditional_draws_have_the_conditional_moments():
    mean, cov, rng = problem(5, 0)
    x = rng.multivariate_normal(mean, cov)
    masker = Gaussian(mean, cov, n_samples=8000, key=1)
    masks = np.array([[1, 0, 1, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=bool)
    draws = np.asarray(masker.conditional_samples(jnp.asarray(x, jnp.float32), jnp.asarray(masks)), np.float64)
    for c, mask in enumerate(masks):
        mu, k = np_conditional(mean, cov, x, set(np.flatnonzero(mask)))
        # antithetic draws: the sample mean is the conditional mean up to float rounding
        np.testing.assert_allclose(draws[c].mean(0), mu, atol=1e-4)
        np.testing.assert_allclose(draws[c][:, mask], np.broadcast_to(x[mask], (8000, mask.sum())), atol=1e-5)
        emp = np.cov(draws[c], rowvar=False)
        np.testing.assert_allclose(emp, k, atol=0.08 * np.abs(cov).max())


def test_linear_model_matches_linear_explainer():
    mean, cov, rng = problem(6, 1)
    coef = rng.normal(size=6)
    x = rng.multivariate_normal(mean, cov, size=4).astype(np.float32)
    model = lambda X: X @ jnp.asarray(coef, jnp.float32) + 0.5
    ours = jaxshap.ExactExplainer(model, Gaussian(mean, cov, n_samples=256))(x)
    ref = jaxshap.LinearExplainer((coef, 0.5), (mean, cov), "correlation_dependent")(x)
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(ref.values), atol=2e-4)
    np.testing.assert_allclose(np.asarray(ours.base_values), np.asarray(ref.base_values), atol=1e-4)


def test_quadratic_model_matches_oracle_within_mc_error():
    mean, cov, rng = problem(4, 2)
    a = rng.normal(size=(4, 4))
    a = 0.3 * (a + a.T) / 2  # a mild interaction, so that 8192 draws give about 1% error
    c = rng.normal(size=4)
    x = rng.multivariate_normal(mean, cov, size=2)
    model = lambda X: jnp.einsum("...i,ij,...j->...", X, jnp.asarray(a, X.dtype), X) + X @ jnp.asarray(c, X.dtype)

    def err(n):
        expl = jaxshap.ExactExplainer(model, Gaussian(mean, cov, n_samples=n, key=3))(x.astype(np.float32))
        phi = np.stack([oracle_quadratic(a, c, mean, cov, row)[0] for row in x])
        return np.abs(np.asarray(expl.values) - phi).max(), np.abs(phi).max()

    err_small, _ = err(16)
    err_big, scale = err(8192)
    assert err_big < 0.05 * scale
    assert err_big < err_small


def test_observational_versus_interventional_example():
    rho = 0.9
    rng = np.random.default_rng(4)
    cov = np.array([[1.0, rho], [rho, 1.0]])
    data = rng.multivariate_normal(np.zeros(2), cov, size=2000).astype(np.float32)
    model = lambda X: X[..., 0]
    x = np.array([[1.0, 1.2], [-0.8, -0.5]], np.float32)
    obs = jaxshap.ExactExplainer(model, Gaussian(np.zeros(2), cov))(x).values
    inter = jaxshap.ExactExplainer(model, data[:200])(x).values
    expected = np.stack([x[:, 0] - rho * x[:, 1] / 2, rho * x[:, 1] / 2], axis=1)
    np.testing.assert_allclose(np.asarray(obs), expected, atol=1e-4)  # X2 gets a share
    np.testing.assert_allclose(np.asarray(inter)[:, 1], 0.0, atol=1e-6)  # and none interventionally
    fitted = jaxshap.ExactExplainer(model, Gaussian.fit(data))(x).values
    np.testing.assert_allclose(np.asarray(fitted), expected, atol=0.05)


def test_permutation_explainer_accepts_gaussian_masker():
    mean, cov, rng = problem(5, 5)
    coef = rng.normal(size=5)
    x = rng.multivariate_normal(mean, cov, size=3).astype(np.float32)
    model = lambda X: jnp.tanh(X @ jnp.asarray(coef, jnp.float32))
    masker = Gaussian(mean, cov, n_samples=256)
    perm = jaxshap.PermutationExplainer(model, masker, n_permutations=64)(x, key=jax.random.key(0))
    exact = jaxshap.ExactExplainer(model, masker)(x)
    assert perm.stderr is not None
    np.testing.assert_allclose(np.asarray(perm.values), np.asarray(exact.values), atol=5 * float(perm.stderr.max()) + 1e-5)
    np.testing.assert_allclose(
        np.asarray(exact.values.sum(1) + exact.base_values), np.asarray(model(x)), rtol=1e-4, atol=1e-5
    )



def test_kernel_explainer_accepts_gaussian_masker():
    # With a budget covering every coalition, KernelSHAP over the same coalition values is exact.
    mean, cov, rng = problem(5, 6)
    coef = rng.normal(size=5)
    x = rng.multivariate_normal(mean, cov, size=3).astype(np.float32)
    model = lambda X: jnp.tanh(X @ jnp.asarray(coef, jnp.float32)) + X[:, 0] * X[:, 1]
    masker = Gaussian(mean, cov, n_samples=256)
    kernel = jaxshap.KernelExplainer(model, masker, n_coalitions=2**5 - 2)(x)
    exact = jaxshap.ExactExplainer(model, masker)(x)
    scale = float(np.abs(np.asarray(exact.values)).max())
    np.testing.assert_allclose(np.asarray(kernel.values), np.asarray(exact.values), atol=1e-5 * scale)
    np.testing.assert_allclose(np.asarray(kernel.base_values), np.asarray(exact.base_values), rtol=1e-6, atol=1e-6)

def test_common_random_numbers_keyed_and_pytree():
    mean, cov, rng = problem(3, 6)
    a, b = Gaussian(mean, cov, n_samples=64, key=7), Gaussian(mean, cov, n_samples=64, key=7)
    np.testing.assert_array_equal(np.asarray(a.noise), np.asarray(b.noise))
    assert np.abs(np.asarray(Gaussian(mean, cov, n_samples=64, key=8).noise) - np.asarray(a.noise)).max() > 0
    assert a.evals_per_coalition == 64 and a.n_features == 3 and a.probe_rows.shape == (1, 3)
    leaves, tree = jax.tree_util.tree_flatten(a)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    x = jnp.asarray(rng.normal(size=3), jnp.float32)
    masks = jnp.array([[True, False, False], [False, True, True]])
    f = lambda X: X.sum(-1, keepdims=True)
    direct = a.coalition_values(f, x, masks)
    jitted = jax.jit(lambda mk, xx: mk.coalition_values(f, xx, masks))(back, x)
    np.testing.assert_allclose(np.asarray(direct), np.asarray(jitted), rtol=1e-6)
    assert direct.shape == (2, 1)


def test_rank_deficient_fit_is_finite():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(50, 2))
    data = np.column_stack([base, base[:, 0]]).astype(np.float32)
    with pytest.warns(UserWarning, match="rank-deficient"):
        masker = Gaussian.fit(data, n_samples=256)
    model = lambda X: jnp.sin(X).sum(-1)
    values = np.asarray(jaxshap.ExactExplainer(model, masker)(data[:5]).values)
    assert np.isfinite(values).all() and np.abs(values).max() < 10
    # the duplicated column and its copy are exchangeable under the model: equal credit
    np.testing.assert_allclose(values[:, 0], values[:, 2], atol=0.02)
    with pytest.warns(UserWarning, match="rank-deficient"):
        few = Gaussian.fit(rng.normal(size=(3, 6)), n_samples=64)
    draws = np.asarray(few.conditional_samples(jnp.zeros(6), jnp.zeros((1, 6), bool)))
    assert np.isfinite(draws).all()


def test_bad_input_raises():
    with pytest.raises(ValueError, match="positive semi-definite"):
        Gaussian(np.zeros(2), np.array([[1.0, 3.0], [3.0, 1.0]]))
    with pytest.raises(ValueError, match=r"shape \[2, 2\]"):
        Gaussian(np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="symmetric"):
        Gaussian(np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="n_samples"):
        Gaussian(np.zeros(2), np.eye(2), n_samples=0)
    with pytest.raises(ValueError, match="at least 2"):
        Gaussian.fit(np.zeros((1, 3)))
    ex = jaxshap.ExactExplainer(lambda X: X.sum(-1), Gaussian(np.zeros(2), np.eye(2), n_samples=8))
    with pytest.raises(ValueError, match="features"):
        ex(np.zeros((1, 3)))


def test_fit_takes_dataframe_names():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.random.default_rng(10).normal(size=(30, 2)), columns=["u", "v"])
    masker = Gaussian.fit(frame, n_samples=16)
    expl = jaxshap.ExactExplainer(lambda X: X[..., 0] * X[..., 1], masker)(frame.to_numpy()[:2])
    assert expl.feature_names == ["u", "v"]


def test_conditional_moments_full_size_matches_numpy():
    from jaxshap._estimators._gaussian import conditional_moments

    _, cov, _ = problem(5, 12)
    d = np.sqrt(np.diag(cov))
    corr = cov / np.outer(d, d)
    mask = np.array([True, False, True, True, False])
    reg, schur = conditional_moments(jnp.asarray(corr, jnp.float32), jnp.asarray(mask))
    s, r = np.flatnonzero(mask), np.flatnonzero(~mask)
    ref_reg = np.zeros((5, 5))
    ref_reg[np.ix_(r, s)] = corr[np.ix_(r, s)] @ np.linalg.inv(corr[np.ix_(s, s)])
    ref_k = np.zeros((5, 5))
    ref_k[np.ix_(r, r)] = corr[np.ix_(r, r)] - ref_reg[np.ix_(r, s)] @ corr[np.ix_(s, r)]
    np.testing.assert_allclose(np.asarray(reg), ref_reg, atol=1e-5)
    np.testing.assert_allclose(np.asarray(schur), ref_k, atol=1e-5)
