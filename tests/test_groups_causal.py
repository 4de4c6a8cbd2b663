"""Groups as players, causal Shapley values (Heskes et al., 2020) and asymmetric Shapley values
(Frye et al., 2020): NumPy oracles written from the definitions."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from oracle import interventional_game, shapley_from_game

import jaxshap
from jaxshap import maskers

RNG = np.random.default_rng(0)
BACKGROUND = RNG.normal(size=(12, 5))
ROWS = RNG.normal(size=(3, 5))
NAMES = ["age", "sex", "bmi", "bp", "s1"]
GROUPS = [["age", "sex"], ["bmi"], ["bp", "s1"]]
GROUP_IDX = [[0, 1], [2], [3, 4]]


def nonlinear_np(x):
    return x[:, 0] * x[:, 1] + np.sin(x[:, 2]) * x[:, 3] + 0.5 * x[:, 4] ** 2 - x[:, 1] * x[:, 4]


def nonlinear(x):
    return x[:, 0] * x[:, 1] + jnp.sin(x[:, 2]) * x[:, 3] + 0.5 * x[:, 4] ** 2 - x[:, 1] * x[:, 4]


def group_game(value, groups):
    """The game of the groups: a coalition of groups is the union of their columns."""
    return lambda t: value(frozenset(j for g in t for j in groups[g]))


def asymmetric_oracle(value, components, n):
    """Mean marginal contributions over every order consistent with the chain (enumerated)."""
    comp_of = {j: k for k, comp in enumerate(components) for j in comp}
    total, count = np.zeros(n), 0
    for order in itertools.permutations(range(n)):
        if any(comp_of[order[a]] > comp_of[order[a + 1]] for a in range(n - 1)):
            continue
        count += 1
        before = frozenset()
        for j in order:
            total[j] += value(before | {j}) - value(before)
            before = before | {j}
    assert count == math.prod(math.factorial(len(c)) for c in components)
    return total / count


def check_efficiency(expl, f_x, atol=2e-4):
    np.testing.assert_allclose(expl.values.sum(axis=1) + expl.base_values, f_x, atol=atol)


# --- groups -------------------------------------------------------------------------------------
def group_oracle(rows=ROWS, groups=GROUP_IDX):
    return np.stack([
        shapley_from_game(group_game(interventional_game(nonlinear_np, x, BACKGROUND), groups), len(groups)) for x in rows
    ])


@pytest.mark.parametrize("cls", [jaxshap.ExactExplainer, jaxshap.PermutationExplainer, jaxshap.KernelExplainer])
def test_group_shapley_values_match_the_group_game(cls):
    df = pd.DataFrame(BACKGROUND, columns=NAMES)
    extra = {"n_permutations": 64} if cls is jaxshap.PermutationExplainer else {}
    ex = cls(nonlinear, df, groups=GROUPS, **extra)
    expl = ex(pd.DataFrame(ROWS, columns=NAMES))
    assert expl.values.shape == (3, 3)
    assert list(expl.feature_names) == ["age + sex", "bmi", "bp + s1"]
    assert expl.data is None
    # three groups: 3! orders and 2**3 - 2 coalitions, so every estimator is exact here
    np.testing.assert_allclose(expl.values, group_oracle(), atol=2e-4)
    check_efficiency(expl, nonlinear_np(ROWS))
    np.testing.assert_allclose(ex.expected_value, nonlinear_np(BACKGROUND).mean(), atol=1e-5)


def test_groups_by_index_dict_and_feature_names():
    expl = jaxshap.ExactExplainer(nonlinear, BACKGROUND, groups={"demo": [0, 1], "bmi": [2], "rest": [3, 4]})(ROWS)
    assert list(expl.feature_names) == ["demo", "bmi", "rest"]
    np.testing.assert_allclose(expl.values, group_oracle(), atol=2e-4)
    # names of the columns through feature_names= (array background)
    expl = jaxshap.ExactExplainer(nonlinear, BACKGROUND, feature_names=NAMES, groups=GROUPS)(ROWS)
    assert list(expl.feature_names) == ["age + sex", "bmi", "bp + s1"]
    np.testing.assert_allclose(expl.values, group_oracle(), atol=2e-4)


def test_groups_with_the_gaussian_masker_and_auto_explainer():
    g = maskers.Gaussian.fit(BACKGROUND)
    grouped = maskers.Grouped(g, GROUP_IDX)
    single = jaxshap.ExactExplainer(nonlinear, g)
    ex = jaxshap.Explainer(nonlinear, g, groups=GROUP_IDX)
    assert isinstance(ex, jaxshap.ExactExplainer) and ex.n_features == 3
    expl = ex(ROWS)
    check_efficiency(expl, nonlinear_np(ROWS))
    # oracle: the Gaussian masker's own coalition values, combined over group coalitions
    for x, phi in zip(ROWS, np.asarray(expl.values)):
        def value(s, x=x):
            mask = np.zeros((1, 5), bool)
            mask[0, list(s)] = True
            model = lambda z: nonlinear(z.reshape(-1, 5)).reshape(z.shape[:-1] + (1,))
            return float(g.coalition_values(model, jnp.asarray(x, g.dtype), mask)[0, 0])
        np.testing.assert_allclose(phi, shapley_from_game(group_game(value, GROUP_IDX), 3), atol=2e-4)
    assert grouped.n_features == 3 and grouped.n_columns == 5
    assert single.n_features == 5


def test_singleton_groups_are_the_shapley_values():
    a = jaxshap.ExactExplainer(nonlinear, BACKGROUND, groups=[[j] for j in range(5)])(ROWS)
    b = jaxshap.ExactExplainer(nonlinear, BACKGROUND)(ROWS)
    np.testing.assert_allclose(a.values, b.values, atol=1e-5)


@pytest.mark.parametrize(
    "groups, match",
    [
        ([[0, 1], [1, 2], [3, 4]], "twice"),
        ([[0, 1], [2], [3]], "leaves out"),
        ([[0, 1], [], [2, 3, 4]], "empty"),
        ([["age", "nope"], [2, 3, 4]], "not a feature"),
        ([[0, 7], [1, 2, 3, 4]], "outside"),
    ],
)
def test_bad_groups_raise(groups, match):
    with pytest.raises(ValueError, match=match):
        jaxshap.ExactExplainer(nonlinear, pd.DataFrame(BACKGROUND, columns=NAMES), groups=groups)


def test_partition_masker_refuses_groups():
    with pytest.raises(ValueError, match="Owen"):
        jaxshap.ExactExplainer(nonlinear, maskers.Partition(BACKGROUND), groups=GROUP_IDX)
    with pytest.raises(ValueError, match="Owen"):
        maskers.Grouped(maskers.Partition(BACKGROUND), GROUP_IDX)


# --- asymmetric Shapley values -----------------------------------------------------------------
ORDERING = [[2], [0, 4], [1, 3]]


def test_asymmetric_values_enumerate_the_consistent_orders():
    expl = jaxshap.ExactExplainer(nonlinear, BACKGROUND, causal_ordering=ORDERING, asymmetric=True)(ROWS)
    for x, phi in zip(ROWS, np.asarray(expl.values)):
        oracle = asymmetric_oracle(interventional_game(nonlinear_np, x, BACKGROUND), ORDERING, 5)
        np.testing.assert_allclose(phi, oracle, atol=2e-4)
    check_efficiency(expl, nonlinear_np(ROWS))
    masker = maskers.Asymmetric(maskers.Independent(BACKGROUND), ORDERING)
    assert masker.exact_coalition_count() == 1 + 1 + 3 + 3


def test_asymmetric_over_groups_and_one_component():
    ex = jaxshap.ExactExplainer(nonlinear, pd.DataFrame(BACKGROUND, columns=NAMES), groups=GROUPS,
                                causal_ordering=[["bmi"], ["age + sex", "bp + s1"]], asymmetric=True)
    expl = ex(ROWS)
    for x, phi in zip(ROWS, np.asarray(expl.values)):
        game = group_game(interventional_game(nonlinear_np, x, BACKGROUND), GROUP_IDX)
        np.testing.assert_allclose(phi, asymmetric_oracle(game, [[1], [0, 2]], 3), atol=2e-4)
    # one component: the Shapley values
    one = jaxshap.ExactExplainer(nonlinear, BACKGROUND, causal_ordering=[list(range(5))], asymmetric=True)(ROWS)
    np.testing.assert_allclose(one.values, jaxshap.ExactExplainer(nonlinear, BACKGROUND)(ROWS).values, atol=1e-5)


def test_asymmetric_permutation_walks_consistent_orders():
    kwargs = {"causal_ordering": ORDERING, "asymmetric": True}
    exact = jaxshap.ExactExplainer(nonlinear, BACKGROUND, **kwargs)(ROWS)
    perm = jaxshap.PermutationExplainer(nonlinear, BACKGROUND, n_permutations=200, **kwargs)(ROWS)
    assert (np.abs(perm.values - exact.values) <= 5 * perm.stderr + 1e-4).all()
    check_efficiency(perm, nonlinear_np(ROWS))
    # feature 2 is the first component alone: every consistent order starts with it, so its value is exact
    np.testing.assert_allclose(perm.values[:, 2], exact.values[:, 2], atol=2e-4)
    # the partner of a consistent order reverses each component in place: consistent too
    masker = maskers.Asymmetric(maskers.Independent(BACKGROUND), ORDERING)
    ranks = np.asarray(masker.sample_order_ranks(jax.random.key(0), 50))
    partner = np.asarray(masker.antithetic_ranks(jnp.asarray(ranks)))
    for r in (ranks, partner):
        assert (r[:, 2] == 0).all() and (np.sort(r[:, [0, 4]], 1) == [1, 2]).all() and (np.sort(r[:, [1, 3]], 1) == [3, 4]).all()
    assert (partner[:, [0, 4]] == 3 - ranks[:, [0, 4]]).all()
    # components of at most two features: a feature's contribution depends only on its place in its
    # own component, which the partner swaps, so every pair averages to the exact values
    pairs = [[0, 1], [2], [3, 4]]
    two = jaxshap.PermutationExplainer(nonlinear, BACKGROUND, n_permutations=4, causal_ordering=pairs, asymmetric=True)(ROWS)
    for x, phi in zip(ROWS, np.asarray(two.values)):
        np.testing.assert_allclose(phi, asymmetric_oracle(interventional_game(nonlinear_np, x, BACKGROUND), pairs, 5), atol=2e-4)


def test_asymmetric_refused_by_kernel():
    with pytest.raises(ValueError, match="asymmetric Shapley"):
        jaxshap.KernelExplainer(nonlinear, BACKGROUND, causal_ordering=ORDERING, asymmetric=True)
    ex = jaxshap.Explainer(nonlinear, BACKGROUND, causal_ordering=ORDERING, asymmetric=True)
    assert isinstance(ex, jaxshap.ExactExplainer)


# --- causal Shapley values ---------------------------------------------------------------------
# A linear SEM with a latent confounder U of X1 and X2 (sources s = [U, e0, e1, e2, e3]):
#   X0 = e0,  X1 = 0.8 X0 + 0.9 U + e1,  X2 = 0.5 X0 + 0.7 U + e2,  X3 = 0.6 X2 - 0.4 X1 + e3.
MU = np.array([1.0, -0.5, 0.3, 2.0])
SCALE = np.array([1.0, 1.0, 0.6, 0.8, 0.5])  # standard deviations of the sources


def sem(sources, do=None):
    """Rows of X from the sources ``[n, 5]``; ``do`` = {feature: value} sets features (intervention)."""
    do = do or {}
    u, e = sources[:, 0], sources[:, 1:]
    x = np.zeros((sources.shape[0], 4))

    def put(j, value):
        x[:, j] = do.get(j, value)

    put(0, MU[0] + e[:, 0])
    put(1, MU[1] + 0.8 * (x[:, 0] - MU[0]) + 0.9 * u + e[:, 1])
    put(2, MU[2] + 0.5 * (x[:, 0] - MU[0]) + 0.7 * u + e[:, 2])
    put(3, MU[3] + 0.6 * (x[:, 2] - MU[2]) - 0.4 * (x[:, 1] - MU[1]) + e[:, 3])
    return x


def _linear_cov(basis):
    w = sem(basis) - sem(np.zeros((1, 5)))  # the linear map from sources to X, row by source
    return w.T @ w


COV = _linear_cov(np.diag(SCALE))
GAUSS = maskers.Gaussian(MU, COV)
BETA = np.array([1.5, -2.0, 0.7, 1.2])
ROWS4 = RNG.normal(size=(3, 4)) + MU
CHAIN = [[0], [1, 2], [3]]


def linear_np(x):
    return x @ BETA + 0.3


def linear(x):
    return x @ jnp.asarray(BETA, x.dtype) + 0.3


def sem_do_mean(x, s):
    """E[X | do(X_S = x_S)] from the structural equations (linear: propagate the means)."""
    return sem(np.zeros((1, 5)), {j: x[j] for j in s})[0]


def chain_mean(x, s, components, confounding):
    """E[X | do(X_S = x_S)] by Heskes et al.'s chain rule, with Gaussian conditional means (NumPy)."""
    m = np.array(MU)
    before: list[int] = []
    for comp, confounded in zip(components, confounding):
        fixed = [j for j in comp if j in s]
        given = before + ([] if confounded else fixed)
        rest = [j for j in comp if j not in s]
        m[fixed] = x[fixed]
        if rest and given:
            reg = np.linalg.solve(COV[np.ix_(given, given)], COV[np.ix_(given, rest)]).T
            m[rest] = MU[rest] + reg @ (m[given] - MU[given])
        before += list(comp)
    return m


