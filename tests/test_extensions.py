"""Extending jaxshap from outside the package: each section adds one strategy the way a user would,
with one new class and nothing edited inside ``jaxshap``."""

from __future__ import annotations

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_mlp

import jaxshap
from jaxshap.coalitions import Sampler, kernel_plan


# --- a new masker ------------------------------------------------------------------------------
# A masker defined outside the package, as a user would: one subclass of jaxshap.maskers.Masker,
# no decorator, no registration. Inside the package it would be one new module plus one export
# line in jaxshap/maskers/__init__.py.


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


# --- a new KernelSHAP sampler ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Outer(Sampler):
    """Size ``s`` has mass ``1 / min(s, M - s) ** power``: most sampled pairs at the outer layers."""

    power: float = 2.0
    name = "outer"

    def size_mass(self, n_features: int, size: int) -> float:
        return 1.0 / min(size, n_features - size) ** self.power


def test_a_new_sampler_is_registered_and_allocates_by_its_mass():
    """Defining the class registers it by name; a plan by that name is the instance's plan, and
    its strata get one pair each plus the rest in proportion to the sampler's layer mass."""
    assert Sampler.registered()["outer"] == Outer()
    assert {"paired", "leverage", "middle"} <= set(Sampler.registered())
    m, budget = 12, 300
    plan = kernel_plan(m, budget, Outer())
    assert kernel_plan(m, budget, "outer") is plan  # one cached plan for the name and the instance
    assert plan.sampler == "outer" and plan.strata
    mass = np.array([(1 if st.middle else 2) * Outer().size_mass(m, st.size) for st in plan.strata])
    pairs = np.array([st.n_pairs for st in plan.strata])
    sampled_pairs = (budget - len(plan.enum_weights)) // 2
    want = 1 + (sampled_pairs - len(pairs)) * mass / mass.sum()  # no stratum is full at this budget
    assert np.abs(pairs - want).max() < 1, (pairs, want)
    assert not np.array_equal(pairs, [st.n_pairs for st in kernel_plan(m, budget, "leverage").strata])


def test_a_new_sampler_converges_to_the_exact_values():
    """``KernelExplainer(..., sampler=Outer())`` gives efficient values whose error against
    ``ExactExplainer`` falls as the budget grows (within the standard errors once every stratum
    has a few pairs); the name selects the same design."""
    m = 8
    params, apply = make_mlp(3, m, hidden=12)
    model = lambda X: apply(params, X)  # noqa: E731
    rng = np.random.default_rng(0)
    bg, X = rng.normal(size=(8, m)).astype(np.float32), rng.normal(size=(4, m)).astype(np.float32)
    exact = np.asarray(jaxshap.ExactExplainer(model, bg)(X).values)
    fx_minus_base = np.asarray(model(jnp.asarray(X)) - model(jnp.asarray(bg)).mean())
    err = {}
    for budget in (30, 90, 200):
        ex = jaxshap.KernelExplainer(model, bg, budget, sampler=Outer())
        assert ex.sampler == Outer()
        sq = []
        for key in range(6):
            out = ex(X, key=key)
            values, stderr = np.asarray(out.values), np.asarray(out.stderr)
            np.testing.assert_allclose(values.sum(1), fx_minus_base, rtol=1e-4, atol=1e-5)  # efficiency
            if budget == 200:  # enough pairs per stratum for the standard error to be calibrated
                assert (np.abs(values - exact) <= 5 * stderr + 1e-5).all()
            sq.append(((values - exact) ** 2).mean())
        err[budget] = float(np.mean(sq))
    assert err[200] < err[90] < err[30], err
    assert err[200] < err[30] / 50, err
    named = jaxshap.KernelExplainer(model, bg, 90, sampler="outer")
    assert named.sampler == "outer"
    np.testing.assert_array_equal(np.asarray(named(X, key=1).values),
                                  np.asarray(jaxshap.KernelExplainer(model, bg, 90, sampler=Outer())(X, key=1).values))


