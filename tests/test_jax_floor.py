"""The jax floor in pyproject.toml.

XLA:CPU in jaxlib 0.7.0 to 0.8.1 constant-folds gathers from closed-over constants into wrong
values, silently (openxla/xla#34260, jax-ml/jax#33479); from jaxlib 0.8.2, the floor, it is right.
KernelSHAP's third-order controls are gathers (the members of each triple), and a fully enumerated
plan makes the coalitions compile-time constants, so a jitted KernelSHAP at full enumeration is
exposed to it. ``bench/jax_floor_repro.py`` shows the bug in pure JAX.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import shapley_from_game

from bench.jax_floor_repro import cases
from jaxshap.estimators import kernel_shapley


def test_installed_xla_folds_constant_gathers_as_eager():
    """Fails on a jaxlib below the floor: the compiled constant is a permutation of the right one."""
    for name, fn in cases():
        np.testing.assert_array_equal(np.asarray(jax.jit(fn)()), np.asarray(fn()), err_msg=name)


def _cubic_game(m: int, seed: int):
    """A random game with terms up to order three: ``v(S) = sum_T c_T [T <= S]``, ``|T| <= 3``."""
    rng = np.random.default_rng(seed)
    terms = [t for k in range(1, 4) for t in itertools.combinations(range(m), k)]
    coef = rng.normal(size=len(terms))
    member = np.zeros((len(terms), m), np.float32)
    for i, t in enumerate(terms):
        member[i, list(t)] = 1.0
    size = member.sum(1)

    def game(masks):
        inside = masks.astype(jnp.float32) @ member.T == size  # [C, terms]
        return inside.astype(jnp.float32) @ coef.astype(np.float32)

    def oracle(s):
        return sum(c for c, t in zip(coef, terms) if set(t) <= s)

    return game, shapley_from_game(oracle, m)


@pytest.mark.parametrize("m", [4, 5])
def test_enumerated_third_order_kernel_shap_under_jit_is_exact(m):
    """Every coalition, third-order controls on, compiled with the coalitions as constants: the
    estimate is the exact Shapley value."""
    game, exact = _cubic_game(m, seed=m)
    run = jax.jit(lambda key: kernel_shapley(key, game, m, 2**m - 2, third_order=True)[0])
    np.testing.assert_allclose(np.asarray(run(jax.random.key(3))), exact, atol=2e-5)
