"""PermutationExplainer: unbiasedness, standard errors, reproducibility, and shap in distribution."""

import os

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
    # Plain walks: with the controls on, the surrogate also improves with more walks, so their
    # stderr shrinks faster than 1 / sqrt(walks).
    plain = lambda walks: jaxshap.PermutationExplainer(model, background, n_permutations=walks, control_variates=False)
    small = plain(16)(X).stderr.mean()
    large = plain(256)(X).stderr.mean()
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


# --- third-order control variates (regression-adjusted, cross-fitted) ---------------------------


def _signs(m):
    """``u = 2 z - 1`` of every coalition, ``[2**M, M]``, coalition ``i`` having the bits of ``i``."""
    return 2.0 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1) - 1.0


def _tabulated(table, m):
    """A game given by its value on every coalition (indexed as in :func:`_signs`), and its exact
    Shapley values from the oracle."""
    from oracle import shapley_from_game, tabulated_game

    powers = jax.numpy.asarray(1 << np.arange(m), jax.numpy.int32)
    game = lambda ms: jax.numpy.asarray(table, jax.numpy.float32)[ms.astype(jax.numpy.int32) @ powers]
    return game, shapley_from_game(tabulated_game(table), m)


def _walsh_game(m, seed):
    """A game of Walsh terms of orders 1 to 4 (with an even part) and its exact Shapley values."""
    rng = np.random.default_rng(seed)
    u = _signs(m)
    table = u @ rng.normal(size=m)
    for order, scale in ((2, 0.5), (3, 0.4), (4, 0.1)):
        for _ in range(3 * m):
            t = rng.choice(m, order, replace=False)
            table = table + scale * rng.normal() * np.prod(u[:, t], axis=1)
    return _tabulated(table, m)


def test_controls_reduce_error_keep_efficiency_and_stay_unbiased():
    from jaxshap._estimators._kernel import third_order_ridge
    from jaxshap._estimators._permutation import permutation_shapley
    from jaxshap._estimators._permutation import adjusted_permutation_shapley

    m, walks = 8, 32
    game, phi = _walsh_game(m, seed=3)
    keys = jax.random.split(jax.random.key(0), 200)
    plain = jax.jit(jax.vmap(lambda k: permutation_shapley(k, game, m, walks)))(keys)
    adjusted = jax.jit(jax.vmap(lambda k: adjusted_permutation_shapley(k, game, m, walks, third_order_ridge(m))))(keys)
    err_plain = np.asarray(plain[0]) - phi
    err_adj = np.asarray(adjusted[0]) - phi
    # the third-order part is most of the error that pairing leaves: much lower squared error
    assert (err_adj**2).mean() < 0.5 * (err_plain**2).mean()
    # efficiency: every estimate sums to v(N) - v(empty)
    total = float(game(np.ones((1, m), bool))[0] - game(np.zeros((1, m), bool))[0])
    np.testing.assert_allclose(np.asarray(adjusted[0]).sum(1), total, atol=1e-4)
    # cross-fitting keeps it unbiased: the mean over 200 keys is within 4 standard errors of the truth
    se_of_mean = err_adj.std(0, ddof=1) / np.sqrt(len(keys))
    assert np.all(np.abs(err_adj.mean(0)) < 4 * se_of_mean + 1e-6)
    # and its stderr is calibrated: about the spread of the errors
    ratio = np.sqrt((np.asarray(adjusted[1]) ** 2).mean() / (err_adj**2).mean())
    assert 0.7 < ratio < 1.4


def test_controls_are_exact_on_games_of_orders_one_and_two():
    """Antithetic walks are already exact there; the adjusted estimator must stay exact."""
    from jaxshap._estimators._permutation import adjusted_permutation_shapley

    m = 6
    rng = np.random.default_rng(1)
    u = _signs(m)
    table = u @ rng.normal(size=m) + sum(rng.normal() * u[:, i] * u[:, j] for i in range(m) for j in range(i))
    game, phi = _tabulated(table, m)
    est, stderr, _, _ = adjusted_permutation_shapley(jax.random.key(2), game, m, 8, 0.05)
    np.testing.assert_allclose(np.asarray(est), phi, atol=1e-4)
    assert float(np.abs(np.asarray(stderr)).max()) < 1e-4


def test_explainer_control_variates_option(problem):
    model, background, X, exact = problem
    on = jaxshap.PermutationExplainer(model, background, n_permutations=32, control_variates=True)
    off = jaxshap.PermutationExplainer(model, background, n_permutations=32, control_variates=False)
    assert on.control_variates and not off.control_variates
    a, b = on(X, key=3), off(X, key=3)
    np.testing.assert_allclose(np.asarray(a.values).sum(1) + a.base_values, model(X), rtol=1e-5, atol=1e-5)
    err = np.abs(np.asarray(a.values - exact.values))
    assert np.mean(err <= 3 * np.asarray(a.stderr) + 1e-6) >= 0.85
    assert not np.allclose(np.asarray(a.values), np.asarray(b.values))  # the option is really used
    auto = lambda bg, f=model, walks=32: jaxshap.PermutationExplainer(f, bg, n_permutations=walks).control_variates
    many = np.repeat(background, 8, axis=0)  # 96 background rows
    assert not auto(many)  # a 12-unit MLP: the fit would cost more time than it saves
    wide_params, wide_apply = make_mlp(3, 6, hidden=2048)
    wide = lambda Z: wide_apply(wide_params, Z)
    assert auto(many, f=wide) and not auto(background[:2], f=wide)  # enough model work per coalition; too little
    assert not auto(many, f=wide, walks=6) and not auto(many, f=wide, walks=2048)  # not a multiple of 4; too many points
    assert auto(background, f=lambda Z: np.asarray(model(np.asarray(Z))))  # a host model: evaluations dominate
    with pytest.raises(ValueError, match="multiple of 4"):
        jaxshap.PermutationExplainer(model, background, n_permutations=6, control_variates=True)
    with pytest.raises(ValueError, match="control_variates"):
        jaxshap.PermutationExplainer(model, background, control_variates="yes")


_TWO_THREADS = """
import os, sys
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])  # XLA sizes its CPU pool from this
import numpy as np, jax
sys.path.insert(0, {tests!r})
from conftest import make_mlp
import jaxshap
params, apply = make_mlp(11, 6, hidden=12)
rng = np.random.default_rng(11)
background = rng.normal(size=(12, 6)).astype(np.float32)
X = rng.normal(size=(8, 6)).astype(np.float32)
for walks in (64, 256):
    e = jaxshap.PermutationExplainer(lambda Z: apply(params, Z), background, n_permutations=walks, control_variates=True)(X, key=5)
    assert e.values.shape == (8, 6) and np.isfinite(np.asarray(e.stderr)).all()
print("finished")
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs and Linux affinity")
def test_controls_finish_on_a_two_thread_pool():
    """The cross-fitted fits once ran as two batched Cholesky calls side by side. On a CPU,
    jaxlib 0.10 splits a batched LAPACK call over XLA's intra-op pool and blocks a pool thread
    until the parts finish, so on a two-thread pool the two calls waited for each other forever
    (4 hangs in 4 runs of this script). The fits now go through one call per stage."""
    import subprocess
    import sys

    script = _TWO_THREADS.format(tests=os.path.dirname(__file__))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0 and "finished" in result.stdout, result.stderr[-2000:]