def test_sem_covariance_is_the_masker_s():
    sources = np.random.default_rng(1).normal(size=(200_000, 5)) * SCALE
    np.testing.assert_allclose(np.cov(sem(sources), rowvar=False), COV, atol=0.03)


@pytest.mark.parametrize("confounding", [[False, True, False], [False, False, False]])
def test_causal_values_of_a_linear_model_match_the_closed_form(confounding):
    ex = jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=CHAIN, confounding=confounding)
    expl = ex(ROWS4)
    for x, phi in zip(ROWS4, np.asarray(expl.values)):
        game = lambda s, x=x: linear_np(chain_mean(x, s, CHAIN, confounding)[None])[0]
        np.testing.assert_allclose(phi, shapley_from_game(game, 4), atol=5e-4)
        if confounding[1]:  # the confounded component is what the SEM's intervention gives
            sem_game = lambda s, x=x: linear_np(sem_do_mean(x, s)[None])[0]
            np.testing.assert_allclose(phi, shapley_from_game(sem_game, 4), atol=5e-4)
    check_efficiency(expl, linear_np(ROWS4), atol=5e-4)


def test_causal_values_of_a_nonlinear_model_match_the_sem_by_monte_carlo():
    def f_np(x):
        return x[:, 0] * x[:, 1] + np.sin(x[:, 2]) + 0.3 * x[:, 3] ** 2

    def f(x):
        return x[:, 0] * x[:, 1] + jnp.sin(x[:, 2]) + 0.3 * x[:, 3] ** 2

    masker = maskers.Causal(GAUSS, CHAIN, confounding=[False, True, False], n_samples=20_000)
    expl = jaxshap.ExactExplainer(f, masker)(ROWS4[:2])
    sources = np.random.default_rng(2).normal(size=(100_000, 5)) * SCALE
    for x, phi in zip(ROWS4[:2], np.asarray(expl.values)):
        game = lambda s, x=x: f_np(sem(sources, {j: x[j] for j in s})).mean()
        np.testing.assert_allclose(phi, shapley_from_game(game, 4), atol=0.06)
    check_efficiency(expl, f_np(ROWS4[:2]), atol=5e-4)


