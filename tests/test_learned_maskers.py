"""The learned maskers: Surrogate (a network for E[f(X) | x_S]) and Generative (a vaeac of the data).

Oracles come from the Gaussian conditional, computed in NumPy from the data's sample moments:
for a linear model ``f(x) = w.x + b`` on Gaussian rows, ``v(S) = w . E[X | x_S] + b``, and the
conditional draws of ``X_{-S} | x_S`` have the Schur complement's mean and covariance. Networks
are tiny and trained briefly (the tolerances below come from measured runs, stated at each).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxshap
from jaxshap._estimators._training import Stopping, early_stop, train_epochs, uniform_size_masks

M = 3
COV = np.array([[1.0, 0.7, 0.3], [0.7, 1.0, 0.5], [0.3, 0.5, 1.0]])
MU = np.array([1.0, -1.0, 0.5])
W = np.array([1.0, -2.0, 0.5])
B = 0.3
MASKS = np.array(list(itertools.product([False, True], repeat=M)))


def linear(X):
    return X @ jnp.asarray(W, X.dtype) + B


def doubled(X):
    return 2.0 * linear(X)


@pytest.fixture(scope="module")
def gaussian_rows():
    return np.random.default_rng(0).multivariate_normal(MU, COV, size=2000).astype(np.float32)


@pytest.fixture(scope="module")
def surrogate(gaussian_rows):
    return jaxshap.maskers.Surrogate(linear, gaussian_rows, key=0, hidden=(32, 32), epochs=40, patience=40)


@pytest.fixture(scope="module")
def generative(gaussian_rows):
    return jaxshap.maskers.Generative(gaussian_rows, key=0, latent=4, hidden=(32, 32), epochs=40, patience=40,
                                      n_samples=2000)


def conditional(mu, cov, x, S):
    """Mean and covariance of X_{-S} | X_S = x_S under N(mu, cov)."""
    o = ~S
    if not S.any():
        return mu, cov
    gain = cov[np.ix_(o, S)] @ np.linalg.inv(cov[np.ix_(S, S)])
    return mu[o] + gain @ (x[S] - mu[S]), cov[np.ix_(o, o)] - gain @ cov[np.ix_(S, o)]


def moments(rows):
    x = np.asarray(rows, np.float64)
    return x.mean(0), np.cov(x.T)


def closed_form_values(rows, x):
    """v(S) = w . E[X | x_S] + b for every coalition in MASKS (sample moments of the rows)."""
    mu, cov = moments(rows)
    out = []
    for S in MASKS:
        filled = x.astype(np.float64).copy()
        filled[~S] = conditional(mu, cov, filled, S)[0]
        out.append(W @ filled + B)
    return np.array(out)


# --- Surrogate ----------------------------------------------------------------------------------
def test_surrogate_recovers_gaussian_conditional_values(surrogate, gaussian_rows):
    # Measured (key 0, 40 epochs, 2000 rows): mean abs error 0.06, largest 0.24 over 30 rows and
    # all coalitions, for an output spread of 1.5; the interventional values of the same rows are
    # off by 0.3 on average. Tolerances 0.12 (mean) and 0.5 (largest) leave room for float noise
    # across platforms and still fail a masker that ignores the dependence.
    rows = gaussian_rows[:30]
    f = lambda X: linear(X)[..., None]
    values = np.stack([np.asarray(surrogate.coalition_values(f, jnp.asarray(x), jnp.asarray(MASKS)))[:, 0] for x in rows])
    ref = np.stack([closed_form_values(gaussian_rows, x) for x in rows])
    err = np.abs(values - ref)
    assert err.mean() < 0.12 and err.max() < 0.5
    independent = jaxshap.maskers.Independent(gaussian_rows, max_samples=None)
    inter = np.stack([np.asarray(independent.coalition_values(f, jnp.asarray(x), jnp.asarray(MASKS)))[:, 0]
                      for x in rows])
    assert np.abs(inter - ref).mean() > 2 * 0.12  # the test tells conditional from interventional values


def test_surrogate_full_and_empty_coalitions_are_exact(surrogate, gaussian_rows):
    x = jnp.asarray(gaussian_rows[5])
    v = np.asarray(surrogate.coalition_values(lambda X: linear(X)[..., None], x, jnp.asarray(MASKS)))[:, 0]
    np.testing.assert_allclose(v[-1], float(linear(x)), rtol=1e-6)
    np.testing.assert_allclose(v[0], np.asarray(linear(jnp.asarray(gaussian_rows))).mean(), rtol=1e-5)
    assert surrogate.evals_per_coalition == 0


def test_surrogate_with_explainers_is_efficient_and_checks_the_model(surrogate, gaussian_rows):
    X = gaussian_rows[:4]
    fx = np.asarray(linear(jnp.asarray(X)))
    exact = jaxshap.ExactExplainer(linear, surrogate)(X)
    np.testing.assert_allclose(np.asarray(exact.values).sum(1) + np.asarray(exact.base_values), fx, atol=1e-4)
    kernel = jaxshap.KernelExplainer(linear, surrogate, n_coalitions=6)(X, key=jax.random.key(1))  # every coalition
    np.testing.assert_allclose(np.asarray(kernel.values), np.asarray(exact.values), atol=1e-4)
    perm = jaxshap.PermutationExplainer(linear, surrogate, n_permutations=4)(X, key=jax.random.key(1))
    np.testing.assert_allclose(np.asarray(perm.values).sum(1) + np.asarray(perm.base_values), fx, atol=1e-4)
    with pytest.raises(ValueError, match="trained on another model"):
        jaxshap.ExactExplainer(doubled, surrogate)


def test_surrogate_is_a_pytree_through_jit(surrogate, gaussian_rows):
    X = jnp.asarray(gaussian_rows[:3])
    ex = jaxshap.ExactExplainer(linear, surrogate)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda e, X: e(X).values)(ex, X)), np.asarray(ex(X).values), atol=1e-5)
    f = lambda X: linear(X)[..., None]
    grads = jax.grad(lambda mk: mk.coalition_values(f, X[0], jnp.asarray(MASKS)).sum())(surrogate)
    assert np.abs(np.asarray(grads.params[-1]["w"])).sum() > 0  # the network's parameters are leaves


def test_surrogate_save_load_round_trip(surrogate, gaussian_rows, tmp_path):
    path = str(tmp_path / "surrogate.npz")
    surrogate.save(path)
    loaded = jaxshap.maskers.Surrogate.load(path)
    x, masks = jnp.asarray(gaussian_rows[7]), jnp.asarray(MASKS)
    f = lambda X: linear(X)[..., None]
    np.testing.assert_array_equal(np.asarray(loaded.coalition_values(f, x, masks)),
                                  np.asarray(surrogate.coalition_values(f, x, masks)))
    assert loaded.cost == surrogate.cost and "epochs" in loaded.cost
    with pytest.raises(ValueError, match="trained on another model"):
        jaxshap.ExactExplainer(doubled, loaded)
    with pytest.raises(ValueError, match="not a saved Generative"):
        jaxshap.maskers.Generative.load(path)


def test_surrogate_multi_output_and_errors(gaussian_rows):
    two = lambda X: jnp.stack([linear(X), X[:, 0] * X[:, 1]], axis=-1)
    mk = jaxshap.maskers.Surrogate(two, gaussian_rows[:200], key=1, hidden=4, epochs=2)
    v = mk.coalition_values(two, jnp.asarray(gaussian_rows[0]), jnp.asarray(MASKS))
    assert v.shape == (2**M, 2)
    np.testing.assert_allclose(np.asarray(v[-1]), np.asarray(two(jnp.asarray(gaussian_rows[:1]))[0]), rtol=1e-6)
    assert mk.cost.startswith("2 epochs")
    again = jaxshap.maskers.Surrogate(two, gaussian_rows[:200], key=1, hidden=4, epochs=2)  # reproducible from key
    for a, b in zip(jax.tree_util.tree_leaves(mk.params), jax.tree_util.tree_leaves(again.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    stopped = jaxshap.maskers.Surrogate(two, gaussian_rows[:200], key=2, hidden=4, epochs=200, patience=2)
    errors = stopped.history_["validation_error"]
    assert len(errors) < 200 and min(errors[-2:]) >= min(errors[:-2])  # stopped after 2 epochs without progress
    assert stopped.validation_loss_ == min(errors)
    with pytest.raises(ValueError, match="epochs"):
        jaxshap.maskers.Surrogate(linear, gaussian_rows, epochs=0)
    with pytest.raises(ValueError, match="validation_fraction"):
        jaxshap.maskers.Surrogate(linear, gaussian_rows, validation_fraction=1.5)
    with pytest.raises(ValueError, match="hidden"):
        jaxshap.maskers.Surrogate(linear, gaussian_rows, hidden=(0,))
    with pytest.raises(ValueError, match="too few"):
        jaxshap.maskers.Surrogate(linear, gaussian_rows[:2])


# --- Generative -----------------------------------------------------------------------------------
@pytest.mark.parametrize("given", [(True, False, False), (False, True, True), (False, False, False)])
def test_generative_conditional_moments_approach_gaussian(generative, gaussian_rows, given):
    # Measured (key 0, 40 epochs): mean errors up to 0.06 and covariance errors up to 0.12 where
    # the conditional variances are 0.5 to 1; at x_0 = 2.5 the conditional mean of x_1 moves by
    # 1.05 from its marginal one and its variance halves, so tolerances 0.2 (mean) and 0.2
    # (covariance) fail a sampler that ignores x_S.
    S = np.array(given)
    x = np.array([2.5, -0.5, 0.0], np.float32)
    draws = np.asarray(generative.conditional_samples(jnp.asarray(x), jnp.asarray(S[None])))[0].astype(np.float64)
    np.testing.assert_array_equal(draws[:, S], np.broadcast_to(x[S], draws[:, S].shape))
    mean, cov = conditional(*moments(gaussian_rows), x.astype(np.float64), S)
    o = ~S
    assert np.abs(draws[:, o].mean(0) - mean).max() < 0.2
    assert np.abs(np.atleast_2d(np.cov(draws[:, o].T)) - cov).max() < 0.2


def test_generative_draw_conditional_and_explainers(generative, gaussian_rows):
    rows = jnp.asarray(np.tile(np.array([[2.5, 0.0, 0.0]], np.float32), (4000, 1)))
    given = jnp.array([True, False, False])
    d = np.asarray(generative.draw_conditional(jax.random.key(3), rows, given), np.float64)
    mean, _ = conditional(*moments(gaussian_rows), np.array([2.5, 0.0, 0.0]), np.asarray(given))
    np.testing.assert_array_equal(d[:, 0], 2.5)
    assert np.abs(d[:, 1:].mean(0) - mean).max() < 0.2
    X = gaussian_rows[:2]
    exact = jaxshap.ExactExplainer(linear, generative)(X)
    fx = np.asarray(linear(jnp.asarray(X)))
    np.testing.assert_allclose(np.asarray(exact.values).sum(1) + np.asarray(exact.base_values), fx, atol=1e-3)
    kernel = jaxshap.KernelExplainer(linear, generative, n_coalitions=6)(X, key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(kernel.values), np.asarray(exact.values), atol=1e-3)
    perm = jaxshap.PermutationExplainer(linear, generative, n_permutations=4)(X, key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(perm.values).sum(1) + np.asarray(perm.base_values), fx, atol=1e-3)


def test_generative_save_load_round_trip(generative, gaussian_rows, tmp_path):
    path = str(tmp_path / "generative.npz")
    generative.save(path)
    loaded = jaxshap.maskers.Generative.load(path)
    x, masks, f = jnp.asarray(gaussian_rows[3]), jnp.asarray(MASKS), lambda X: linear(X)[..., None]
    np.testing.assert_array_equal(np.asarray(loaded.coalition_values(f, x, masks)),
                                  np.asarray(generative.coalition_values(f, x, masks)))
    with pytest.raises(ValueError, match="not a saved Surrogate"):
        jaxshap.maskers.Surrogate.load(path)
    jitted = jax.jit(lambda mk, x: mk.coalition_values(f, x, masks))(loaded, x)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(generative.coalition_values(f, x, masks)), atol=1e-5)
    grads = jax.grad(lambda mk: mk.coalition_values(f, x, masks).sum())(loaded)
    assert np.abs(np.asarray(grads.params["decoder"][0]["w"])).sum() > 0  # the networks are leaves


def test_generative_categorical_conditional_frequencies():
    # x0 ~ N(0, 1); the category c in {0, 1, 2} has logits 0.8 x0 (-1, 0, 1). Measured (key 0,
    # 30 epochs): frequencies at x0 = -1.5 and 1.5 within 0.055 of the truth; a sampler that
    # ignored x0 would give the marginal frequencies, about (0.36, 0.28, 0.36), 0.35 away.
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=2000)
    logits = 0.8 * x0[:, None] * np.array([-1.0, 0.0, 1.0])
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    c = (rng.uniform(size=(2000, 1)) > p.cumsum(1)).sum(1)
    data = pd.DataFrame({"x0": x0.astype(np.float32), "c": pd.Categorical(c)})  # a category column: found alone
    mk = jaxshap.maskers.Generative(data, key=0, latent=2, hidden=(32, 32), epochs=30, patience=30, n_samples=2000)
    assert mk.feature_names == ("x0", "c") and mk.layout.categorical == (1,) and mk.layout.n_categories == (3,)
    for x in (-1.5, 1.5):
        want = np.exp(0.8 * x * np.array([-1.0, 0.0, 1.0]))
        draws = np.asarray(mk.conditional_samples(jnp.asarray([x, 0.0]), jnp.asarray([[True, False]])))[0]
        assert set(np.unique(draws[:, 1])) <= {0.0, 1.0, 2.0}
        freq = np.bincount(draws[:, 1].astype(int), minlength=3) / draws.shape[0]
        np.testing.assert_allclose(freq, want / want.sum(), atol=0.1)
    draws = np.asarray(mk.conditional_samples(jnp.asarray([0.0, 2.0]), jnp.asarray([[False, True]])))[0]
    assert draws[:, 0].mean() > 0.3  # x0 given c = 2 leans positive


def test_generative_errors(gaussian_rows):
    with pytest.raises(ValueError, match="categorical"):
        jaxshap.maskers.Generative(gaussian_rows, categorical=[0])  # not integer codes
    with pytest.raises(ValueError, match="categorical"):
        jaxshap.maskers.Generative(gaussian_rows, categorical=[5])
    with pytest.raises(ValueError, match="latent"):
        jaxshap.maskers.Generative(gaussian_rows, latent=0)
    with pytest.raises(ValueError, match="n_samples"):
        jaxshap.maskers.Generative(gaussian_rows, n_samples=0)


# --- the shared training loop ---------------------------------------------------------------------
def test_early_stopping_stops_after_patience_and_keeps_the_best():
    errors = iter([3.0, 2.0, 2.5, 2.0, 2.7, 9.0, 0.1])

    def epoch(state, key):
        return state + 1, float(state)

    params, history = train_epochs(epoch, lambda s: next(errors), 0, jax.random.key(0), epochs=7, patience=3,
                                   params_of=lambda s: s)
    assert history["validation_error"] == [3.0, 2.0, 2.5, 2.0, 2.7]  # stopped: 3 epochs without a lower error
    assert params == 2  # the state after epoch 2, the best
    state, stop = early_stop(Stopping(1.0, "a", 0), 1.0, "b", 1)
    assert stop and state.params == "a"


def test_uniform_size_masks_sizes_are_uniform():
    masks = np.asarray(uniform_size_masks(jax.random.key(0), 40000, 4))
    freq = np.bincount(masks.sum(1), minlength=5) / masks.shape[0]
    np.testing.assert_allclose(freq, 0.2, atol=0.01)
    pairs = masks[masks.sum(1) == 2]
    np.testing.assert_allclose(pairs.mean(0), 0.5, atol=0.02)  # a uniform subset given the size


def test_chunk_planner_counts_a_maskers_own_memory():
    from jaxshap._core._chunking import chunk_bytes, chunk_capacity

    budget = 2**22
    rows_plain, _ = chunk_capacity(8, 0, 100, budget)
    rows_net, coalitions = chunk_capacity(8, 0, 100, budget, 0, 1024)  # 1 KiB of activations per coalition
    assert coalitions == 8 and rows_net == chunk_bytes(budget) // (8 * 1024) < rows_plain


@pytest.mark.parametrize("kind", ["Generative", "Surrogate"])
def test_maskers_trained_alike_share_their_training_program(kind):
    """A second masker on rows of the same shapes with the same options reuses the first one's
    compiled epoch (the folds of a cross-fit pay one compile); other options get their own."""
    from jaxshap._estimators._training import default_epoch

    X = np.random.default_rng(4).normal(size=(120, 3)).astype(np.float32)
    build = {"Generative": lambda key, **kw: jaxshap.maskers.Generative(X, key=key, epochs=2, **kw),
             "Surrogate": lambda key, **kw: jaxshap.maskers.Surrogate(linear, X, key=key, epochs=2, **kw)}[kind]
    first = build(0)
    before = default_epoch.cache_info()
    second = build(1)
    after = default_epoch.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    assert not np.allclose(first.validation_loss_, second.validation_loss_)  # other keys, other networks
    build(2, learning_rate=1e-3)
    assert default_epoch.cache_info().misses == before.misses + 1
