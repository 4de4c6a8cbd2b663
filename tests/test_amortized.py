"""AmortizedExplainer (FastSHAP): the objective, training against exact values, efficiency, save/load."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import interventional_game, interventional_shapley, shapley_from_game

import jaxshap
from jaxshap._estimators._fastshap import all_coalitions, fastshap_loss, normalise, sample_paired_masks
from jaxshap._estimators._training import silverman_factor

M = 5


def smooth_mlp(seed, m, n_outputs=None):
    rng = np.random.default_rng(seed)
    out = () if n_outputs is None else (n_outputs,)
    w1 = (rng.normal(size=(m, 16)) / np.sqrt(m)).astype(np.float32)
    b1 = (0.3 * rng.normal(size=16)).astype(np.float32)
    w2 = (rng.normal(size=(16,) + out) / 4).astype(np.float32)
    return lambda X: jnp.tanh(X @ w1 + b1) @ w2


@pytest.fixture(scope="module")
def trained():
    rng = np.random.default_rng(0)
    model = smooth_mlp(0, M)
    background = rng.normal(size=(16, M)).astype(np.float32)
    X_train = rng.normal(size=(512, M)).astype(np.float32)
    X_test = rng.normal(size=(40, M)).astype(np.float32)
    ex = jaxshap.AmortizedExplainer(model, background, hidden=(64, 64), background_samples=None)
    ex.fit(X_train, key=jax.random.key(0), epochs=40, batch_size=32, learning_rate=1e-2, progress=False)
    return model, background, X_test, ex


# --- the objective ------------------------------------------------------------------------------
def test_paired_masks_follow_the_shapley_kernel():
    m, pairs = 6, 20000
    masks = np.asarray(sample_paired_masks(jax.random.key(0), m, pairs))
    np.testing.assert_array_equal(masks[pairs:], ~masks[:pairs])  # complements
    sizes = masks[:pairs].sum(1)
    assert sizes.min() >= 1 and sizes.max() <= m - 1
    kernel = np.array([(m - 1) / (s * (m - s)) for s in range(1, m)])
    expected = kernel / kernel.sum()
    observed = np.bincount(sizes, minlength=m)[1:] / pairs
    np.testing.assert_allclose(observed, expected, atol=4 * np.sqrt(expected * (1 - expected) / pairs).max())
    # within a size, every feature is equally likely
    pick = masks[:pairs][sizes == 2]
    q = 2 / m
    np.testing.assert_allclose(pick.mean(0), q, atol=4 * np.sqrt(q * (1 - q) / len(pick)))


def test_all_coalitions_probabilities():
    masks, p = all_coalitions(4)
    assert masks.shape == (14, 4) and len({tuple(r) for r in masks}) == 14
    np.testing.assert_allclose(p.sum(), 1.0)
    s = masks.sum(1)
    kernel = 3.0 / (np.array([math.comb(4, k) for k in s]) * s * (4 - s))
    np.testing.assert_allclose(p, kernel / kernel.sum())


def test_loss_matches_numpy_and_its_minimiser_is_the_shapley_values(rng):
    """The weighted FastSHAP objective over all coalitions, minimised over normalised phi, gives
    the exact Shapley values (checked with NumPy least squares against the oracle), and the JAX
    loss equals a NumPy evaluation of the same sum."""
    m = 4
    w = rng.normal(size=(m, 3))
    model_np = lambda Z: np.tanh(Z @ w).sum(-1)
    model = lambda Z: jnp.tanh(Z @ jnp.asarray(w, jnp.float32)).sum(-1, keepdims=True)
    background = rng.normal(size=(5, m))
    x = rng.normal(size=m)
    game = interventional_game(model_np, x, background)
    masks, p = all_coalitions(m)
    v = np.array([game(frozenset(np.flatnonzero(s))) for s in masks])
    v0, vN = game(frozenset()), game(frozenset(range(m)))
    # phi = a + (vN - v0 - sum a) / m = P a + (vN - v0) / m, P = I - 11^T / m: least squares in a
    P = np.eye(m) - 1.0 / m
    Z = masks.astype(float)
    target = v - v0 - Z.sum(1) * (vN - v0) / m
    a = np.linalg.lstsq(np.sqrt(p)[:, None] * (Z @ P), np.sqrt(p) * target, rcond=None)[0]
    phi = P @ a + (vN - v0) / m
    np.testing.assert_allclose(phi, shapley_from_game(game, m), rtol=1e-10, atol=1e-12)
    # the JAX loss at that phi and at a perturbed one, against NumPy
    for trial in (phi, phi + np.array([0.1, -0.1, 0.05, -0.05])):
        got = fastshap_loss(
            jnp.asarray(trial, jnp.float32)[None, :, None],
            jnp.asarray(x, jnp.float32)[None],
            jnp.asarray(masks)[None],
            model,
            jnp.asarray(background, jnp.float32),
            jnp.asarray([v0], jnp.float32),
            jnp.broadcast_to(jnp.arange(5), (1, masks.shape[0], 5)),
            jnp.asarray(p, jnp.float32),
        )
        want = (p * (v - v0 - Z @ trial) ** 2).sum()
        np.testing.assert_allclose(float(got), want, rtol=1e-4, atol=1e-7)


def test_normalise_is_efficient():
    raw = jax.random.normal(jax.random.key(0), (3, 4, 2))
    gap = jax.random.normal(jax.random.key(1), (3, 2))
    out = normalise(raw, gap)
    np.testing.assert_allclose(np.asarray(out.sum(1)), np.asarray(gap), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out - raw)[:, 0], np.asarray(out - raw)[:, 3], rtol=1e-6)


# --- the trained explainer ----------------------------------------------------------------------
def test_amortized_matches_exact_on_held_out_rows(trained):
    model, background, X_test, ex = trained
    exact = np.asarray(jaxshap.ExactExplainer(model, background)(X_test).values)
    oracle = interventional_shapley(lambda Z: np.asarray(model(jnp.asarray(Z, jnp.float32))), X_test[:3], background)
    np.testing.assert_allclose(exact[:3], oracle, rtol=1e-4, atol=1e-5)
    values = np.asarray(ex(X_test).values)
    relative = np.linalg.norm(values - exact) / np.linalg.norm(exact)
    # measured 0.056 (M = 5, 512 training rows, 40 epochs; 0.072 with jitter=0); an untrained network gives 0.6+
    assert relative < 0.08, relative
    assert ex.validation_error_ < 0.10
    untrained = np.broadcast_to(((np.asarray(model(X_test)) - float(ex.expected_value)) / M)[:, None], values.shape)
    assert np.linalg.norm(untrained - exact) / np.linalg.norm(exact) > 0.5


def test_amortized_efficiency_to_rounding(trained):
    model, background, X_test, ex = trained
    expl = ex(X_test)
    fx = np.asarray(model(X_test))
    np.testing.assert_allclose(float(ex.expected_value), np.asarray(model(background)).mean(), rtol=1e-6)
    gap = np.abs(np.asarray(expl.values.sum(1) + expl.base_values) - fx)
    assert gap.max() < 1e-5 * max(1.0, np.abs(fx).max()), gap.max()
    assert expl.stderr is None and expl.values.shape == (40, M)


def test_amortized_keeps_the_best_epoch(trained):
    *_, ex = trained
    history = ex.history_["validation_error"]
    assert ex.validation_error_ == min(history)
    assert len(ex.history_["loss"]) == len(history) <= 40
    assert history[-1] < history[0]


def test_amortized_save_load_round_trip(trained, tmp_path):
    model, background, X_test, ex = trained
    path = str(tmp_path / "explainer.npz")
    ex.save(path)
    loaded = jaxshap.AmortizedExplainer.load(path, model)
    a, b = ex(X_test), loaded(X_test)
    np.testing.assert_array_equal(np.asarray(a.values), np.asarray(b.values))
    np.testing.assert_array_equal(np.asarray(a.base_values), np.asarray(b.base_values))
    assert loaded.validation_error_ == ex.validation_error_ and loaded.history_ == ex.history_
    assert b.feature_names == a.feature_names
    with pytest.raises(ValueError, match="output"):
        jaxshap.AmortizedExplainer.load(path, lambda X: jnp.stack([X[:, 0], X[:, 1]], axis=1))
    np.savez(str(tmp_path / "other.npz"), a=np.zeros(3))
    with pytest.raises(ValueError, match="not a saved"):
        jaxshap.AmortizedExplainer.load(str(tmp_path / "other.npz"), model)


def test_amortized_validation_tuple_reports_the_error_it_measures(rng):
    m = 3
    model = smooth_mlp(2, m, n_outputs=2)
    background = rng.normal(size=(8, m)).astype(np.float32)
    X = rng.normal(size=(128, m)).astype(np.float32)
    X_val = rng.normal(size=(10, m)).astype(np.float32)
    ref = np.asarray(jaxshap.ExactExplainer(model, background)(X_val).values)
    ex = jaxshap.AmortizedExplainer(model, background, hidden=(16,)).fit(
        X, key=1, epochs=3, validation=(X_val, ref), progress=True
    )
    expl = ex(X_val)
    assert expl.values.shape == (10, m, 2) and expl.base_values.shape == (10, 2)
    measured = np.linalg.norm(np.asarray(expl.values) - ref) / np.linalg.norm(ref)
    np.testing.assert_allclose(ex.validation_error_, measured, rtol=1e-4)
    fx = np.asarray(model(X_val))
    np.testing.assert_allclose(np.asarray(expl.values.sum(1) + expl.base_values), fx, rtol=1e-5, atol=1e-5)


def test_amortized_errors(rng):
    model = smooth_mlp(3, 3)
    background = rng.normal(size=(8, 3)).astype(np.float32)
    ex = jaxshap.AmortizedExplainer(model, background, hidden=(8,))
    with pytest.raises(ValueError, match="not trained"):
        ex(background)
    with pytest.raises(ValueError, match="n_coalitions"):
        jaxshap.AmortizedExplainer(model, background, n_coalitions=7)
    with pytest.raises(ValueError, match="hidden"):
        jaxshap.AmortizedExplainer(model, background, hidden=(0,))
    with pytest.raises(ValueError, match="validation"):
        ex.fit(background, validation=1.5)
    with pytest.raises(ValueError, match="validation"):
        ex.fit(background, validation=(background[:2], np.zeros((2, 4))))
    with pytest.raises(ValueError, match="features"):
        ex.fit(background[:, :2])
    with pytest.raises(ValueError, match="too few"):
        ex.fit(background[:1], validation=1)
    for bad in (-0.1, float("inf"), "silverman", True):
        with pytest.raises(ValueError, match="jitter"):
            ex.fit(background, jitter=bad)


def test_silverman_factor_is_the_normal_reference_bandwidth():
    # one feature: Silverman's rule of thumb h = (4/3)^(1/5) n^(-1/5) ~ 1.06 n^(-1/5)
    for n in (10, 1000):
        np.testing.assert_allclose(silverman_factor(n, 1), 1.0592 * n ** -0.2, rtol=1e-4)
    # d features: (4 / (d + 2))^(1 / (d + 4)) n^(-1 / (d + 4)), shrinking with n, growing with d
    np.testing.assert_allclose(silverman_factor(2000, 16), (4 / 18) ** 0.05 * 2000**-0.05, rtol=1e-12)
    assert silverman_factor(1000, 8) > silverman_factor(4000, 8)
    assert silverman_factor(1000, 32) > silverman_factor(1000, 8)


def test_fit_resolves_the_jitter(trained):
    *_, ex = trained
    # 512 rows, 10 % held out (51): 461 training rows of 5 features
    np.testing.assert_allclose(ex.jitter_, silverman_factor(461, M), rtol=1e-12)


def test_jitter_moves_the_training_rows(rng):
    """Same key, same rows: jitter=0 reproduces itself; a positive jitter trains on other rows."""
    m = 3
    model = smooth_mlp(4, m)
    background = rng.normal(size=(8, m)).astype(np.float32)
    X = rng.normal(size=(64, m)).astype(np.float32)
    X_val = rng.normal(size=(4, m)).astype(np.float32)
    ref = np.asarray(jaxshap.ExactExplainer(model, background)(X_val).values)
    fit = lambda j: jaxshap.AmortizedExplainer(model, background, hidden=(8,)).fit(
        X, key=5, epochs=2, validation=(X_val, ref), jitter=j, progress=False
    )
    leaves = lambda ex: np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(ex.params)])
    a, b, c = fit(0.0), fit(0.0), fit(0.5)
    assert a.jitter_ == 0.0 and c.jitter_ == 0.5
    np.testing.assert_array_equal(leaves(a), leaves(b))
    assert np.abs(leaves(a) - leaves(c)).max() > 1e-4


def test_default_network_and_sampling_follow_the_measurements():
    """``hidden="auto"``: (128, 128) up to 8 features (same error, 3x the throughput on the
    ``amortized`` bench), (256, 256) above; 64 coalitions of 16 background rows per step."""
    rng = np.random.default_rng(0)
    model = lambda X: X.sum(-1)
    small = jaxshap.AmortizedExplainer(model, rng.normal(size=(20, 8)).astype(np.float32))
    large = jaxshap.AmortizedExplainer(model, rng.normal(size=(20, 9)).astype(np.float32))
    assert small.hidden == (128, 128) and large.hidden == (256, 256)
    assert (small.n_coalitions, small.background_samples) == (64, 16)
    assert jaxshap.AmortizedExplainer(model, rng.normal(size=(20, 8)), hidden=(32,)).hidden == (32,)
    with pytest.raises(ValueError, match="hidden"):
        jaxshap.AmortizedExplainer(model, rng.normal(size=(20, 8)), hidden="big")
