"""Explainers inside jax.jit and jax.grad, gradients checked against finite differences."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap


def mlp(params, X):
    return jnp.tanh(X @ params["w1"] + params["b1"]) @ params["w2"]


def make(dtype):
    rng = np.random.default_rng(21)
    params = {
        "w1": jnp.asarray(rng.normal(size=(4, 6)), dtype),
        "b1": jnp.asarray(rng.normal(size=6), dtype),
        "w2": jnp.asarray(rng.normal(size=6), dtype),
    }
    background = jnp.asarray(rng.normal(size=(5, 4)), dtype)
    X = jnp.asarray(rng.normal(size=(3, 4)), dtype)
    return params, background, X


@pytest.mark.parametrize("kind", ["exact", "permutation"])
def test_grad_matches_finite_differences(kind):
    with jax.enable_x64(True):
        params, background, X = make(jnp.float64)

        def make_explainer(p):
            model = partial(mlp, p)
            if kind == "exact":
                return jaxshap.ExactExplainer(model, background)
            return jaxshap.PermutationExplainer(model, background, n_permutations=6)

        @jax.jit  # one compilation serves every finite-difference evaluation
        def loss(p):
            return (make_explainer(p)(X, key=jax.random.key(0)).values ** 2).sum()

        grads = jax.grad(loss)(params)
        eps = 1e-6
        for name in ("w1", "b1", "w2"):
            flat = np.asarray(params[name]).ravel()
            for index in range(0, flat.size, max(1, flat.size // 4)):
                bump = np.zeros_like(flat)
                bump[index] = eps
                up = {**params, name: jnp.asarray((flat + bump).reshape(params[name].shape))}
                down = {**params, name: jnp.asarray((flat - bump).reshape(params[name].shape))}
                numeric = (loss(up) - loss(down)) / (2 * eps)
                analytic = np.asarray(grads[name]).ravel()[index]
                np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_jit_of_explainer_call_and_construction():
    params, background, X = make(jnp.float32)
    ex = jaxshap.ExactExplainer(partial(mlp, params), background)
    eager = ex(X)
    jitted = jax.jit(lambda Z: ex(Z))(X)
    assert isinstance(jitted, jaxshap.Explanation)
    np.testing.assert_allclose(jitted.values, eager.values, rtol=1e-5, atol=1e-6)

    @jax.jit
    def explain(p, Z):
        return jaxshap.PermutationExplainer(partial(mlp, p), background, n_permutations=4)(Z).values

    out = explain(params, X)
    np.testing.assert_allclose(out.sum(1), mlp(params, X) - mlp(params, background).mean(), rtol=1e-4, atol=1e-5)


def test_grad_with_respect_to_inputs():
    # d/dx of sum_j phi_j(x) = d/dx f(x) by efficiency (the base value does not depend on x).
    params, background, X = make(jnp.float32)
    ex = jaxshap.ExactExplainer(partial(mlp, params), background)
    g = jax.grad(lambda Z: ex(Z).values.sum())(X)
    expected = jax.grad(lambda Z: mlp(params, Z).sum())(X)
    np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5)
