"""maskers.GaussianMixture: EM fit, the exact mixture conditional, and its coalition values."""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxshap
from jaxshap.maskers import Gaussian, GaussianMixture
from oracle import shapley_from_game

WEIGHTS = np.array([0.5, 0.3, 0.2])
MEANS = np.array([[0.0, 0.0, 0.0], [6.0, -6.0, 2.0], [-6.0, 4.0, 8.0]])


def _cov(seed, m=3):
    a = np.random.default_rng(seed).normal(size=(m, m))
    return a @ a.T / m + 0.4 * np.eye(m)


COVS = np.stack([_cov(s) for s in range(3)])


def mixture_rows(n, seed=0, weights=WEIGHTS, means=MEANS, covs=COVS):
    rng = np.random.default_rng(seed)
    comp = rng.choice(len(weights), size=n, p=weights)
    return np.stack([rng.multivariate_normal(means[c], covs[c]) for c in comp])


def log_normal_pdf(x, mean, cov):
    d = x - mean
    _, logdet = np.linalg.slogdet(cov)
    return -0.5 * (d @ np.linalg.solve(cov, d) + logdet + len(mean) * np.log(2 * np.pi))


def np_mixture_conditional(weights, means, covs, x, subset):
    """Closed-form conditional of a mixture given x_S: component weights, means and covariances
    of the full vector (the S entries fixed at x_S with zero covariance), from the formulas."""
    m = means.shape[1]
    s = sorted(subset)
    rest = [j for j in range(m) if j not in subset]
    logw, mus, ks = [], [], []
    for w, mu, cov in zip(weights, means, covs):
        out_mu, k = mu.astype(np.float64).copy(), np.zeros((m, m))
        if s:
            reg = np.linalg.solve(cov[np.ix_(s, s)], cov[np.ix_(s, rest)]).T
            out_mu[s] = x[s]
            out_mu[rest] = mu[rest] + reg @ (x[s] - mu[s])
            k[np.ix_(rest, rest)] = cov[np.ix_(rest, rest)] - reg @ cov[np.ix_(s, rest)]
            logw.append(np.log(w) + log_normal_pdf(x[s], mu[s], cov[np.ix_(s, s)]))
        else:
            k = cov.astype(np.float64)
            logw.append(np.log(w))
        mus.append(out_mu)
        ks.append(k)
    logw = np.array(logw)
    pw = np.exp(logw - logw.max())
    return pw / pw.sum(), np.stack(mus), np.stack(ks)


def np_mixture_moments(weights, means, covs, x, subset):
    pw, mus, ks = np_mixture_conditional(weights, means, covs, x, subset)
    mean = pw @ mus
    second = np.einsum("c,cij->ij", pw, ks + np.einsum("ci,cj->cij", mus, mus))
    return mean, second - np.outer(mean, mean)


def _match(fitted_means, true_means):
    return [int(np.argmin(((fitted_means - t) ** 2).sum(1))) for t in true_means]


@pytest.fixture(scope="module")
def fitted():
    data = mixture_rows(3000)
    return data, GaussianMixture(data, n_components=3, key=0, n_samples=512)


def test_em_recovers_well_separated_mixture(fitted):
    _, gm = fitted
    order = _match(np.asarray(gm.means), MEANS)
    assert sorted(order) == [0, 1, 2]
    np.testing.assert_allclose(np.asarray(gm.weights)[order], WEIGHTS, atol=0.03)
    np.testing.assert_allclose(np.asarray(gm.means)[order], MEANS, atol=0.15)
    np.testing.assert_allclose(np.asarray(gm.covariances)[order], COVS, atol=0.2)
    assert gm.converged and 1 <= gm.n_iter <= 100 and len(gm.history) == gm.n_iter