def test_one_component_without_confounding_is_the_conditional_values():
    causal = jaxshap.ExactExplainer(linear, GAUSS, confounding=False)(ROWS4)  # causal_ordering: one component
    conditional = jaxshap.ExactExplainer(linear, GAUSS)(ROWS4)
    np.testing.assert_allclose(causal.values, conditional.values, atol=5e-4)
    # a nonlinear model: equal to Monte-Carlo tolerance
    f = lambda x: jnp.tanh(x[:, 0] * x[:, 3]) + x[:, 1] * x[:, 2]
    causal = jaxshap.ExactExplainer(f, maskers.Causal(GAUSS, [[0, 1, 2, 3]], n_samples=8192))(ROWS4)
    conditional = jaxshap.ExactExplainer(f, GAUSS)(ROWS4)
    np.testing.assert_allclose(causal.values, conditional.values, atol=0.05)


def test_one_confounded_component_is_the_marginal_values():
    causal = jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=[[0, 1, 2, 3]], confounding=True)(ROWS4)
    marginal = jaxshap.ExactExplainer(linear, {"mean": MU})(ROWS4)  # v(S) = f(x_S, mu_-S)
    np.testing.assert_allclose(causal.values, marginal.values, atol=5e-4)


def test_singleton_components_ignore_confounding():
    f = lambda x: jnp.tanh(x[:, 0] * x[:, 3]) + x[:, 1] * x[:, 2]
    order = [[2], [0], [3], [1]]
    a = jaxshap.ExactExplainer(f, maskers.Causal(GAUSS, order, confounding=True, n_samples=256))(ROWS4)
    b = jaxshap.ExactExplainer(f, maskers.Causal(GAUSS, order, confounding=False, n_samples=256))(ROWS4)
    np.testing.assert_allclose(a.values, b.values, atol=1e-6)


