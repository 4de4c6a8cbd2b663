"""jaxshap.msev: the MSEv criterion against a NumPy oracle written from its definition."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap.maskers import Gaussian, Independent


def np_msev(model, X, background, coalitions):
    """Per-explicand MSEv with the interventional v(S) = mean_b f(x_S, b_-S), by loops."""
    per = []
    for x in X:
        fx = model(x[None, :].astype(np.float64))[0]
        errs = []
        for s in coalitions:
            rows = np.where(s[None, :], x[None, :], background).astype(np.float64)
            errs.append((fx - model(rows).mean(0)) ** 2)
        per.append(np.mean(errs, axis=0))
    return np.array(per)


def problem(seed=0, m=4, n=6, b=20):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, m)).astype(np.float32), rng.normal(size=(b, m)).astype(np.float32)


def test_matches_the_oracle_over_all_coalitions():
    X, bg = problem()
    np_model = lambda x: np.tanh(x[:, 0] * x[:, 1]) + x[:, 2] ** 2 - x[:, 3]
    model = lambda x: jnp.tanh(x[:, 0] * x[:, 1]) + x[:, 2] ** 2 - x[:, 3]
    out = jaxshap.msev(Independent(bg, max_samples=None), X, model)
    every = np.array([s for s in itertools.product([False, True], repeat=4) if 0 < sum(s) < 4])
    assert out.coalitions.shape == (14, 4)
    assert {tuple(r) for r in out.coalitions} == {tuple(r) for r in every}
    per = np_msev(np_model, X, bg, every)
    np.testing.assert_allclose(out.per_explicand, per, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out.msev, per.mean(), rtol=1e-4)
    np.testing.assert_allclose(out.stderr, per.std(ddof=1) / np.sqrt(len(per)), rtol=1e-4)
    assert isinstance(out.msev, float) and isinstance(out.stderr, float)


def test_explainer_and_masker_agree_and_budget_does_not_matter():
    X, bg = problem(1)
    model = lambda x: jnp.sin(x @ jnp.array([1.0, -1.0, 0.5, 2.0]))
    masker = Independent(bg, max_samples=None)
    direct = jaxshap.msev(masker, X, model)
    for cls in (jaxshap.ExactExplainer, jaxshap.PermutationExplainer, jaxshap.KernelExplainer):
        via = jaxshap.msev(cls(model, masker), X)
        np.testing.assert_allclose(via.per_explicand, direct.per_explicand, rtol=1e-6)
    small = jaxshap.msev(masker, X, model, memory_budget=3000)
    np.testing.assert_allclose(small.per_explicand, direct.per_explicand, rtol=1e-5)
    host = jaxshap.msev(masker, X, lambda x: np.sin(np.asarray(x) @ np.array([1.0, -1.0, 0.5, 2.0])))
    np.testing.assert_allclose(host.per_explicand, direct.per_explicand, rtol=1e-4, atol=1e-6)


def test_logit_link_is_applied_to_both_sides():
    X, bg = problem(2)
    prob = lambda x: jax.nn.sigmoid(x[:, 0] * x[:, 1] + x[:, 2])
    ex = jaxshap.ExactExplainer(prob, Independent(bg, max_samples=None), link="logit")
    out = jaxshap.msev(ex, X)
    np_prob = lambda x: 1 / (1 + np.exp(-(x[:, 0] * x[:, 1] + x[:, 2])))
    logit = lambda p: np.log(p / (1 - p))
    per = []
    for x in X:
        errs = [(logit(np_prob(x[None].astype(np.float64)))[0]
                 - logit(np_prob(np.where(s, x, bg).astype(np.float64)).mean())) ** 2 for s in out.coalitions]
        per.append(np.mean(errs))
    np.testing.assert_allclose(out.per_explicand, per, rtol=1e-4)


def test_multi_output_and_sampled_coalitions():
    rng = np.random.default_rng(3)
    X, bg = rng.normal(size=(5, 12)).astype(np.float32), rng.normal(size=(8, 12)).astype(np.float32)
    model = lambda x: jnp.stack([x.sum(-1), (x[:, :3] ** 2).sum(-1)], -1)
    out = jaxshap.msev(Independent(bg), X, model, key=4)
    assert out.coalitions.shape == (1024, 12)
    assert out.coalitions.any(1).all() and not out.coalitions.all(1).any()
    assert out.msev.shape == (2,) and out.stderr.shape == (2,) and out.per_explicand.shape == (5, 2)
    again = jaxshap.msev(Independent(bg), X, model, key=4)
    np.testing.assert_array_equal(again.coalitions, out.coalitions)
    other = jaxshap.msev(Independent(bg), X, model, key=5, n_coalitions=64)
    assert other.coalitions.shape == (64, 12) and (other.coalitions != out.coalitions[:64]).any()
    np_model = lambda x: np.stack([x.sum(-1), (x[:, :3] ** 2).sum(-1)], -1)
    np.testing.assert_allclose(other.per_explicand, np_msev(np_model, X, bg, other.coalitions), rtol=1e-4, atol=1e-5)
    # a request covering every coalition takes each once
    assert jaxshap.msev(Independent(bg[:, :3]), X[:, :3], lambda x: x.sum(-1), n_coalitions=100).coalitions.shape == (6, 3)


def test_the_true_conditional_scores_lower_on_gaussian_data():
    # E[f | X_S] minimises the expected squared error: on correlated Gaussian data the Gaussian
    # masker (the true conditional) must beat the interventional value function clearly.
    rng = np.random.default_rng(4)
    cov = np.array([[1.0, 0.9, 0.5], [0.9, 1.0, 0.4], [0.5, 0.4, 1.0]])
    data = rng.multivariate_normal(np.zeros(3), cov, size=400).astype(np.float32)
    model = lambda x: x[:, 0] + x[:, 1] * x[:, 2]
    true = jaxshap.msev(Gaussian(np.zeros(3), cov, n_samples=512), data[200:], model)
    ind = jaxshap.msev(Independent(data[:200], max_samples=None), data[200:], model)  # rows it does not keep
    gap = ind.per_explicand - true.per_explicand  # paired over the same explicands
    assert gap.mean() > 3 * gap.std(ddof=1) / np.sqrt(gap.size)


def test_errors():
    X, bg = problem()
    masker = Independent(bg)
    model = lambda x: x.sum(-1)
    with pytest.raises(ValueError, match="model"):
        jaxshap.msev(masker, X)
    with pytest.raises(ValueError, match="model"):
        jaxshap.msev(jaxshap.ExactExplainer(model, masker), X, model)
    with pytest.raises(TypeError, match="masker"):
        jaxshap.msev(jaxshap.GradientExplainer(model, bg), X)
    with pytest.raises(TypeError, match="masker"):
        jaxshap.msev(bg, X, model)
    with pytest.raises(ValueError, match="n_coalitions"):
        jaxshap.msev(masker, X, model, n_coalitions=0)
    with pytest.raises(ValueError, match="memory_budget"):
        jaxshap.msev(masker, X, model, memory_budget=0)
    with pytest.raises(ValueError):
        jaxshap.msev(masker, X[:, :3], model)
    single = jaxshap.msev(masker, X[:1], model)
    assert np.isnan(single.stderr)


def test_warns_on_rows_the_masker_keeps():
    """A row among an Empirical or Independent masker's rows finds itself there: the MSEv on it is
    optimistic. Held-out rows, and maskers that keep a fitted model, give no warning."""
    rng = np.random.default_rng(4)
    data = rng.normal(size=(80, 3)).astype(np.float32)
    f = lambda x: x[:, 0] * x[:, 1] + x[:, 2]
    empirical = jaxshap.maskers.Empirical(data[:50])
    for masker in (empirical, Independent(data[:50], max_samples=None)):
        with pytest.warns(UserWarning, match=r"msev: 10 of 20 rows of `X` are rows \w+ keeps"):
            jaxshap.msev(masker, data[40:60], model=f)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        held = jaxshap.msev(empirical, data[50:], model=f)
        jaxshap.msev(Gaussian.fit(data[:50]), data[:50], model=f)
    # the reason: on its own rows the empirical masker's v(S) is nearly f(x)
    with pytest.warns(UserWarning):
        own = jaxshap.msev(empirical, data[:30], model=f)
    assert own.msev < 0.5 * held.msev