def test_log_likelihood_is_the_data_mean_and_non_decreasing():
    # overlapping components: EM takes many steps; each cannot lower the likelihood
    data = mixture_rows(800, seed=3, means=MEANS / 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tol=1e-9 is not met in 60 steps: the history is what is tested
        gm = GaussianMixture(data, n_components=3, key=1, tol=1e-9, max_iter=60, reg_covar=0.0, init="random")
    history = np.asarray(gm.history)
    assert len(history) > 5
    assert np.all(np.diff(history) >= -1e-9 * np.abs(history[:-1]))
    w, mu, cov = (np.asarray(a, np.float64) for a in (gm.weights, gm.means, gm.covariances))
    dens = np.array([[np.log(w[c]) + log_normal_pdf(x, mu[c], cov[c]) for c in range(3)] for x in data])
    top = dens.max(1)
    oracle = np.mean(top + np.log(np.exp(dens - top[:, None]).sum(1)))
    np.testing.assert_allclose(gm.log_likelihood, oracle, rtol=1e-5)
    assert gm.log_likelihood >= history[-1] - 1e-9 * abs(history[-1])


def test_one_component_is_the_gaussian_masker():
    data = mixture_rows(400, seed=4)[:, :3]
    gm = GaussianMixture(data, n_components=1, key=2, n_samples=256)
    mle = np.cov(data, rowvar=False, ddof=0) + 1e-6 * np.eye(3)
    np.testing.assert_allclose(np.asarray(gm.weights), [1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gm.means)[0], data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gm.covariances)[0], mle, rtol=1e-4, atol=1e-4)
    gauss = Gaussian(data.mean(0), mle, n_samples=256, key=5)
    X = data[:5].astype(np.float32)
    # a linear model: both are exact (antithetic draws in one component), so equal to rounding
    lin = lambda x: x @ jnp.array([1.0, -2.0, 0.5])
    a, b = jaxshap.ExactExplainer(lin, gm)(X), jaxshap.ExactExplainer(lin, gauss)(X)
    scale = float(np.abs(np.asarray(b.values)).max())
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), atol=2e-5 * scale)
    # a nonlinear model: the same game up to Monte-Carlo error
    quad = lambda x: x[:, 0] * x[:, 1] + jnp.sin(x[:, 2])
    big = GaussianMixture(data, n_components=1, key=2, n_samples=8192)
    a = jaxshap.ExactExplainer(quad, big)(X)
    b = jaxshap.ExactExplainer(quad, Gaussian(data.mean(0), mle, n_samples=8192, key=5))(X)
    scale = float(np.abs(np.asarray(b.values)).max())
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), atol=0.05 * scale)


def test_conditional_samples_have_the_mixture_moments(fitted):
    data, _ = fitted
    big = GaussianMixture(data, n_components=3, key=0, n_samples=2**15)
    w, mu, cov = (np.asarray(a, np.float64) for a in (big.weights, big.means, big.covariances))
    x = np.array([1.0, -1.5, 3.0])  # between components: several keep weight
    masks = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 1]], bool)
    draws = np.asarray(big.conditional_samples(jnp.asarray(x, jnp.float32), jnp.asarray(masks)), np.float64)
    for c, mask in enumerate(masks):
        subset = set(np.flatnonzero(mask))
        pw, _, _ = np_mixture_conditional(w, mu, cov, x, subset)
        np.testing.assert_allclose(np.asarray(big.conditional_weights(jnp.asarray(x, jnp.float32), jnp.asarray(mask))),
                                   pw, atol=1e-4)
        mean, k = np_mixture_moments(w, mu, cov, x, subset)
        sd = np.sqrt(np.clip(np.diag(k), 0, None)).max()
        np.testing.assert_allclose(draws[c].mean(0), mean, atol=0.03 * sd)
        np.testing.assert_allclose(np.cov(draws[c], rowvar=False), k, atol=0.05 * sd**2)
        np.testing.assert_array_equal(draws[c][:, mask], np.broadcast_to(x[mask].astype(np.float32), draws[c][:, mask].shape))


def test_draw_conditional_has_the_mixture_moments(fitted):
    _, gm = fitted
    w, mu, cov = (np.asarray(a, np.float64) for a in (gm.weights, gm.means, gm.covariances))
    x = np.array([1.0, -1.5, 3.0])
    given = np.array([False, True, False])
    rows = jnp.asarray(np.broadcast_to(x, (40000, 3)), jnp.float32)
    draws = np.asarray(gm.draw_conditional(jax.random.key(3), rows, jnp.asarray(given)), np.float64)
    mean, k = np_mixture_moments(w, mu, cov, x, {1})
    sd = np.sqrt(np.clip(np.diag(k), 0, None)).max()
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.04 * sd)
    np.testing.assert_allclose(np.cov(draws, rowvar=False), k, atol=0.06 * sd**2)
    assert np.all(draws[:, 1] == np.float32(x[1]))
    # rows with different given values are conditioned each on its own
    two = jnp.asarray(np.stack([x, x + np.array([0.0, 9.0, 0.0])]), jnp.float32)
    out = gm.draw_conditional(jax.random.key(4), two, jnp.asarray(given))
    assert out.shape == (2, 3) and np.isfinite(np.asarray(out)).all()


