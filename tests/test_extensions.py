"""Extending jaxshap from outside the package: each section adds one strategy and checks it."""


# --- a new masker ------------------------------------------------------------------------------
# A masker defined outside the package, as a user would: one subclass of jaxshap.maskers.Masker,
# no decorator, no registration. Inside the package it would be one new module plus one export
# line in jaxshap/maskers/__init__.py.
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap


class ReferenceRow(jaxshap.maskers.Masker):
    """Features outside the coalition take a fixed reference row's values: ``v(S) = f(x_S, r_-S)``."""

    def __init__(self, row):
        self.row = jnp.asarray(row, jnp.float32)

    @property
    def n_features(self):
        return self.row.shape[0]

    @property
    def dtype(self):
        return self.row.dtype

    @property
    def evals_per_coalition(self):
        return 1

    @property
    def probe_rows(self):
        return self.row[None, :]

    def coalition_values(self, f, x, masks):
        return f(jnp.where(masks, x[None, :], self.row[None, :]))


_REF_M = 5
_REF_RNG = np.random.default_rng(27)
_REF_W1, _REF_W2 = _REF_RNG.normal(size=(_REF_M, 7)).astype(np.float32), _REF_RNG.normal(size=7).astype(np.float32)
_REF_X = _REF_RNG.normal(size=(3, _REF_M)).astype(np.float32)
_REFERENCE = _REF_RNG.normal(size=_REF_M).astype(np.float32)


def _ref_model(Z):
    return jnp.tanh(Z @ _REF_W1) @ _REF_W2 + Z[..., 0] * Z[..., 3]


def _ref_model_np(Z):
    Z = np.asarray(Z, np.float64)
    return np.tanh(Z @ _REF_W1.astype(np.float64)) @ _REF_W2.astype(np.float64) + Z[..., 0] * Z[..., 3]


def _reference_shapley(x, r):
    """Shapley values of ``v(S) = f(x_S, r_-S)``, enumerating every coalition with its weight
    ``|S|! (M - |S| - 1)! / M!`` (the definition, in float64)."""
    m = x.shape[0]

    def v(coalition):
        z = np.array(r, np.float64)
        z[list(coalition)] = x[list(coalition)]
        return _ref_model_np(z[None, :])[0]

    phi = np.zeros(m)
    for j in range(m):
        others = [i for i in range(m) if i != j]
        for size in range(m):
            weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            for s in itertools.combinations(others, size):
                phi[j] += weight * (v(s + (j,)) - v(s))
    return phi


def test_new_masker_is_a_pytree_without_a_decorator():
    masker = ReferenceRow(_REFERENCE)
    leaves, treedef = jax.tree_util.tree_flatten(masker)
    assert len(leaves) == 1 and np.array_equal(np.asarray(leaves[0]), _REFERENCE)
    again = jax.tree_util.tree_unflatten(treedef, [leaves[0] + 1])
    assert type(again) is ReferenceRow and np.array_equal(np.asarray(again.row), _REFERENCE + 1)


def test_new_masker_exact_values_match_the_definition_and_are_efficient():
    masker = ReferenceRow(_REFERENCE)
    expl = jaxshap.ExactExplainer(_ref_model, masker)(_REF_X)
    want = np.stack([_reference_shapley(x.astype(np.float64), _REFERENCE) for x in _REF_X])
    np.testing.assert_allclose(np.asarray(expl.values), want, rtol=1e-4, atol=1e-5)
    base = np.asarray(expl.base_values)
    np.testing.assert_allclose(base, _ref_model_np(_REFERENCE[None, :])[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + base, _ref_model_np(_REF_X), rtol=1e-5, atol=1e-5)
    # the automatic choice and the permutation explainer take it too (uniform orders: Shapley values)
    assert isinstance(jaxshap.Explainer(_ref_model, masker), jaxshap.ExactExplainer)
    perm = jaxshap.PermutationExplainer(_ref_model, masker, n_permutations=8)(_REF_X, key=1)
    np.testing.assert_allclose(np.asarray(perm.values).sum(1) + np.asarray(perm.base_values), _ref_model_np(_REF_X), atol=1e-5)


def test_new_masker_compiles_once_for_instances_of_the_same_shape():
    traces = []

    @jax.jit
    def explain(explainer, X):
        traces.append(1)  # runs once per trace, not per call
        return explainer(X).values

    rows = [_REFERENCE, _REFERENCE + 1.0]
    outs = [np.asarray(explain(jaxshap.ExactExplainer(_ref_model, ReferenceRow(r)), _REF_X)) for r in rows]
    assert len(traces) == 1
    for out, r in zip(outs, rows):  # each call used its own instance's row, not a baked-in one
        want = np.stack([_reference_shapley(x.astype(np.float64), r) for x in _REF_X])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_gradients_flow_through_the_new_maskers_array():
    # sum over rows and features of phi = sum_i f(x_i) - n f(r) (efficiency), so
    # d/dr = -n grad f(r): exact, whatever the model.
    def total(explainer):
        return explainer(_REF_X).values.sum()

    grads = jax.grad(total)(jaxshap.ExactExplainer(_ref_model, ReferenceRow(_REFERENCE)))
    want = -_REF_X.shape[0] * jax.grad(lambda r: _ref_model(r[None, :])[0])(jnp.asarray(_REFERENCE))
    np.testing.assert_allclose(np.asarray(grads.masker.row), np.asarray(want), rtol=1e-4, atol=1e-5)
    # and through a value that is not fixed by efficiency: a linear model's phi_j = w_j (x_j - r_j)
    w = jnp.asarray(_REF_W2[:_REF_M])
    by_row = jax.grad(lambda r: (jaxshap.ExactExplainer(lambda Z: Z @ w, ReferenceRow(r))(_REF_X).values ** 2).sum())(
        jnp.asarray(_REFERENCE)
    )
    want = (-2 * w**2 * (_REF_X - _REFERENCE)).sum(0)
    np.testing.assert_allclose(np.asarray(by_row), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_an_object_that_does_not_subclass_masker_is_refused_clearly():
    class DuckMasker:  # the protocol's methods, but none of the base class's hooks or registration
        n_features, dtype, evals_per_coalition = _REF_M, jnp.float32, 1
        probe_rows = jnp.zeros((1, _REF_M), jnp.float32)

        def coalition_values(self, f, x, masks):
            return f(jnp.where(masks, x[None, :], 0.0))

    with pytest.raises(TypeError, match=r"DuckMasker.*does not subclass jaxshap.maskers.Masker"):
        jaxshap.ExactExplainer(_ref_model, DuckMasker())
