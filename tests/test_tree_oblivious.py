"""Oblivious trees read by leaf index (``jaxshap._tree._oblivious``): the tables equal the
path-dependent game's Shapley values by brute force (``tests/oracle.py``), with features split
on at several levels, missing values, several outputs and ordinary trees beside them; deep
trees wait for a call with as many rows as leaves; trees needing too many branch choices stay
with the path kernel."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import path_dependent_shapley

import jaxshap
from jaxshap._explainers._tree_build import EAGER_LEAVES
from jaxshap._tree._ensemble import make_tree, stack_trees
from jaxshap._tree._oblivious import MAX_BRANCHES, n_branches, oblivious_trees


def _oblivious(rng, features, k):
    """An oblivious tree in heap layout: level ``j`` splits on ``features[j]`` at one threshold
    (NaN to a random side), with positive leaf covers and ``k`` outputs."""
    d = len(features)
    inner = 2**d - 1
    level = np.repeat(np.arange(d), 2 ** np.arange(d))
    thr = rng.normal(size=d) * 0.7
    nan_left = rng.random(d) < 0.5
    left = np.concatenate([2 * np.arange(inner) + 1, np.full(inner + 1, -1)])
    right = np.where(left >= 0, left + 1, -1)
    weights = rng.integers(1, 6, 2**d).astype(float)
    cover = np.concatenate([weights.reshape(2**j, -1).sum(1) for j in range(d + 1)])
    value = np.concatenate([np.zeros((inner, k)), rng.normal(size=(2**d, k))])
    pad = np.zeros(inner + 1)
    return make_tree(np.concatenate([np.asarray(features)[level], pad - 1]), np.concatenate([thr[level], pad]),
                     left, right, np.concatenate([nan_left[level], pad > 0]), value, cover)


def _irregular(rng, k):
    """An ordinary tree (not oblivious): the root's children split on different features."""
    left, right = [1, 3, -1, 5, -1, -1, -1], [2, 4, -1, 6, -1, -1, -1]
    cover = [10.0, 6.0, 4.0, 4.0, 2.0, 1.0, 3.0]
    value = np.zeros((7, k))
    value[[2, 4, 5, 6]] = rng.normal(size=(4, k))
    return make_tree([0, 1, -1, 2, -1, -1, -1], [0.1, -0.3, 0, 0.4, 0, 0, 0], left, right, [True, False] * 3 + [True],
                     value, cover)


def _ensemble(trees, m, k):
    return stack_trees(trees, np.linspace(-0.5, 0.5, k), m, "test", precision=np.float64)


def _rows(rng, n, m):
    X = rng.normal(size=(n, m))
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


def _kinds(ex, n_rows=0):
    build = ex._builder.build(ex.ensemble.default_rounds, False, n_rows)
    return {name for g in build.groups for name in g["blocks"] if name in ("A1", "table")}


def _check(e, X, values):
    for i, x in enumerate(X):
        phi, base = path_dependent_shapley(e, x)
        np.testing.assert_allclose(values[i].reshape(phi.shape), phi, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("depth", [1, 2, 4, 7])
def test_tables_equal_brute_force(depth):
    rng = np.random.default_rng(depth)
    m, k = 4, 2
    trees = [_oblivious(rng, rng.integers(0, m, depth), k) for _ in range(5)]
    trees.append(_oblivious(rng, [2] * depth, k))  # one feature on every level
    trees.append(_irregular(rng, k))
    e = _ensemble(trees, m, k)
    ex = jaxshap.TreeExplainer(e)
    assert _kinds(ex) == {"A1", "table"}  # the ordinary tree stays a set of paths
    assert [o.tree.tolist() for o in oblivious_trees(e)] == [list(range(6))]
    X = _rows(rng, 6, m)
    expl = ex(X)
    _check(e, X, np.asarray(expl.values, np.float64))
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), e.predict(X), atol=1e-12)


def test_deep_trees_wait_for_a_call_of_as_many_rows():
    rng = np.random.default_rng(0)
    m, depth = 3, 9
    assert 2**depth > EAGER_LEAVES
    e = _ensemble([_oblivious(rng, rng.integers(0, m, depth), 1) for _ in range(2)], m, 1)
    ex = jaxshap.TreeExplainer(e)
    X = _rows(rng, 2**depth, m)
    small = np.asarray(ex(X[:5]).values, np.float64)
    assert _kinds(ex) == {"A1"}
    large = np.asarray(ex(X).values, np.float64)
    assert _kinds(ex) == {"table"}
    np.testing.assert_allclose(large[:5], small, rtol=1e-10, atol=1e-12)
    _check(e, X[:3], large)


def test_trees_needing_many_branch_choices_stay_paths():
    rng = np.random.default_rng(1)
    features = [0, 0, 1, 1, 2, 2, 3, 3]  # four features on two levels each: 16 branch choices
    assert n_branches(np.asarray([features]))[0] > MAX_BRANCHES
    e = _ensemble([_oblivious(rng, features, 1), _oblivious(rng, [0, 1, 2], 1)], 4, 1)
    ex = jaxshap.TreeExplainer(e)
    assert _kinds(ex) == {"A1", "table"}
    X = _rows(rng, 3, 4)
    _check(e, X, np.asarray(ex(X).values, np.float64))