def test_exact_shapley_of_a_linear_model_matches_the_closed_form(fitted):
    data, gm = fitted
    big = GaussianMixture(data, n_components=3, key=0, n_samples=4096)
    w, mu, cov = (np.asarray(a, np.float64) for a in (big.weights, big.means, big.covariances))
    beta = np.array([1.0, -0.5, 2.0])
    X = np.array([[1.0, -1.5, 3.0], [0.2, 0.1, 0.3], [5.0, -5.0, 2.5]])
    got = jaxshap.ExactExplainer(lambda x: x @ jnp.asarray(beta, jnp.float32), big)(X.astype(np.float32))
    for i, x in enumerate(X):
        def v(s):
            pw, mus, _ = np_mixture_conditional(w, mu, cov, x, s)
            return pw @ mus @ beta

        phi = shapley_from_game(v, 3)
        # the stratified component counts match the weights to 1 / 2048 of the draws
        np.testing.assert_allclose(np.asarray(got.values[i]), phi, atol=0.01 * np.abs(phi).max() + 0.01)
        np.testing.assert_allclose(float(got.base_values[i]), v(frozenset()), atol=0.01)


def test_works_with_exact_permutation_and_kernel(fitted):
    data, gm = fitted
    model = lambda x: jnp.tanh(x[:, 0] * x[:, 1] / 10) + x[:, 2]
    X = data[:3].astype(np.float32)
    exact = jaxshap.ExactExplainer(model, gm)(X)
    np.testing.assert_allclose(np.asarray(exact.values.sum(1) + exact.base_values), np.asarray(model(X)), atol=1e-4)
    kernel = jaxshap.KernelExplainer(model, gm, n_coalitions=2**3 - 2)(X)
    np.testing.assert_allclose(np.asarray(kernel.values), np.asarray(exact.values), atol=1e-4)
    perm = jaxshap.PermutationExplainer(model, gm, n_permutations=16)(X, key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(perm.values), np.asarray(exact.values),
                               atol=5 * float(np.asarray(perm.stderr).max()) + 1e-4)


def test_jit_grad_and_memory_budget(fitted):
    data, gm = fitted
    X = jnp.asarray(data[:4], jnp.float32)
    w0 = jnp.array([1.0, -1.0, 0.5])

    def loss(w):
        ex = jaxshap.ExactExplainer(lambda x, w=w: jnp.tanh(x @ w), gm)
        return (ex(X).values ** 2).sum()

    eager = jaxshap.ExactExplainer(lambda x: jnp.tanh(x @ w0), gm)(X).values
    jitted = jax.jit(lambda mk, xx: jaxshap.ExactExplainer(lambda x: jnp.tanh(x @ w0), mk)(xx).values)(gm, X)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-4, atol=1e-6)
    grad = jax.grad(loss)(w0)
    eps = 1e-2
    for j in range(3):
        e = jnp.zeros(3).at[j].set(eps)
        fd = (loss(w0 + e) - loss(w0 - e)) / (2 * eps)
        np.testing.assert_allclose(float(grad[j]), float(fd), rtol=2e-2, atol=1e-3)
    small = jaxshap.ExactExplainer(lambda x: jnp.tanh(x @ w0), gm, memory_budget=40_000)(X).values
    np.testing.assert_allclose(np.asarray(small), np.asarray(eager), rtol=1e-5, atol=1e-6)


def test_keyed_pytree_and_names():
    frame = pd.DataFrame(mixture_rows(300, seed=5), columns=["a", "b", "c"])
    a = GaussianMixture(frame, n_components=2, key=7, n_samples=64)
    b = GaussianMixture(frame, n_components=2, key=7, n_samples=64)
    np.testing.assert_array_equal(np.asarray(a.noise), np.asarray(b.noise))
    np.testing.assert_array_equal(np.asarray(a.means), np.asarray(b.means))
    assert a.feature_names == ("a", "b", "c") and a.evals_per_coalition == 64 and a.n_components == 2
    strata = np.asarray(a.strata[:32])
    assert np.all((strata >= np.arange(32) / 32) & (strata < (np.arange(32) + 1) / 32))
    np.testing.assert_array_equal(np.asarray(a.noise[32:]), -np.asarray(a.noise[:32]))
    leaves, tree = jax.tree_util.tree_flatten(a)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert back.converged == a.converged and back.log_likelihood == a.log_likelihood
    masks = jnp.asarray(list(itertools.product([False, True], repeat=3)))
    x = jnp.asarray(frame.values[0], jnp.float32)
    f = lambda X: X.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda mk: mk.coalition_values(f, x, masks))(back)),
                               np.asarray(a.coalition_values(f, x, masks)), rtol=1e-5, atol=1e-5)