def test_causal_values_with_permutation_and_kernel_match_exact():
    kwargs = {"causal_ordering": CHAIN, "confounding": [False, True, False]}
    exact = jaxshap.ExactExplainer(linear, GAUSS, **kwargs)(ROWS4)
    kernel = jaxshap.KernelExplainer(linear, GAUSS, **kwargs)(ROWS4)  # 2**4 - 2 coalitions: enumerated
    np.testing.assert_allclose(kernel.values, exact.values, atol=5e-4)
    perm = jaxshap.PermutationExplainer(linear, GAUSS, n_permutations=96, **kwargs)(ROWS4)
    assert (np.abs(perm.values - exact.values) <= 5 * perm.stderr + 1e-3).all()
    check_efficiency(perm, linear_np(ROWS4), atol=5e-4)


def test_asymmetric_causal_values_enumerate_the_consistent_orders():
    confounding = [False, True, False]
    expl = jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=CHAIN, confounding=confounding, asymmetric=True)(ROWS4)
    for x, phi in zip(ROWS4, np.asarray(expl.values)):
        game = lambda s, x=x: linear_np(chain_mean(x, s, CHAIN, confounding)[None])[0]
        np.testing.assert_allclose(phi, asymmetric_oracle(game, CHAIN, 4), atol=5e-4)
    check_efficiency(expl, linear_np(ROWS4), atol=5e-4)


