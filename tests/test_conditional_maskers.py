"""maskers.Empirical and maskers.GaussianCopula: observational value functions of Aas et al. (2021)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxshap
from bench.conditional_baselines import empirical_shapley_numpy, empirical_weights
from jaxshap.maskers import Empirical, Gaussian, GaussianCopula, Independent
from jaxshap.maskers._independent import shap_sample_rows

M = 4


def correlated(n, m=M, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, m))
    cov = a @ a.T / m + 0.2 * np.eye(m)
    return rng.multivariate_normal(np.zeros(m), cov, size=n), cov, rng


W = np.array([0.8, -1.1, 0.5, 0.3])


def model_np(z):
    return np.tanh(z @ W) + z[..., 0] * z[..., 1]


def model(z):
    return jnp.tanh(z @ jnp.asarray(W, z.dtype)) + z[..., 0] * z[..., 1]


def linear(beta, z):
    return z @ beta


# --- Empirical against the definition ------------------------------------------------------------


@pytest.mark.parametrize("sigma, eta", [(0.1, 0.95), (0.4, 0.7), (2.0, 1.0)])
def test_empirical_matches_numpy_oracle(sigma, eta):
    data, _, rng = correlated(150)
    X = data[:3] + rng.normal(scale=0.1, size=(3, M))
    with jax.enable_x64(True):
        expl = jaxshap.ExactExplainer(model, Empirical(data, sigma, eta))(X)
        values, base = np.asarray(expl.values), np.asarray(expl.base_values)
    ref, ref_base = empirical_shapley_numpy(model_np, data, X, sigma, eta, return_base=True)
    np.testing.assert_allclose(values, ref, atol=1e-10)
    np.testing.assert_allclose(base, ref_base, atol=1e-10)


def test_empirical_float32_close_to_oracle():
    data, _, rng = correlated(150, seed=1)
    X = data[:4] + rng.normal(scale=0.1, size=(4, M))
    expl = jaxshap.ExactExplainer(model, Empirical(data.astype(np.float32)))(X.astype(np.float32))
    ref = empirical_shapley_numpy(model_np, data.astype(np.float32), X.astype(np.float32))
    np.testing.assert_allclose(np.asarray(expl.values), ref, atol=2e-4)


def test_weights_match_the_eta_cut_and_cap():
    data, _, rng = correlated(400, seed=2)
    x = data[7] + 0.05
    masker = Empirical(data, 0.3, 0.9, max_samples=50)
    perm = np.concatenate([shap_sample_rows(400, 50), np.setdiff1d(np.arange(400), shap_sample_rows(400, 50))])
    for subset in [(0,), (1, 3), (0, 1, 2)]:
        mask = np.isin(np.arange(M), subset)
        rows, w = masker.kept_weights(jnp.asarray(x, jnp.float32), jnp.asarray(mask))
        got = np.zeros(400)
        np.add.at(got, perm[np.asarray(rows)], np.asarray(w))
        ref = empirical_weights(data, x, subset, 0.3, 0.9, max_samples=50)
        np.testing.assert_allclose(got, ref, atol=2e-6)
    # the empty coalition: shap's sample of 50 rows, equally weighted
    rows, w = masker.kept_weights(jnp.asarray(x, jnp.float32), jnp.zeros(M, bool))
    assert sorted(perm[np.asarray(rows)]) == sorted(shap_sample_rows(400, 50))
    np.testing.assert_allclose(np.asarray(w), 1 / 50, rtol=1e-6)
    assert masker.evals_per_coalition == 50


@pytest.mark.parametrize("sigma, eta, cap, duplicated", [
    (0.3, 0.5, None, True), (0.3, 0.95, None, True), (5.0, 0.95, None, True), (0.3, 1.0, None, True),
    (0.3, 0.95, 30, False), (5.0, 0.95, 30, False), (5.0, 1.0, 30, False), (0.05, 0.99, 30, False),
])
def test_weights_match_the_oracle_with_ties_and_a_binding_cap(sigma, eta, cap, duplicated):
    """The kept rows and weights against the sorted-order oracle, for many coalitions: tied
    rows (every row twice) without a cap, and a cap that binds (wide kernels) without ties."""
    data, _, rng = correlated(150, seed=21)
    if duplicated:
        data = np.concatenate([data, data[::-1]])
    n = data.shape[0]
    masker = Empirical(data, sigma, eta, max_samples=cap)
    first = shap_sample_rows(n, cap) if cap is not None else np.arange(n)
    perm = np.concatenate([first, np.setdiff1d(np.arange(n), first)])
    for x in (data[3], data[40] + 0.07 * rng.normal(size=M)):
        for subset in [(0,), (2,), (1, 3), (0, 1, 2), (0, 1, 2, 3)]:
            mask = np.isin(np.arange(M), subset)
            rows, w = masker.kept_weights(jnp.asarray(x, jnp.float32), jnp.asarray(mask))
            got = np.zeros(n)
            np.add.at(got, perm[np.asarray(rows)], np.asarray(w))
            ref = empirical_weights(data, x, subset, sigma, eta, max_samples=cap)
            np.testing.assert_allclose(got, ref, atol=2e-6)


def test_wide_kernel_with_eta_one_is_independent():
    data, _, rng = correlated(80, seed=3)
    X = rng.normal(size=(3, M)).astype(np.float32)
    data = data.astype(np.float32)
    ours = jaxshap.ExactExplainer(model, Empirical(data, sigma=1e6, eta=1.0))(X)
    ind = jaxshap.ExactExplainer(model, Independent(data, max_samples=None))(X)
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(ind.values), atol=1e-5)
    np.testing.assert_allclose(np.asarray(ours.base_values), np.asarray(ind.base_values), atol=1e-5)


def test_narrow_kernel_is_the_nearest_neighbour():
    data, cov, rng = correlated(100, seed=4)
    x = rng.normal(size=M)
    masks = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 1, 0, 1], [0, 0, 0, 1]], bool)
    with jax.enable_x64(True):
        f = lambda z: model(z)[..., None]  # the protocol's models return [..., K]
        got = np.asarray(Empirical(data, sigma=1e-4).coalition_values(f, jnp.asarray(x), jnp.asarray(masks)))[:, 0]
    sample_cov = np.cov(data, rowvar=False)
    for c, mask in enumerate(masks):
        s = np.flatnonzero(mask)
        diff = x[s] - data[:, s]
        d2 = np.einsum("ki,ij,kj->k", diff, np.linalg.inv(sample_cov[np.ix_(s, s)]), diff)
        nearest = data[np.argmin(d2)].copy()
        nearest[s] = x[s]
        np.testing.assert_allclose(got[c], model_np(nearest), atol=1e-8)


# --- the Shapley axioms and the explainers ------------------------------------------------------------


def symmetric_model(z):
    return jnp.sin(z[..., 0] + z[..., 1]) + z[..., 0] * z[..., 1] * z[..., 2] + z[..., 3]


def test_empirical_efficiency_and_symmetry():
    base, _, rng = correlated(60, seed=5)
    data = np.concatenate([base, base[:, [1, 0, 2, 3]]]).astype(np.float32)  # exchangeable in 0 and 1
    X = rng.normal(size=(3, M)).astype(np.float32)
    X[:, 1] = X[:, 0]
    expl = jaxshap.ExactExplainer(symmetric_model, Empirical(data, sigma=0.3))(X)
    values = np.asarray(expl.values)
    np.testing.assert_allclose(values[:, 0], values[:, 1], atol=1e-5)
    total = values.sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, np.asarray(symmetric_model(jnp.asarray(X))), atol=1e-5)


@pytest.mark.parametrize("make", [lambda d: Empirical(d), lambda d: GaussianCopula(d, n_samples=256)])
def test_every_explainer_works(make):
    data, _, rng = correlated(200, seed=6)
    masker = make(data.astype(np.float32))
    X = data[:3].astype(np.float32) + 0.1
    exact = jaxshap.ExactExplainer(model, masker)(X)
    kernel = jaxshap.KernelExplainer(model, masker, n_coalitions=2**M)(X)  # every coalition: exact
    perm = jaxshap.PermutationExplainer(model, masker, n_permutations=512)(jnp.asarray(X), key=jax.random.key(0))
    fx = np.asarray(model(jnp.asarray(X)))
    for expl in (exact, kernel, perm):
        np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), fx, atol=1e-5)
    np.testing.assert_allclose(np.asarray(kernel.values), np.asarray(exact.values), atol=1e-5)
    # sampled orders: unbiased, within a few of their own standard errors of the exact values
    gap = np.abs(np.asarray(perm.values) - np.asarray(exact.values))
    assert (gap <= 4 * np.asarray(perm.stderr) + 1e-4).all(), (gap, np.asarray(perm.stderr))


@pytest.mark.parametrize("make", [lambda d: Empirical(d, sigma=0.3), lambda d: GaussianCopula(d, n_samples=128)])
def test_jit_and_grad_in_model_parameters(make):
    data, _, rng = correlated(120, seed=7)
    masker = make(data.astype(np.float32))
    X = jnp.asarray(data[:2] + 0.1, jnp.float32)
    beta = jnp.asarray([0.5, -1.0, 2.0, 0.3], jnp.float32)

    def phi(b):
        return jaxshap.ExactExplainer(partial(linear, b), masker)(X).values

    eager = phi(beta)
    np.testing.assert_allclose(np.asarray(jax.jit(phi)(beta)), np.asarray(eager), atol=1e-5)
    # the game is linear in beta: d phi[r, j] / d beta_i is phi[r, j] of the model z -> z_i
    jac = jax.jacobian(phi)(beta)  # [n, M, M_beta]
    for i in range(M):
        e_i = jnp.zeros(M, jnp.float32).at[i].set(1.0)
        # float32 rounding of two differently compiled sums (the copula: 1.5e-5 here; 2e-14 in float64)
        np.testing.assert_allclose(np.asarray(jac[..., i]), np.asarray(phi(e_i)), atol=5e-5)


@pytest.mark.parametrize("make", [lambda d: Empirical(d, max_samples=64), lambda d: GaussianCopula(d, n_samples=256)])
def test_small_memory_budget_gives_the_same_values(make):
    data, _, rng = correlated(300, seed=8)
    masker = make(data.astype(np.float32))
    X = data[:5].astype(np.float32) + 0.1
    full = jaxshap.ExactExplainer(model, masker)(X)
    small = jaxshap.ExactExplainer(model, masker, memory_budget=2**14)(X)
    np.testing.assert_allclose(np.asarray(small.values), np.asarray(full.values), atol=1e-6)


# --- categorical features -----------------------------------------------------------------------------


def mixed_data(n=160, seed=9):
    data, _, rng = correlated(n, seed=seed)
    data[:, 2] = (data[:, 2] > 0).astype(float) + (data[:, 0] > 1)  # codes 0, 1, 2, tied to feature 0
    return data, rng


def test_empirical_categorical_matches_oracle():
    data, rng = mixed_data()
    X = data[:3] + np.array([0.1, -0.1, 0.0, 0.05])
    X[2, 2] = 7.0  # a category no training row has: the rows with the fewest mismatches count
    with jax.enable_x64(True):
        expl = jaxshap.ExactExplainer(model, Empirical(data, 0.2, 0.9, categorical=[2]))(X)
        values = np.asarray(expl.values)
    ref = empirical_shapley_numpy(model_np, data, X, 0.2, 0.9, categorical=[2])
    np.testing.assert_allclose(values, ref, atol=1e-10)


def test_categorical_rows_match_exactly():
    data, rng = mixed_data(seed=10)
    x = jnp.asarray(data[5] + 0.01, jnp.float32).at[2].set(data[5, 2])
    masker = Empirical(data.astype(np.float32), sigma=5.0, eta=1.0, categorical=[2])
    rows, w = masker.kept_weights(x, jnp.asarray([False, False, True, True]))
    used = np.asarray(rows)[np.asarray(w) > 0]
    assert len(used) == int((data[:, 2] == data[5, 2]).sum())
    assert (np.asarray(masker.data)[used, 2] == data[5, 2]).all()


def test_pandas_category_columns_are_found():
    data, rng = mixed_data(seed=11)
    labels = np.array(["a", "b", "c"])[data[:, 2].astype(int)]
    frame = pd.DataFrame({"f0": data[:, 0], "f1": data[:, 1], "kind": pd.Categorical(labels), "f3": data[:, 3]})
    by_frame = Empirical(frame, sigma=0.3)
    by_index = Empirical(data, sigma=0.3, categorical=["kind"], feature_names=["f0", "f1", "kind", "f3"])
    assert by_frame.categorical == by_index.categorical == (2,)
    assert by_frame.feature_names == ("f0", "f1", "kind", "f3")
    X = data[:2].astype(np.float32)
    a = jaxshap.ExactExplainer(model, by_frame)(X).values
    b = jaxshap.ExactExplainer(model, by_index)(X).values
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


# --- conditional draws -----------------------------------------------------------------------------------


def test_empirical_draws_pick_kept_training_rows():
    data, _, rng = correlated(90, seed=12)
    data = data.astype(np.float32)
    masker = Empirical(data, sigma=1e-4)
    rows = data[:6] + 0.01
    given = np.array([True, False, True, False])
    draws = np.asarray(masker.draw_conditional(jax.random.key(0), rows, jnp.asarray(given)))
    np.testing.assert_array_equal(draws[:, given], rows[:, given])
    for r, d in zip(rows, draws):  # sigma -> 0: the nearest row (by the coalition's distance) fills in
        idx, w = masker.kept_weights(jnp.asarray(r), jnp.asarray(given))
        np.testing.assert_allclose(d[~given], np.asarray(masker.data)[int(idx[np.argmax(np.asarray(w))])][~given])
    # a wide kernel: every kept row can come up, so many draws of one row are spread out
    wide = Empirical(data, sigma=50.0, eta=1.0)
    many = np.asarray(wide.draw_conditional(jax.random.key(1), np.repeat(rows[:1], 400, 0), jnp.asarray(given)))
    assert len(np.unique(many[:, 1])) > 75  # of 90 rows
    assert np.isin(many[:, 1], data[:, 1]).all()


def test_copula_draws_follow_the_conditional():
    data, _, rng = correlated(3000, seed=13)
    masker = GaussianCopula(data.astype(np.float32), n_samples=4096)
    x = jnp.asarray(data[0], jnp.float32)
    given = jnp.asarray([True, False, False, True])
    draws = np.asarray(masker.draw_conditional(jax.random.key(2), jnp.tile(x, (4096, 1)), given))
    np.testing.assert_array_equal(draws[:, [0, 3]], np.broadcast_to(np.asarray(x)[[0, 3]], (4096, 2)))
    ref = np.asarray(masker.conditional_samples(x, given[None, :]))[0]
    # independent draws of the same conditional: means agree to a few standard errors
    se = ref.std(0) * np.sqrt(2.0 / 4096)
    assert (np.abs(draws.mean(0) - ref.mean(0)) <= 5 * se + 1e-6).all()


# --- GaussianCopula against closed forms -----------------------------------------------------------------


def test_copula_on_gaussian_data_is_the_gaussian_masker():
    data, _, rng = correlated(20000, seed=14)
    data = data.astype(np.float32)
    X = data[:4]
    copula = jaxshap.ExactExplainer(model, GaussianCopula(data, n_samples=2048, key=3))(X)
    gauss = jaxshap.ExactExplainer(model, Gaussian.fit(data, n_samples=2048, key=3))(X)
    # Same draws (common key): what differs is the estimated marginals, whose quantiles are off by
    # about sd / sqrt(N) ~ 0.01 (0.03 in the tails the draws reach), times the model's slope (~2).
    np.testing.assert_allclose(np.asarray(copula.values), np.asarray(gauss.values), atol=0.04)
    np.testing.assert_allclose(np.asarray(copula.base_values), np.asarray(gauss.base_values), atol=0.04)


def test_copula_recovers_log_normal_conditional_means():
    m = 3
    rng = np.random.default_rng(15)
    mu = np.array([0.2, -0.1, 0.4])
    sd = np.array([0.5, 0.4, 0.6])
    corr = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.5], [0.3, 0.5, 1.0]])
    cov = corr * np.outer(sd, sd)
    y = rng.multivariate_normal(mu, cov, size=40000)
    masker = GaussianCopula(np.exp(y).astype(np.float32), n_samples=40000, key=4)
    y0 = mu + np.array([0.3, -0.4, 0.2])
    for given in ([0], [1, 2], [0, 2]):
        s, rest = list(given), [j for j in range(m) if j not in given]
        mask = np.isin(np.arange(m), s)
        reg = cov[np.ix_(rest, s)] @ np.linalg.inv(cov[np.ix_(s, s)])
        cmean = mu[rest] + reg @ (y0[s] - mu[s])
        cvar = np.diag(cov[np.ix_(rest, rest)] - reg @ cov[np.ix_(s, rest)])
        closed = np.exp(cmean + cvar / 2)
        draws = np.asarray(masker.conditional_samples(jnp.asarray(np.exp(y0), jnp.float32), jnp.asarray(mask)[None]))
        got = draws[0][:, rest].mean(0)
        # Monte-Carlo error sd*sqrt(exp(var)-1)/sqrt(n) ~ 0.3%; marginal quantiles from 40000 rows
        # ~ 0.5%; the correlation of the scores ~ 0.005: 3% covers them with room.
        np.testing.assert_allclose(got, closed, rtol=0.03)


def test_copula_efficiency():
    data, _, rng = correlated(500, seed=16)
    X = data[:3].astype(np.float32)
    expl = jaxshap.ExactExplainer(model, GaussianCopula(data.astype(np.float32), n_samples=512))(X)
    total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, np.asarray(model(jnp.asarray(X))), atol=1e-5)


def test_copula_marginal_transforms_round_trip():
    data, _, rng = correlated(200, seed=17)
    data = np.round(data, 1).astype(np.float32)  # ties: they share their mean rank
    masker = GaussianCopula(data, n_samples=8)
    # the level Phi(z) is exact to float32's absolute epsilon (the back-transform's one-erf CDF); at the
    # extreme ranks, where a table cell spans a wide gap between order statistics, that is ~2e-5 here
    np.testing.assert_allclose(np.asarray(masker.from_scores(masker.scores(jnp.asarray(data)))), data, atol=5e-5)
    # a training value's score is the normal score of its mean rank / (N + 1)
    from scipy.stats import norm, rankdata

    expected = norm.ppf(rankdata(data, axis=0) / 201)
    np.testing.assert_allclose(np.asarray(masker.scores(jnp.asarray(data))), expected, atol=2e-4)


@pytest.mark.parametrize("digits", [None, 1])
def test_copula_quantile_function_is_the_piecewise_linear_interpolation(digits):
    """from_scores (a table lookup) equals the interpolation through (level, sorted value) knots,
    beyond the ends held at the extreme training values; with and without ties."""
    data, _, rng = correlated(150, seed=18)
    data = (data if digits is None else np.round(data, digits)).astype(np.float64)
    masker = GaussianCopula(data, n_samples=8)
    z = np.concatenate([rng.normal(size=(400, data.shape[1])) * 1.5, np.full((2, data.shape[1]), [[-9.0], [9.0]])])
    from scipy.stats import norm, rankdata

    levels = rankdata(data, axis=0) / (data.shape[0] + 1)
    expected = np.stack([np.interp(norm.cdf(z[:, j]), np.sort(levels[:, j]), np.sort(data[:, j])) for j in range(data.shape[1])], 1)
    got = np.asarray(masker.from_scores(jnp.asarray(z, jnp.float32)))
    np.testing.assert_allclose(got, expected, atol=2e-4 * np.ptp(data))


def test_copula_normal_cdf_is_accurate_in_absolute_terms():
    """The back-transform's one-erf normal CDF agrees with the exact CDF to a few epsilons, in
    absolute terms (what picks a quantile-table cell), over the whole range and in both dtypes."""
    from scipy.stats import norm

    from jaxshap.maskers._gaussian import normal_cdf

    z = np.concatenate([np.linspace(-12.0, 12.0, 20001), [-np.inf, np.inf]])
    got32 = np.asarray(normal_cdf(jnp.asarray(z, jnp.float32)), np.float64)
    np.testing.assert_allclose(got32, norm.cdf(z), rtol=0, atol=3 * np.finfo(np.float32).eps)
    with jax.enable_x64(True):
        got64 = np.asarray(normal_cdf(jnp.asarray(z, jnp.float64)))
    np.testing.assert_allclose(got64, norm.cdf(z), rtol=0, atol=4 * np.finfo(np.float64).eps)


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf"), True, "wide"])
def test_bad_sigma(sigma):
    data, _, _ = correlated(20)
    with pytest.raises(ValueError, match="`sigma` must be a positive number"):
        Empirical(data, sigma=sigma)


@pytest.mark.parametrize("eta", [0.0, -0.5, 1.01, float("nan"), False])
def test_bad_eta(eta):
    data, _, _ = correlated(20)
    with pytest.raises(ValueError, match=r"`eta` must be a number in \(0, 1\]"):
        Empirical(data, eta=eta)


def test_categorical_refused_by_the_copula():
    data, rng = mixed_data()
    with pytest.raises(ValueError, match=r"`categorical`.*2.*maskers\.Empirical"):
        GaussianCopula(data, categorical=[2])
    frame = pd.DataFrame({"a": data[:, 0], "kind": pd.Categorical(data[:, 2].astype(int))})
    with pytest.raises(ValueError, match=r"`categorical`.*'kind'.*maskers\.Empirical"):
        GaussianCopula(frame)


def test_other_bad_inputs():
    data, rng = mixed_data()
    bad = data.copy()
    bad[3, 1] = np.nan
    for make in (Empirical, GaussianCopula):
        with pytest.raises(ValueError, match="NaN"):
            make(bad)
        with pytest.raises(ValueError, match="at least 2"):
            make(data[:1])
    with pytest.raises(ValueError, match="not integer codes"):
        Empirical(data, categorical=[0])
    with pytest.raises(ValueError, match="`categorical` holds column 9"):
        Empirical(data, categorical=[9])
    with pytest.raises(ValueError, match="`categorical` must list"):
        Empirical(data, categorical=["nope"])
    with pytest.raises(ValueError, match="`max_samples`"):
        Empirical(data, max_samples=0)
    with pytest.raises(ValueError, match="`n_samples`"):
        GaussianCopula(data[:, :2], n_samples=0)


def test_auto_explainer_and_frame_names():
    data, _, rng = correlated(120, seed=18)
    frame = pd.DataFrame(data.astype(np.float32), columns=["a", "b", "c", "d"])
    for masker in (Empirical(frame), GaussianCopula(frame, n_samples=64)):
        assert masker.feature_names == ("a", "b", "c", "d")
        expl = jaxshap.Explainer(model, masker)(frame.iloc[:2])
        assert list(expl.feature_names) == ["a", "b", "c", "d"]
        total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
        np.testing.assert_allclose(total, np.asarray(model(jnp.asarray(frame.to_numpy()[:2]))), atol=1e-5)
