"""CoalitionExplainer: exact Winter values over a named, nested hierarchy (shap's ``partition_tree``).

Checked against a brute-force oracle written from the definition (the mean marginal contribution
over every order consistent with the hierarchy: each group's members contiguous, recursively),
the axioms (efficiency, symmetry within a group, null player), Shapley values for a flat tree,
Owen values for a binary one, and shap's ``CoalitionExplainer`` where shap's runs.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from oracle import interventional_game, shapley_from_game, tabulated_game

M = 6
RNG = np.random.default_rng(11)
W1 = RNG.normal(size=(7, 5))
W2 = RNG.normal(size=5)
BG = RNG.normal(size=(6, 7))
XS = RNG.normal(size=(2, 7))


def model_np(X):
    X = np.asarray(X, np.float64)
    return np.tanh(X @ W1[: X.shape[1]]) @ W2 + X[:, 0] * X[:, 1] * X[:, 2] + np.sin(X[:, -1] * X[:, 3])


def model_jax(X):
    return jnp.tanh(X @ jnp.asarray(W1[: X.shape[1]], X.dtype)) @ jnp.asarray(W2, X.dtype) + X[:, 0] * X[:, 1] * X[:, 2] \
        + jnp.sin(X[:, -1] * X[:, 3])


# --- the oracle -----------------------------------------------------------------------------------
def consistent_orders(node):
    """Every order of the leaves of ``node`` (nested lists of ints) in which each group is contiguous."""
    if not isinstance(node, (list, tuple)):
        yield (node,)
        return
    for arrangement in itertools.permutations(node):
        for parts in itertools.product(*(list(consistent_orders(child)) for child in arrangement)):
            yield tuple(j for part in parts for j in part)


def winter_oracle(value, hierarchy, m):
    """Mean marginal contribution over the hierarchy-consistent orders, in float64."""
    cache = {}

    def v(s):
        if s not in cache:
            cache[s] = np.asarray(value(s), np.float64)
        return cache[s]

    total, count = 0.0, 0
    for order in consistent_orders(hierarchy):
        phi = [None] * m
        before = frozenset()
        for j in order:
            phi[j] = v(before | {j}) - v(before)
            before = before | {j}
        total, count = total + np.stack(phi), count + 1
    return total / count


def random_hierarchy(rng, features, depth):
    """Nested lists over ``features``: 2-3 groups per level down to ``depth`` levels."""
    features = list(features)
    if depth == 1 or len(features) <= 2:
        return features
    k = int(rng.integers(2, min(3, len(features)) + 1))
    cuts = np.sort(rng.choice(np.arange(1, len(features)), size=k - 1, replace=False))
    groups = np.split(np.array(features)[rng.permutation(len(features))], cuts)
    out = []
    for g in groups:
        g = [int(j) for j in g]
        out.append(g[0] if len(g) == 1 else random_hierarchy(rng, g, depth - 1))
    return out


def named(node, names, counter=None):
    """The same hierarchy as shap's nested dict of group names: a group of features is a list of
    their names, a group with subgroups a dict, a feature beside subgroups ``{"x": "x"}``."""
    counter = counter if counter is not None else itertools.count()
    if all(not isinstance(c, list) for c in node):
        return [names[c] for c in node]
    out = {}
    for c in node:
        if isinstance(c, list):
            out[f"group{next(counter)}"] = named(c, names, counter)
        else:
            out[names[c]] = names[c]
    return out


# --- against the oracle --------------------------------------------------------------------------
def test_winter_values_estimator_matches_the_oracle_on_random_games():
    rng = np.random.default_rng(0)
    for trial in range(12):
        m = int(rng.integers(2, 8))
        hierarchy = random_hierarchy(rng, range(m), int(rng.integers(2, 4)))
        table = rng.normal(size=(2**m, 2))
        game = tabulated_game(table)
        codes = 1 << np.arange(m)
        phi, v0, v1 = jaxshap.estimators.winter_values(lambda masks: table[np.asarray(masks) @ codes], hierarchy)
        want = winter_oracle(game, hierarchy, m)
        np.testing.assert_allclose(np.asarray(phi), want, atol=1e-5, err_msg=str(hierarchy))
        np.testing.assert_allclose(np.asarray(phi).sum(0), table[-1] - table[0], atol=1e-5)  # efficiency
        np.testing.assert_allclose(np.asarray(v0), table[0], atol=1e-6)
        np.testing.assert_allclose(np.asarray(v1), table[-1], atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_explainer_matches_the_oracle_on_random_nested_trees(seed):
    rng = np.random.default_rng(100 + seed)
    m = (5, 6, 7)[seed]
    hierarchy = random_hierarchy(rng, range(m), 3)
    names = [f"x{j}" for j in range(m)]
    tree = named(hierarchy, names)
    tree = tree if isinstance(tree, dict) else {"all": tree}
    bg, X = BG[:, :m].astype(np.float32), XS[:, :m].astype(np.float32)
    ex = jaxshap.CoalitionExplainer(model_jax, bg, partition_tree=tree, feature_names=names)
    expl = ex(X)
    want = np.stack([winter_oracle(interventional_game(model_np, x, bg), hierarchy, m) for x in X])
    np.testing.assert_allclose(np.asarray(expl.values), want, atol=2e-5, err_msg=str(tree))
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), model_np(X), atol=2e-5)
    assert expl.feature_names == names and expl.stderr is None
    assert ex.hierarchy == jaxshap._coalitions._nested.read_partition_tree(tree, m, names)


def test_host_model_multi_output_and_dataframe_names():
    pd = pytest.importorskip("pandas")
    names = ["age", "sex", "bmi", "bp", "s1", "s2"]
    bg = pd.DataFrame(BG[:, :M], columns=names)
    X = pd.DataFrame(XS[:, :M], columns=names)
    two = lambda Z: np.stack([model_np(Z), np.tanh(np.asarray(Z)).sum(1)], 1)
    tree = {"Person": {"age": "age", "sex": "sex"}, "Health": ["bmi", {"Blood": ["bp", "s1"]}, "s2"]}
    ex = jaxshap.CoalitionExplainer(two, bg, partition_tree=tree)
    expl = ex(X)
    hierarchy = [[0, 1], [2, [3, 4], 5]]
    want = np.stack([winter_oracle(interventional_game(two, x, BG[:, :M]), hierarchy, M) for x in XS[:, :M]])
    assert expl.values.shape == (2, M, 2) and expl.output_names == ["Output 0", "Output 1"]
    np.testing.assert_allclose(np.asarray(expl.values), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), two(X), atol=1e-6)
    np.testing.assert_allclose(ex.expected_value, np.asarray(expl.base_values)[0])
    np.testing.assert_allclose(ex.shap_values(X, max_evals=10), np.asarray(expl.values))  # max_evals: ignored, as shap
    assert ex.partition_tree is tree and expl.feature_names == names


# --- axioms and special cases --------------------------------------------------------------------
def test_flat_trees_give_the_exact_shapley_values():
    bg, X = BG[:, :M].astype(np.float32), XS[:, :M].astype(np.float32)
    names = [f"f{j}" for j in range(M)]
    shapley = np.asarray(jaxshap.ExactExplainer(model_jax, bg, feature_names=names)(X).values)
    singletons = {n: n for n in names}  # one level of single features (shap's example "hierarchy_flat")
    for tree in (singletons, names):
        ours = jaxshap.CoalitionExplainer(model_jax, bg, partition_tree=tree, feature_names=names)(X)
        np.testing.assert_allclose(np.asarray(ours.values), shapley, atol=2e-5, err_msg=str(tree))


def test_one_group_per_feature_gives_the_shapley_values():
    table = np.random.default_rng(3).normal(size=2**M)
    want = shapley_from_game(tabulated_game(table), M)
    codes = 1 << np.arange(M)
    trees = ([[j] for j in range(M)], [[[j]] for j in range(M)], [[[j] for j in range(M)]], [[j for j in range(M)]])
    for tree in trees:  # groups of one, chains of only children, one group of everything
        phi, _, _ = jaxshap.estimators.winter_values(lambda masks: table[np.asarray(masks) @ codes], tree)
        np.testing.assert_allclose(np.asarray(phi), want, atol=1e-5, err_msg=str(tree))


def test_a_binary_tree_gives_partitions_owen_values():
    bg, X = BG[:, :M].astype(np.float32), XS[:, :M].astype(np.float32)
    masker = jaxshap.maskers.Partition(bg)
    Z = masker.clustering
    nodes = [j for j in range(M)]
    for a, b in Z[:, :2].astype(int):
        nodes.append([nodes[a], nodes[b]])
    owen = np.asarray(jaxshap.PartitionExplainer(model_jax, masker)(X).values)
    ours = jaxshap.CoalitionExplainer(model_jax, masker, partition_tree=nodes[-1])(X)  # the masker's rows, its tree replaced
    np.testing.assert_allclose(np.asarray(ours.values), owen, atol=2e-5)


def test_symmetry_within_a_group_and_the_null_player():
    # the model is symmetric in features 0 and 1 and ignores feature 4; the background is
    # symmetric under swapping columns 0 and 1, and x has x_0 = x_1
    f = lambda Z: jnp.tanh(Z[:, 0] + Z[:, 1]) * Z[:, 2] + Z[:, 0] * Z[:, 1] * Z[:, 3] + Z[:, 5] ** 2
    bg = BG[:, :M].astype(np.float32)
    bg = np.concatenate([bg, bg[:, [1, 0, 2, 3, 4, 5]]])
    x = XS[:1, :M].astype(np.float32).copy()
    x[0, 1] = x[0, 0]
    tree = {"A": [0, 1, 2], "B": {"C": [3, 4], "D": [5]}}
    expl = jaxshap.CoalitionExplainer(f, bg, partition_tree=tree)(x)
    phi = np.asarray(expl.values)[0]
    assert abs(phi[0] - phi[1]) < 1e-5 and abs(phi[0]) > 1e-3
    assert abs(phi[4]) < 1e-6
    np.testing.assert_allclose(phi.sum() + float(expl.base_values[0]), np.asarray(f(x))[0], atol=2e-5)


def test_shap_names_and_the_registry():
    bg, X = BG[:, :4].astype(np.float32), XS[:, :4].astype(np.float32)
    tree = {"a": [0, 1], "b": [2, 3]}
    assert jaxshap.explainers.Coalition is jaxshap.CoalitionExplainer
    auto = jaxshap.Explainer(model_jax, bg, algorithm="coalition", partition_tree=tree)
    assert isinstance(auto, jaxshap.CoalitionExplainer) and isinstance(auto, jaxshap.Explainer)
    direct = jaxshap.CoalitionExplainer(model_jax, masker=bg, partition_tree=tree)
    np.testing.assert_allclose(np.asarray(auto(X).values), np.asarray(direct(X).values), atol=1e-6)
    assert direct.shap_values(X[0]).shape == (4,)


def test_grad_through_the_explainer():
    bg, X = BG[:, :4].astype(np.float32), XS[:, :4].astype(np.float32)
    tree = {"a": [0, 1], "b": [2, 3]}

    def loss(scale):
        ex = jaxshap.CoalitionExplainer(lambda Z: scale * model_jax(Z), bg, partition_tree=tree)
        return ex(X).values.sum()

    g = jax.grad(loss)(1.0)  # the values are linear in the output scale: d/ds sum(phi) = sum(phi at s=1)
    np.testing.assert_allclose(float(g), float(loss(1.0)), rtol=1e-5)


# --- errors ----------------------------------------------------------------------------------------
def test_bad_partition_trees_name_the_argument():
    bg = BG[:, :4].astype(np.float32)
    names = ["a", "b", "c", "d"]
    make = lambda tree: jaxshap.CoalitionExplainer(model_jax, bg, partition_tree=tree, feature_names=names)
    with pytest.raises(ValueError, match=r"`partition_tree` leaves out 1 of the 4 features: 'd'"):
        make({"G": ["a", "b"], "H": ["c"]})
    with pytest.raises(ValueError, match=r"`partition_tree` names features that are not among .*'e'"):
        make({"G": ["a", "b"], "H": ["c", "d", "e"]})
    with pytest.raises(ValueError, match=r"`partition_tree` holds feature 'a' more than once"):
        make({"G": ["a", "b"], "H": ["c", "d", "a"]})
    with pytest.raises(ValueError, match=r"`partition_tree` group 'H' is empty"):
        make({"G": ["a", "b", "c", "d"], "H": []})
    with pytest.raises(ValueError, match=r"`partition_tree` entry 'G': 'a'"):
        make({"G": "a", "H": ["b", "c", "d"]})
    with pytest.raises(ValueError, match=r"`partition_tree` holds column position 7"):
        make([[0, 1], [2, 7]])
    with pytest.raises(ValueError, match="`partition_tree` is required"):
        jaxshap.CoalitionExplainer(model_jax, bg)
    with pytest.raises(TypeError, match="`partition_tree` must be a nested dict"):
        make("a")
    with pytest.raises(ValueError, match=r"`partition_tree` need 2,097,152 coalitions per row"):
        jaxshap.CoalitionExplainer(lambda Z: Z.sum(1), np.zeros((1, 21), np.float32), partition_tree=list(range(21)))
    with pytest.raises(ValueError, match="PartitionExplainer.*CoalitionExplainer"):
        jaxshap.PartitionExplainer(model_jax, bg, partition_tree={"G": names})


# --- shap's CoalitionExplainer -------------------------------------------------------------------------
def test_matches_shaps_coalition_explainer():
    shap = pytest.importorskip("shap")
    pd = pytest.importorskip("pandas")
    if not hasattr(shap, "CoalitionExplainer"):
        pytest.skip(f"shap {shap.__version__} has no CoalitionExplainer")
    names = ["age", "sex", "bmi", "bp", "s1", "s2"]
    bg, X = pd.DataFrame(BG[:, :M], columns=names), pd.DataFrame(XS[:, :M], columns=names)
    tree = {"Person": {"age": "age", "sex": "sex"}, "Health": ["bmi", {"Blood": ["bp", "s1"]}, "s2"]}
    two = lambda Z: np.stack([model_np(Z), np.tanh(np.asarray(Z)).sum(1)], 1)
    want = shap.CoalitionExplainer(two, shap.maskers.Partition(bg), partition_tree=tree)(X)
    ours = jaxshap.CoalitionExplainer(two, jaxshap.maskers.Partition(bg), partition_tree=tree)(X)
    np.testing.assert_allclose(np.asarray(ours.values), want.values, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ours.base_values), want.base_values, atol=1e-6)
    assert list(want.feature_names) == list(ours.feature_names)
    try:  # one output: shap before 0.54 calls float() on a [1] array, which NumPy 2 refuses
        want = shap.CoalitionExplainer(model_np, shap.maskers.Partition(bg), partition_tree=tree)(X)
    except TypeError as err:
        pytest.skip(f"shap {shap.__version__}'s CoalitionExplainer fails on one output here: {err}")
    ours = jaxshap.CoalitionExplainer(model_np, jaxshap.maskers.Partition(bg), partition_tree=tree)(X)
    np.testing.assert_allclose(np.asarray(ours.values), want.values, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ours.base_values), want.base_values, atol=1e-6)
