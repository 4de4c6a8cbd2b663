"""FastSHAP training as pure functions: the trainer, early stopping, and AmortizedExplainer.fit on top."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxshap
from jaxshap._estimators._fastshap import Scaling, TrainingConfig, network_values, train_amortized
from jaxshap._estimators._training import Stopping, default_optimizer, early_stop

M = 4


def _model():
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(M, 8)) / 2).astype(np.float32)
    return lambda X: jnp.tanh(X @ w).sum(-1)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    background = rng.normal(size=(10, M)).astype(np.float32)
    X = rng.normal(size=(70, M)).astype(np.float32)
    return background, X


def test_early_stop_keeps_the_strictly_best_and_stops_after_patience():
    state = Stopping(math.inf, None, 0)
    errors = [0.5, 0.4, 0.4, 0.45, 0.3, 0.31, 0.32]
    stops = []
    for epoch, err in enumerate(errors):
        state, stop = early_stop(state, err, f"params {epoch}", patience=2)
        stops.append(stop)
    # 0.4 at epoch 2 is not strictly better: the wait grows; 0.3 at epoch 4 resets it
    assert stops == [False, False, False, True, False, False, True]
    assert state.best == 0.3 and state.params == "params 4" and state.waited == 2


def test_fit_is_the_pure_trainer_on_the_same_keys():
    """fit = argument checks + the held-out split + train_amortized; the same key, the same params."""
    model, (background, X) = _model(), _problem()
    X_val = X[:6]
    ref = np.asarray(jaxshap.ExactExplainer(model, background)(X_val).values)
    ex = jaxshap.AmortizedExplainer(model, background, hidden=(8,), n_coalitions=6, background_samples=4)
    ex.fit(X, key=3, epochs=4, batch_size=16, validation=(X_val, ref), jitter=0.1, progress=False)

    k_init, _, _, k_train = jax.random.split(jax.random.key(3), 4)
    config = TrainingConfig(M, 1, (8,), 6, 4, 0.99, 16, 4, 20, 0.1)
    scaling = Scaling(ex.base, ex.x_mean, ex.x_scale, ex.y_scale)
    optimizer = default_optimizer(3e-3, 4 * (70 // 16))
    params, history = train_amortized(
        k_init, k_train, config, ex.model.fn, ex.masker.data, scaling, jnp.asarray(X), (jnp.asarray(X_val), jnp.asarray(ref)[..., None]),
        optimizer,
    )
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(ex.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert history == ex.history_ and len(history["loss"]) == 4
    assert ex.validation_error_ == min(history["validation_error"])
    # the kept network's error is the one it is reported with
    phi = network_values(params, scaling, jnp.asarray(X_val), ex.model.fn(jnp.asarray(X_val)))[..., 0]
    measured = np.linalg.norm(np.asarray(phi) - ref) / np.linalg.norm(ref)
    np.testing.assert_allclose(measured, ex.validation_error_, rtol=1e-5)


def test_trainer_keys_matter_and_any_network_is_efficient():
    """Other keys, other parameters (the same key giving the same ones is checked above); every
    network's values sum to ``f(x) - E f`` (the normalisation), trained or not."""
    model, (background, X) = _model(), _problem(1)
    bg = jnp.asarray(background)
    outputs = np.asarray(model(bg))[:, None].astype(np.float64)
    scaling = Scaling(jnp.asarray(outputs.mean(0), jnp.float32), bg.mean(0), bg.std(0),
                      jnp.asarray(outputs.std(0), jnp.float32))
    config = TrainingConfig(M, 1, (8,), 8, 4, 0.9, 10, 2, 5, 0.0)
    f = lambda Z: model(Z)[..., None]
    X_val = jnp.asarray(X[:5])
    val = (X_val, jnp.zeros((5, M, 1)) + 0.1)
    run = lambda k: train_amortized(jax.random.key(k), jax.random.key(k + 1), config, f, bg, scaling, jnp.asarray(X), val,
                                    optax.adam(1e-2))[0]
    leaves = lambda p: np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(p)])
    a, b = run(0), run(2)
    assert np.abs(leaves(a) - leaves(b)).max() > 1e-4
    phi = network_values(a, scaling, X_val, f(X_val))
    np.testing.assert_allclose(np.asarray(phi.sum(1)), np.asarray(f(X_val) - scaling.base), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, name", [
    (dict(averaging=True), "averaging"), (dict(averaging=1.0), "averaging"),
    (dict(memory_budget=True), "memory_budget"), (dict(background_samples=0), "background_samples"),
    (dict(hidden="big"), "hidden"), (dict(hidden=(8, True)), "hidden"), (dict(n_coalitions=True), "n_coalitions"),
])
def test_constructor_arguments_are_checked(kwargs, name):
    background, _ = _problem()
    with pytest.raises(ValueError, match=f"`{name}`"):
        jaxshap.AmortizedExplainer(_model(), background, **kwargs)


@pytest.mark.parametrize("kwargs, name", [
    (dict(epochs=0), "epochs"), (dict(batch_size=True), "batch_size"), (dict(patience=1.5), "patience"),
    (dict(learning_rate=0.0), "learning_rate"), (dict(learning_rate=float("inf")), "learning_rate"),
    (dict(reference="sampled"), "reference"), (dict(validation=True), "validation"),
    (dict(validation=0.0), "validation"), (dict(validation=(1, 2, 3)), "validation"),
])
def test_fit_arguments_are_checked(kwargs, name):
    background, X = _problem()
    ex = jaxshap.AmortizedExplainer(_model(), background, hidden=(4,))
    with pytest.raises(ValueError, match=f"`{name}`"):
        ex.fit(X, **kwargs)
