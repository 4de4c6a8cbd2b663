"""PermutationExplainer: unbiasedness, standard errors, reproducibility, and shap in distribution."""

import jax
import numpy as np
import pytest
from conftest import make_mlp

import jaxshap


@pytest.fixture
def problem():
    params, apply = make_mlp(11, 6, hidden=12)
    model = jax.jit(lambda X: apply(params, X))
    rng = np.random.default_rng(11)
    background = rng.normal(size=(12, 6)).astype(np.float32)
    X = rng.normal(size=(8, 6)).astype(np.float32)
    exact = jaxshap.ExactExplainer(model, background)(X)
    return model, background, X, exact


def test_efficiency_is_exact(problem):
    model, background, X, _ = problem
    expl = jaxshap.PermutationExplainer(model, background, n_permutations=4)(X)
    np.testing.assert_allclose(expl.values.sum(1) + expl.base_values, model(X), rtol=1e-5, atol=1e-5)


def test_close_to_exact_and_calibrated(problem):
    model, background, X, exact = problem
    expl = jaxshap.PermutationExplainer(model, background, n_permutations=64)(X, key=jax.random.key(5))
    err = np.abs(np.asarray(expl.values - exact.values))
    assert expl.stderr.shape == expl.values.shape
    assert np.mean(err <= 3 * np.asarray(expl.stderr) + 1e-6) >= 0.9
    assert err.max() < 0.25 * np.abs(np.asarray(exact.values)).max()
    np.testing.assert_allclose(expl.base_values, exact.base_values, rtol=1e-5, atol=1e-6)


def test_key_reproducible_and_chunking_invariant(problem):
    model, background, X, _ = problem
    ex = jaxshap.PermutationExplainer(model, background, n_permutations=8)
    a = ex(X, key=jax.random.key(1))
    b = ex(X, key=jax.random.key(1))
    c = ex(X, key=jax.random.key(2))
    tiny = jaxshap.PermutationExplainer(model, background, n_permutations=8, memory_budget=4096)(X, key=jax.random.key(1))
    np.testing.assert_array_equal(a.values, b.values)
    assert np.abs(np.asarray(a.values - c.values)).max() > 1e-4
    np.testing.assert_allclose(tiny.values, a.values, rtol=1e-5, atol=1e-6)
    # the default key is fixed
    np.testing.assert_array_equal(ex(X).values, ex(X, key=None).values)


def test_stderr_shrinks_like_inverse_sqrt(problem):
    model, background, X, _ = problem
    small = jaxshap.PermutationExplainer(model, background, n_permutations=16)(X).stderr.mean()
    large = jaxshap.PermutationExplainer(model, background, n_permutations=256)(X).stderr.mean()
    ratio = float(small / large)
    assert 2.5 < ratio < 6.5  # sqrt(16) = 4 in expectation


def test_in_distribution_with_shap_permutation_explainer(problem):
    shap = pytest.importorskip("shap")
    model, background, X, exact = problem
    numpy_model = lambda Z: np.asarray(model(np.asarray(Z, np.float32)))
    m = X.shape[1]
    n_perm = 10  # walks; shap's max_evals counts coalition evaluations: 2 * M per antithetic pair plus ends
    ours, theirs = [], []
    for seed in range(6):
        ours.append(np.asarray(jaxshap.PermutationExplainer(model, background, n_permutations=n_perm)(X, key=seed).values))
        masker = shap.maskers.Independent(background, max_samples=len(background))
        explainer = shap.PermutationExplainer(numpy_model, masker, seed=seed)
        theirs.append(explainer(X, max_evals=n_perm * (m + 1)).values)
    ours, theirs = np.stack(ours), np.stack(theirs)
    exact = np.asarray(exact.values)
    # Both are unbiased: their means over seeds sit near the exact values and near each other.
    spread = np.sqrt(np.mean((theirs - exact) ** 2))
    assert np.sqrt(np.mean((ours.mean(0) - exact) ** 2)) < spread
    assert np.sqrt(np.mean((theirs.mean(0) - exact) ** 2)) < spread
    # At an equal budget, jaxshap's error is no worse than shap's (allowing Monte-Carlo noise).
    assert np.sqrt(np.mean((ours - exact) ** 2)) < 1.5 * spread


@pytest.mark.parametrize("m", [4, 4100])
def test_sample_permutations_are_uniform(m):
    """Every row is a permutation; for M=4, all 24 orders are equally likely (chi-square, 23 dof)
    and every feature is equally likely at every position; M=4100 takes the argsort path."""
    from jaxshap.coalitions import sample_permutations

    n = 48_000 if m == 4 else 16
    p = np.asarray(sample_permutations(jax.random.key(0), m, n))
    assert p.shape == (n, m)
    assert (np.sort(p, axis=1) == np.arange(m)).all()
    if m == 4:
        codes = (p * 4 ** np.arange(4)).sum(1)
        counts = np.unique(codes, return_counts=True)[1]
        assert len(counts) == 24
        chi2 = ((counts - n / 24) ** 2 / (n / 24)).sum()
        assert chi2 < 49.7  # the 99.9% quantile of chi-square(23)
        position = np.stack([(p == f).argmax(1) for f in range(m)])  # [feature, row]
        for f in range(m):
            np.testing.assert_allclose(np.bincount(position[f], minlength=m) / n, 0.25, atol=0.01)
