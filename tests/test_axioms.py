"""The four Shapley axioms on random games, for the exact and permutation estimators."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import shapley_from_game, tabulated_game

from jaxshap.estimators import exact_shapley, permutation_shapley

M = 5


def game_fn(table):
    """A tabulated game as a jaxshap value function over boolean masks."""
    table = jnp.asarray(table)
    powers = 2 ** jnp.arange(M)

    def value_fn(masks):
        return table[(masks * powers).sum(-1)]

    return value_fn


def random_table(seed, k=None):
    rng = np.random.default_rng(seed)
    shape = (2**M,) if k is None else (2**M, k)
    return rng.normal(size=shape).astype(np.float32)


def estimators():
    exact = lambda v: exact_shapley(v, M)[0]
    perm = lambda v: permutation_shapley(jax.random.key(3), v, M, 40)[0]
    return {"exact": exact, "permutation": perm}


@pytest.mark.parametrize("name", ["exact", "permutation"])
def test_efficiency(name):
    table = random_table(0)
    phi = estimators()[name](game_fn(table))
    np.testing.assert_allclose(phi.sum(), table[-1] - table[0], rtol=1e-5, atol=1e-5)


def test_exact_matches_subset_formula_oracle():
    table = random_table(1, k=2)
    phi = exact_shapley(game_fn(table), M)[0]
    expected = shapley_from_game(tabulated_game(table.astype(np.float64)), M)
    np.testing.assert_allclose(phi, expected, rtol=1e-5, atol=1e-5)


def symmetric_dummy_table(seed):
    """A game where players 0 and 1 are interchangeable and player 4 is a dummy."""
    rng = np.random.default_rng(seed)
    base = {}
    table = np.zeros(2**M, np.float32)
    for index in range(2**M):
        members = [j for j in range(M) if index >> j & 1]
        key = (len({0, 1} & set(members)), tuple(j for j in members if j in (2, 3)))
        if key not in base:
            base[key] = rng.normal()
        table[index] = base[key]
    return table


@pytest.mark.parametrize("name", ["exact", "permutation"])
def test_dummy(name):
    phi = estimators()[name](game_fn(symmetric_dummy_table(2)))
    assert float(jnp.abs(phi[4])) < 1e-6


def test_symmetry_exact():
    phi = exact_shapley(game_fn(symmetric_dummy_table(3)), M)[0]
    np.testing.assert_allclose(phi[0], phi[1], rtol=1e-5, atol=1e-6)


def test_symmetry_permutation_in_expectation():
    v = game_fn(symmetric_dummy_table(4))
    phi, stderr, _, _ = permutation_shapley(jax.random.key(0), v, M, 2000)
    gap = float(jnp.abs(phi[0] - phi[1]))
    assert gap < 4 * float(jnp.sqrt(stderr[0] ** 2 + stderr[1] ** 2)) + 1e-6


@pytest.mark.parametrize("name", ["exact", "permutation"])
def test_linearity(name):
    t1, t2 = random_table(5), random_table(6)
    est = estimators()[name]
    combined = est(game_fn(2.0 * t1 - 3.0 * t2))
    np.testing.assert_allclose(combined, 2.0 * est(game_fn(t1)) - 3.0 * est(game_fn(t2)), rtol=1e-4, atol=1e-5)


def test_permutation_unbiased_and_calibrated():
    table = random_table(7)
    exact = np.asarray(exact_shapley(game_fn(table), M)[0])
    covered, runs = 0, 30
    for seed in range(runs):
        phi, stderr, _, _ = permutation_shapley(jax.random.key(seed), game_fn(table), M, 16)
        covered += int((np.abs(np.asarray(phi) - exact) <= 3 * np.asarray(stderr) + 1e-6).sum())
    assert covered / (runs * M) >= 0.9


def test_permutation_error_shrinks_with_budget():
    table = random_table(8)
    exact = np.asarray(exact_shapley(game_fn(table), M)[0])
    err = {}
    for n in (8, 512):
        errs = [
            np.abs(np.asarray(permutation_shapley(jax.random.key(s), game_fn(table), M, n)[0]) - exact).mean()
            for s in range(5)
        ]
        err[n] = np.mean(errs)
    assert err[512] < err[8] / 3


def test_permutation_walks_every_coalition_of_a_two_player_game_exactly():
    # With two players a walk and its reverse cover both orders: every estimate is exact.
    table = np.array([0.0, 1.0, 3.0, 10.0], np.float32)
    powers = 2 ** jnp.arange(2)
    v = lambda masks: jnp.asarray(table)[(masks * powers).sum(-1)]
    phi, stderr, _, _ = permutation_shapley(jax.random.key(1), v, 2, 4)
    np.testing.assert_allclose(phi, [(1 + 7) / 2, (3 + 9) / 2], rtol=1e-6)
    np.testing.assert_allclose(stderr, [0.0, 0.0], atol=1e-6)


def test_all_masks_enumerates_every_subset_once():
    from jaxshap.coalitions import all_masks, shapley_weights

    masks = np.asarray(all_masks(4))
    as_sets = {frozenset(np.flatnonzero(m)) for m in masks}
    assert len(as_sets) == 16 and as_sets == {frozenset(s) for r in range(5) for s in itertools.combinations(range(4), r)}
    w = shapley_weights(4)
    # sum over subsets not containing j of w(|S|) is 1
    assert abs(sum(w[s] * len(list(itertools.combinations(range(3), s))) for s in range(4)) - 1) < 1e-12
