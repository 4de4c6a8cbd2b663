"""The estimators' own matrix products are traced at full float32 precision.

Accelerators evaluate float32 products in TF32 by default (about 10 bits of mantissa); in an
estimator that rounds Shapley coefficients and Gram matrices and breaks efficiency at about 1e-4
relative (seen on an H100). A CPU computes every product in full float32 whatever the setting,
so the check here is structural: every ``dot_general`` an estimator traces carries
``Precision.HIGHEST``. The value functions below contain no product of their own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from jaxshap import estimators

M = 6
W = jnp.linspace(-1.0, 1.0, M)


def game(masks):
    x = masks.astype(jnp.float32)
    return (jnp.sum(x * W, axis=-1) + x[..., 0] * x[..., 1])[..., None]


def dot_precisions(jaxpr) -> list:
    """The ``precision`` parameter of every ``dot_general`` in ``jaxpr`` and its sub-jaxprs."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += dot_precisions(inner)
    return found


ESTIMATORS = {
    "exact": lambda: estimators.exact_shapley(game, M),
    "kernel": lambda: estimators.kernel_shapley(jax.random.key(0), game, M, 40),
    "kernel, third order": lambda: estimators.kernel_shapley(jax.random.key(0), game, M, 40, third_order=True),
    "exact interactions": lambda: estimators.exact_interactions(game, M, "k-SII"),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimator_products_run_at_full_precision(name):
    precisions = dot_precisions(jax.make_jaxpr(ESTIMATORS[name])().jaxpr)
    assert precisions, "the estimator traced no matrix product; the check would be empty"
    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    assert all(p == highest for p in precisions), precisions
