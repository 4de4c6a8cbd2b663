"""Extending jaxshap from outside the package: each section adds one strategy the way a user would,
with one new class and nothing edited inside ``jaxshap``."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from conftest import make_mlp
from jaxshap.coalitions import Sampler, kernel_plan


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