def test_causal_groups():
    # groups as players, the causal ordering over the groups
    groups = [[0], [1, 2], [3]]
    ex = jaxshap.ExactExplainer(linear, GAUSS, groups=groups, causal_ordering=[[0], [1], [2]], confounding=True)
    expl = ex(ROWS4)
    for x, phi in zip(ROWS4, np.asarray(expl.values)):
        game = lambda s, x=x: linear_np(chain_mean(x, s, CHAIN, [True] * 3)[None])[0]
        np.testing.assert_allclose(phi, shapley_from_game(group_game(game, groups), 3), atol=5e-4)
    check_efficiency(expl, linear_np(ROWS4), atol=5e-4)


def test_independent_masker_draws_background_rows():
    masker = maskers.Independent(BACKGROUND)
    rows = np.zeros((64, 5))
    given = np.array([True, False, True, False, False])
    out = np.asarray(masker.draw_conditional(jax.random.key(3), jnp.asarray(rows, jnp.float32), jnp.asarray(given)))
    assert (out[:, given] == 0).all()
    drawn = out[:, ~given]
    bg = BACKGROUND.astype(np.float32)[:, ~given]
    assert all(np.any(np.all(np.isclose(bg, r), axis=1)) for r in drawn)


def test_gaussian_draw_conditional_moments():
    rows = np.tile(ROWS4[0], (40_000, 1))
    given = np.array([True, False, False, True])
    out = np.asarray(GAUSS.draw_conditional(jax.random.key(0), jnp.asarray(rows, jnp.float32), jnp.asarray(given)))
    rest = [1, 2]
    reg = np.linalg.solve(COV[np.ix_([0, 3], [0, 3])], COV[np.ix_([0, 3], rest)]).T
    mean = MU[rest] + reg @ (ROWS4[0][[0, 3]] - MU[[0, 3]])
    cov = COV[np.ix_(rest, rest)] - reg @ COV[np.ix_([0, 3], rest)]
    np.testing.assert_allclose(out[:, rest].mean(0), mean, atol=1e-4)  # antithetic: exact mean
    np.testing.assert_allclose(np.cov(out[:, rest], rowvar=False), cov, atol=0.03)
    np.testing.assert_allclose(out[:, given], rows[:, given], atol=1e-6)