def test_sampler_instances_select_the_named_designs():
    """``Paired()``, ``Leverage()``, ``Middle()`` and ``Auto()`` are the designs and the rule that
    their names select: the same values for one key; other parameters are other designs."""
    from jaxshap.coalitions import Auto, Leverage, Middle, Paired

    m = 10
    params, apply = make_mlp(5, m)
    model = lambda X: apply(params, X)  # noqa: E731
    rng = np.random.default_rng(1)
    bg, X = rng.normal(size=(6, m)).astype(np.float32), rng.normal(size=(2, m)).astype(np.float32)
    for name, instance in (("paired", Paired()), ("leverage", Leverage()), ("middle", Middle()), ("auto", Auto())):
        by_name = jaxshap.KernelExplainer(model, bg, 150, sampler=name)(X, key=2)
        by_instance = jaxshap.KernelExplainer(model, bg, 150, sampler=instance)(X, key=2)
        np.testing.assert_array_equal(np.asarray(by_name.values), np.asarray(by_instance.values))
    assert Middle(share=0.5) != Middle() and hash(Middle()) == hash(Middle(share=0.9))
    assert kernel_plan(m, 150, Middle(share=0.5)).strata != kernel_plan(m, 150, "middle").strata
    assert jaxshap.KernelExplainer(model, bg, 150, sampler=Auto(middle_terms=0.0)).sampler == Leverage()
    with pytest.raises(ValueError, match="share"):
        Middle(share=1.0)
    with pytest.raises(ValueError, match="sampler"):
        kernel_plan(m, 150, "no-such-design")
    with pytest.raises(ValueError, match="exists already"):
        type("Again", (Paired,), {"name": "leverage", "__module__": __name__})


# --- a new explainer -----------------------------------------------------------------------------
# An explainer defined outside the package: one class and one registration make it an
# `algorithm=` of jaxshap.Explainer, and its rule lets "auto" pick it before the built-in ones.


class MarkedLinear:
    """A model that says it is linear: ``f(x) = x @ w``."""

    def __init__(self, w):
        self.w = np.asarray(w, np.float32)

    def __call__(self, X):
        return np.asarray(X, np.float32) @ self.w


class LinearByDefinition:
    """Interventional SHAP values of a linear model from the definition: ``w_j (x_j - mean_j)``."""

    def __init__(self, model, background):
        self.model, self.mean = model, np.asarray(background, np.float32).mean(0)

    def __call__(self, X):
        X = np.asarray(X, np.float32)
        base = np.full(X.shape[0], float(self.mean @ self.model.w), np.float32)
        return jaxshap.Explanation(self.model.w * (X - self.mean), base, X)


@pytest.fixture
def registered_explainer():
    from jaxshap._explainers import _auto

    before = dict(_auto._REGISTRY)
    jaxshap.explainers.register_algorithm(
        "by_definition",
        lambda choice: LinearByDefinition(choice.model, choice.rows),
        lambda choice: "a marked linear model" if isinstance(choice.model, MarkedLinear) else None,
        cls=LinearByDefinition,
        before="exact",
    )
    yield
    _auto._REGISTRY.clear()
    _auto._REGISTRY.update(before)


def test_a_registered_explainer_is_an_algorithm_and_auto_picks_it_by_its_rule(registered_explainer):
    rng = np.random.default_rng(0)
    background, X = rng.normal(size=(30, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    model = MarkedLinear([1.0, -2.0, 0.5, 3.0])
    auto = jaxshap.Explainer(model, background)
    assert isinstance(auto, LinearByDefinition) and isinstance(auto, jaxshap.Explainer)
    assert auto.chosen_by_auto == "a marked linear model"
    asked = jaxshap.Explainer(model, background, algorithm="by_definition")
    assert asked.chosen_by_auto == "algorithm='by_definition'"
    # the built-in exact explainer agrees with the new one on this model (and is still picked for others)
    exact = jaxshap.Explainer(model, background, algorithm="exact")(X)
    np.testing.assert_allclose(np.asarray(auto(X).values), np.asarray(exact.values), atol=1e-5)
    assert isinstance(jaxshap.Explainer(lambda x: model(x), background), jaxshap.ExactExplainer)
    with pytest.raises(ValueError, match="by_definition"):
        jaxshap.Explainer(model, background, algorithm="no_such_algorithm")