def test_bic_is_the_definition_and_picks_the_true_number_of_components():
    """BIC = -2 sum_i log p(x_i) + p log N (p = K - 1 + K M + K M (M + 1) / 2), from the fitted
    parameters in NumPy; over candidates 1..5 the three-cluster data get K = 3, the same fit as
    n_components=3 with that key; one candidate gives its own fit and BIC."""
    data = mixture_rows(900, seed=11)
    n, m = data.shape
    chosen = GaussianMixture(data, n_components=range(1, 6), key=4, n_samples=64)
    assert sorted(chosen.bic) == [1, 2, 3, 4, 5] and chosen.n_components == 3
    assert min(chosen.bic, key=chosen.bic.get) == 3
    with jax.enable_x64(True):
        for k in (1, 2, 3):
            one = GaussianMixture(data.astype(np.float64), n_components=k, key=4, n_samples=64)
            w, mu, cov = (np.asarray(a, np.float64) for a in (one.weights, one.means, one.covariances))
            dens = np.stack([np.log(w[c]) + np.array([log_normal_pdf(x, mu[c], cov[c]) for x in data]) for c in range(k)])
            top = dens.max(0)
            loglik = (top + np.log(np.exp(dens - top).sum(0))).sum()
            p = (k - 1) + k * m + k * m * (m + 1) // 2
            assert list(one.bic) == [k]
            np.testing.assert_allclose(one.bic[k], -2.0 * loglik + p * np.log(n), rtol=1e-9)
            np.testing.assert_allclose(chosen.bic[k], one.bic[k], rtol=1e-6)  # float32 data, same fit
    three = GaussianMixture(data, n_components=3, key=4, n_samples=64)
    np.testing.assert_array_equal(np.asarray(chosen.weights), np.asarray(three.weights))
    np.testing.assert_array_equal(np.asarray(chosen.covariances), np.asarray(three.covariances))