def test_causal_errors():
    with pytest.raises(ValueError, match="confounding"):
        jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=CHAIN, confounding=[True, False])
    with pytest.raises(ValueError, match="changes nothing"):
        jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=CHAIN)
    with pytest.raises(ValueError, match="leaves out"):
        jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=[[0], [1, 2]], confounding=False)

    class NoDraws(maskers.Masker):
        n_features, dtype, evals_per_coalition = 4, jnp.float32, 1
        probe_rows = jnp.zeros((1, 4))

        def coalition_values(self, f, x, masks):
            return f(jnp.where(masks, x, 0.0))

    with pytest.raises(ValueError, match="conditional distribution"):
        maskers.Causal(NoDraws(), CHAIN)
    with pytest.raises(ValueError, match="Owen"):
        jaxshap.ExactExplainer(linear, maskers.Partition(BACKGROUND[:, :4]), causal_ordering=CHAIN, confounding=False)


def test_explainer_passes_groups_and_causal_arguments_through_and_jit_agrees():
    df = pd.DataFrame(BACKGROUND, columns=NAMES)
    ex = jaxshap.Explainer(nonlinear, df, groups=GROUPS)
    assert isinstance(ex, jaxshap.ExactExplainer)
    expl = ex(pd.DataFrame(ROWS, columns=NAMES))
    assert list(expl.feature_names) == ["age + sex", "bmi", "bp + s1"]
    np.testing.assert_allclose(expl.values, group_oracle(), atol=2e-4)
    causal = jaxshap.ExactExplainer(linear, GAUSS, causal_ordering=CHAIN, confounding=[False, True, False])
    eager = causal(ROWS4).values
    jitted = jax.jit(lambda e, X: e(X).values)(causal, jnp.asarray(ROWS4, jnp.float32))
    np.testing.assert_allclose(jitted, eager, atol=1e-5)


def test_wrappers_pass_the_model_check_to_the_inner_masker():
    """A grouped Surrogate still refuses a model other than the one it was trained on."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)

    def f(x):
        return x @ jnp.arange(1.0, 5.0)

    surrogate = jaxshap.maskers.Surrogate(f, X, key=jax.random.key(0), epochs=3, hidden=(8,))
    with pytest.raises(ValueError):
        jaxshap.ExactExplainer(lambda x: x @ jnp.ones(4), surrogate, groups=[[0, 1], [2, 3]])
    expl = jaxshap.ExactExplainer(f, surrogate, groups=[[0, 1], [2, 3]])(X[:3])
    np.testing.assert_allclose(expl.values.sum(1) + expl.base_values, np.asarray(f(X[:3])), rtol=1e-4, atol=1e-4)