def three_clusters(seed, n=600, m=4):
    """Rows of a three-component mixture in ``m`` dimensions, means N(0, 2.5^2 I), correlated
    covariances of variance 0.5 (the conditional bench's kind of mixture)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=2.5, size=(3, m))
    covs = []
    for _ in range(3):
        a = rng.normal(size=(m, m))
        c = a @ a.T / m + 0.2 * np.eye(m)
        d = np.sqrt(np.diag(c))
        covs.append(0.5 * c / np.outer(d, d))
    comp = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    return np.stack([rng.multivariate_normal(means[c], covs[c]) for c in comp])


def test_restarts_keep_the_best_start_and_never_lower_the_likelihood():
    """n_init starts run EM from restart_keys(key, n_init) (the first is ``key`` itself); the fit
    kept has the highest mean log-likelihood of them, so it never falls as n_init grows. On these
    rows the first start ends in a local optimum (the test's precondition), the second does not."""
    from jaxshap.maskers._mixture import _best_of, _fit64, restart_keys

    x = three_clusters(7)
    key = jax.random.key(0)
    keys = restart_keys(key, 6)
    assert jax.random.key_data(keys[0]).tolist() == jax.random.key_data(key).tolist()
    single = [float(_fit64(k, x, 3, 100, 1e-3, 1e-6, "k-means++").log_likelihood) for k in keys]
    assert single[0] < max(single) - 0.1  # a poor local optimum from the first start
    kept = [float(_best_of(key, x, 3, n, 100, 1e-3, 1e-6, "k-means++").log_likelihood) for n in range(1, 7)]
    np.testing.assert_array_equal(kept, np.maximum.accumulate(single))
    assert kept[0] == single[0] and kept[-1] == max(single)


def test_default_restarts_reach_sklearns_likelihood():
    """On rows from a known three-component mixture where single EM starts land in different
    optima, the masker's fit (default n_init) is within 2e-3 nats per row of scikit-learn's best
    of 5 k-means starts run to tol 1e-4 (the mean log-likelihood of the kept fit recomputed from
    its parameters in NumPy, independent of both); a single start from the same key is not above it."""
    sk = pytest.importorskip("sklearn.mixture")
    x = three_clusters(7)
    ref = sk.GaussianMixture(3, n_init=5, tol=1e-4, max_iter=500, random_state=0).fit(x).score(x)
    gm = GaussianMixture(x, n_components=3, key=1, n_samples=8)
    one = GaussianMixture(x, n_components=3, key=1, n_samples=8, n_init=1)
    w, mu, cov = (np.asarray(a, np.float64) for a in (gm.weights, gm.means, gm.covariances))
    dens = np.stack([np.log(w[c]) + np.array([log_normal_pdf(r, mu[c], cov[c]) for r in x]) for c in range(3)])
    top = dens.max(0)
    oracle = np.mean(top + np.log(np.exp(dens - top).sum(0)))
    np.testing.assert_allclose(float(gm.log_likelihood), oracle, rtol=1e-5)
    assert abs(oracle - ref) < 2e-3, (oracle, ref)
    assert float(one.log_likelihood) <= float(gm.log_likelihood)


def test_bic_on_gaussian_data_picks_one_component_the_gaussian_masker():
    rng = np.random.default_rng(12)
    data = rng.multivariate_normal(np.zeros(3), COVS[0], size=800).astype(np.float32)
    chosen = GaussianMixture(data, n_components=[3, 1, 2, 2], key=0, n_samples=256)
    assert list(chosen.bic) == [1, 2, 3] and chosen.n_components == 1


@pytest.mark.parametrize("bad", [[], [0, 2], [2, 1.5], "3", [True]])
def test_bad_candidates_are_refused(bad):
    with pytest.raises(ValueError, match="`n_components`"):
        GaussianMixture(mixture_rows(50, seed=6), n_components=bad)


def test_errors():
    data = mixture_rows(50, seed=6)
    with pytest.raises(ValueError, match="categorical.*Empirical"):
        GaussianMixture(data, n_components=2, categorical=[0])
    frame = pd.DataFrame({"a": pd.Categorical([0, 1] * 25), "b": data[:, 1]})
    with pytest.raises(ValueError, match="categorical.*Empirical"):
        GaussianMixture(frame, n_components=2)
    with pytest.raises(ValueError, match="n_components"):
        GaussianMixture(data, n_components=0)
    with pytest.raises(ValueError, match="at least 60"):
        GaussianMixture(data, n_components=60)
    with pytest.raises(ValueError, match="reg_covar"):
        GaussianMixture(data, n_components=2, reg_covar=-1.0)
    with pytest.raises(ValueError, match="tol"):
        GaussianMixture(data, n_components=2, tol=0.0)
    with pytest.raises(ValueError, match="init"):
        GaussianMixture(data, n_components=2, init="kmeans")
    for bad_starts in (0, 1.5, True):
        with pytest.raises(ValueError, match="`n_init`"):
            GaussianMixture(data, n_components=2, n_init=bad_starts)
    with pytest.raises(ValueError, match="n_samples"):
        GaussianMixture(data, n_components=2, n_samples=0)
    bad = data.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="data"):
        GaussianMixture(bad, n_components=2)
    with pytest.warns(UserWarning, match="did not converge"):
        GaussianMixture(mixture_rows(200, means=MEANS / 6), n_components=3, max_iter=1, tol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GaussianMixture(data, n_components=1)


def test_fitted_instances_share_one_compiled_program():
    """The fit's diagnostics are leaves or kept out of the tree, so a second fit (other data,
    another number of EM iterations) reuses the first one's compiled program."""
    from jaxshap._engine._program import block_program

    rng = np.random.default_rng(11)
    f = lambda X: jnp.tanh(X).sum(-1)
    sizes = []
    for seed in range(3):
        data = rng.normal(size=(200, 3)).astype(np.float32) * (1 + seed)
        masker = GaussianMixture(data, n_components=2, key=seed, n_samples=32)
        jaxshap.ExactExplainer(f, masker)(data[:4])
        sizes.append(block_program._cache_size())
    assert sizes[1] == sizes[0] and sizes[2] == sizes[0], sizes
    assert masker.history is not None and len(masker.history) == int(masker.n_iter)
