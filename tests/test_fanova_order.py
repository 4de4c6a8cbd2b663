"""functional_anova(max_order=k) and h_statistic(order=k) against a brute-force NumPy oracle.

The oracle is written from the definitions with explicit loops and shares no code with
jaxshap: the partial dependence of a set S at row i averages the model over the rows with the
features of S taken from row i; it is centred over the rows (the empty set's is then 0), and
g_S = sum over T subset of S of (-1)^(|S|-|T|) F_T, summed term by term.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap

M, N = 4, 16
RNG = np.random.default_rng(7)
X = RNG.normal(size=(N, M)).astype(np.float32)
W1 = RNG.normal(size=(M, 6)).astype(np.float32)
W2 = RNG.normal(size=(6,)).astype(np.float32)


def mlp_jax(x):
    return jnp.tanh(x @ W1) @ W2


def mlp_np(x):
    x = np.asarray(x, np.float64)
    return np.tanh(x @ W1.astype(np.float64)) @ W2.astype(np.float64)


# --- the oracle -------------------------------------------------------------------------------


def oracle_pd(f, X, S):
    """Centred partial dependence of the feature set S at every row."""
    X = np.asarray(X, np.float64)
    values = []
    for i in range(X.shape[0]):
        Z = X.copy()
        for j in S:
            Z[:, j] = X[i, j]
        values.append(np.mean(f(Z), axis=0))
    values = np.array(values)
    return values - values.mean(axis=0)


def oracle_subsets(S):
    for size in range(len(S) + 1):
        yield from itertools.combinations(S, size)


def oracle(f, X, k):
    """Centred PDs F, components g and predictions of every set of up to k features."""
    m = X.shape[1]
    sets = [S for size in range(k + 1) for S in itertools.combinations(range(m), size)]
    F = {S: oracle_pd(f, X, S) for S in sets}
    g = {}
    for S in sets[1:]:
        total = 0.0
        for T in oracle_subsets(S):
            total = total + (-1) ** (len(S) - len(T)) * F[T]
        g[S] = total
    fx = f(np.asarray(X, np.float64))
    return F, g, fx


@pytest.fixture(scope="module")
def reference():
    return oracle(mlp_np, X, M)


# --- functional ANOVA of any order ------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_components_and_shares_match_oracle(reference, k):
    _, g, fx = reference
    a = jaxshap.functional_anova(mlp_jax, X, max_order=k)
    expected_sets = [S for size in range(1, k + 1) for S in itertools.combinations(range(M), size)]
    assert list(a.components) == expected_sets and list(a.shares) == expected_sets
    assert sum(1 for S in a.components if len(S) == k) == math.comb(M, k)
    assert a.max_order == k
    den = np.sum((fx - fx.mean()) ** 2)
    for S in expected_sets:
        np.testing.assert_allclose(np.asarray(a.components[S]), g[S], atol=3e-5, err_msg=str(S))
        np.testing.assert_allclose(float(a.shares[S]), np.sum(g[S] ** 2) / den, rtol=2e-3, atol=1e-7)
    for size in range(1, k + 1):
        want = sum(np.sum(g[S] ** 2) for S in expected_sets if len(S) == size) / den
        np.testing.assert_allclose(float(a.order_shares[size]), want, rtol=2e-3, atol=1e-7)
    resid = fx - fx.mean() - sum(g[S] for S in expected_sets)
    np.testing.assert_allclose(float(a.residual_share), np.sum(resid**2) / den, rtol=2e-3, atol=1e-6)
    if k >= 3:  # the MLP has higher-order structure: the comparison is not 0 = 0
        assert max(np.abs(g[S]).max() for S in expected_sets if len(S) == 3) > 1e-2


def test_order_two_is_todays_main_and_interaction(reference):
    F, g, _ = reference
    today = jaxshap.functional_anova(mlp_jax, X)  # max_order=2, every pair
    three = jaxshap.functional_anova(mlp_jax, X, max_order=3)
    pairs = list(itertools.combinations(range(M), 2))
    assert today.pairs == three.pairs == tuple(pairs) and today.max_order == 2
    for p, (j, k) in enumerate(pairs):
        np.testing.assert_allclose(np.asarray(today.interaction[:, p]), F[(j, k)] - F[(j,)] - F[(k,)], atol=3e-5)
        np.testing.assert_array_equal(np.asarray(today.components[(j, k)]), np.asarray(today.interaction[:, p]))
        np.testing.assert_allclose(np.asarray(three.components[(j, k)]), np.asarray(today.interaction[:, p]), atol=1e-6)
    for j in range(M):
        np.testing.assert_array_equal(np.asarray(today.components[(j,)]), np.asarray(today.main[:, j]))
    np.testing.assert_allclose(np.asarray(three.main), np.asarray(today.main), atol=1e-6)
    np.testing.assert_allclose(np.asarray(three.main_share), np.asarray(today.main_share), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(three.interaction_share), np.asarray(today.interaction_share), rtol=1e-5)
    # the requested pairs only, with max_order=2
    some = jaxshap.functional_anova(mlp_jax, X, pairs=[(2, 3)])
    assert list(some.components) == [(0,), (1,), (2,), (3,), (2, 3)]
    np.testing.assert_allclose(np.asarray(some.components[(2, 3)]), g[(2, 3)], atol=3e-5)
    assert jaxshap.functional_anova(mlp_jax, X, pairs=[]).max_order == 1


def test_full_decomposition_reconstructs_the_predictions_with_dependent_features():
    # strongly dependent columns: the identity holds at the rows regardless
    Z = X.copy()
    Z[:, 1] = Z[:, 0] + 0.05 * Z[:, 1]
    Z[:, 3] = Z[:, 2] * Z[:, 0]
    a = jaxshap.functional_anova(mlp_jax, Z, max_order=M)
    assert len(a.components) == 2**M - 1
    recon = float(a.intercept) + sum(np.asarray(c, np.float64) for c in a.components.values())
    np.testing.assert_allclose(recon, mlp_np(Z), atol=5e-5)
    assert abs(float(a.residual_share)) < 1e-6
    for S, c in a.components.items():  # every component has mean zero over the rows
        assert abs(float(np.mean(c))) < 1e-5, S
    # orders above M mean every set
    assert list(jaxshap.functional_anova(mlp_jax, Z, max_order=9).components) == list(a.components)


def test_product_grid_components_are_orthogonal_and_shares_add_to_one():
    # the rows are every combination of per-feature values: their empirical distribution is a
    # product, so the components are exactly orthogonal over the rows
    levels = [np.array([-1.0, 0.5, 2.0]), np.array([0.0, 1.0]), np.array([-2.0, 1.0, 1.5]), np.array([0.3, 3.0])]
    G = np.array(list(itertools.product(*levels)), dtype=np.float32)
    f = lambda x: x[:, 0] * x[:, 1] * x[:, 2] + x[:, 3] + jnp.sin(x[:, 0] * x[:, 3])
    a = jaxshap.functional_anova(f, G, max_order=M, n_max=len(G))
    comps = {S: np.asarray(c, np.float64) for S, c in a.components.items()}
    for S, T in itertools.combinations(comps, 2):
        assert abs(np.dot(comps[S], comps[T])) < 1e-3 * len(G), (S, T)
    np.testing.assert_allclose(sum(float(v) for v in a.shares.values()), 1.0, rtol=1e-4)
    np.testing.assert_allclose(sum(float(v) for v in a.order_shares.values()), 1.0, rtol=1e-4)
    # on a product grid the pure three-way part of x0 x1 x2 is the product of centred factors
    x = G.astype(np.float64)
    m = x.mean(0)
    triple = (x[:, 0] - m[0]) * (x[:, 1] - m[1]) * (x[:, 2] - m[2])
    np.testing.assert_allclose(comps[(0, 1, 2)], triple, atol=2e-5)


def test_known_structure_three_way_plus_additive():
    f = lambda x: x[:, 0] * x[:, 1] * x[:, 2] + x[:, 3]
    a = jaxshap.functional_anova(f, X, max_order=M)
    x = X.astype(np.float64)
    mean = lambda *js: np.mean(np.prod(x[:, list(js)], axis=1))
    # closed form on these rows: the Möbius sum of x_T * (mean over rows of the product of the rest)
    g012 = (x[:, 0] * x[:, 1] * x[:, 2] - x[:, 0] * x[:, 1] * mean(2) - x[:, 0] * x[:, 2] * mean(1)
            - x[:, 1] * x[:, 2] * mean(0) + x[:, 0] * mean(1, 2) + x[:, 1] * mean(0, 2) + x[:, 2] * mean(0, 1))
    g012 -= g012.mean()
    np.testing.assert_allclose(np.asarray(a.components[(0, 1, 2)]), g012, atol=2e-5)
    assert float(a.shares[(0, 1, 2)]) > 0.05
    for S, c in a.components.items():
        if 3 in S and len(S) > 1:  # x3 enters additively: every set with x3 and another feature is 0
            assert np.abs(np.asarray(c)).max() < 1e-5, S
    np.testing.assert_allclose(np.asarray(a.components[(3,)]), x[:, 3] - x[:, 3].mean(), atol=1e-5)


def test_additive_model_has_no_components_beyond_the_first():
    f = lambda x: jnp.sin(x[:, 0]) + x[:, 1] ** 2 - 3.0 * x[:, 2] + jnp.exp(0.3 * x[:, 3])
    a = jaxshap.functional_anova(f, X, max_order=M)
    for S, c in a.components.items():
        if len(S) > 1:
            assert np.abs(np.asarray(c)).max() < 1e-5, S
    np.testing.assert_allclose(sum(float(a.order_shares[j]) for j in range(2, M + 1)), 0.0, atol=1e-9)
    # the main effects add up to the centred predictions; their shares add up to 1 only with
    # the cross terms, which do not vanish on rows that are not a product grid
    main = np.stack([np.asarray(a.components[(j,)], np.float64) for j in range(M)])
    fx = np.asarray(f(jnp.asarray(X)), np.float64)
    np.testing.assert_allclose(main.sum(0), fx - fx.mean(), atol=2e-5)
    cross = sum(2 * main[j] @ main[k] for j, k in itertools.combinations(range(M), 2)) / np.sum((fx - fx.mean()) ** 2)
    np.testing.assert_allclose(float(a.order_shares[1]) + cross, 1.0, rtol=1e-4)
    assert abs(cross) > 1e-2
    assert abs(float(jaxshap.functional_anova(f, X, max_order=1).residual_share)) < 1e-6


def test_several_outputs(reference):
    _, g, _ = reference
    f2 = lambda x: jnp.stack([mlp_jax(x), x[:, 0] * x[:, 1] * x[:, 2]], axis=-1)
    a = jaxshap.functional_anova(f2, X, max_order=3)
    single = jaxshap.functional_anova(mlp_jax, X, max_order=3)
    assert a.output_names == ("Output 0", "Output 1")
    assert np.shape(a.intercept) == (2,) and np.shape(a.residual_share) == (2,)
    for S, c in a.components.items():
        assert c.shape == (N, 2) and a.shares[S].shape == (2,)
        np.testing.assert_allclose(np.asarray(c[:, 0]), np.asarray(single.components[S]), atol=1e-6)
        np.testing.assert_allclose(np.asarray(c[:, 0]), g[S], atol=3e-5)
    assert a.order_shares[3].shape == (2,) and float(a.order_shares[3][1]) > 0.05
    h = jaxshap.h_statistic(f2, X, order=3)
    h1 = jaxshap.h_statistic(mlp_jax, X, order=3)
    for S, v in h.by_order[3].items():
        assert v.shape == (2,)
        np.testing.assert_allclose(float(v[0]), float(h1.by_order[3][S]), rtol=1e-5, atol=1e-9)


def test_results_are_pytrees():
    a = jaxshap.functional_anova(mlp_jax, X, max_order=3)
    b = jax.tree_util.tree_map(lambda v: v * 2, a)
    assert b.max_order == 3 and b.pairs == a.pairs and set(b.components) == set(a.components)
    np.testing.assert_allclose(np.asarray(b.components[(0, 1, 2)]), 2 * np.asarray(a.components[(0, 1, 2)]))
    h = jaxshap.h_statistic(mlp_jax, X, order=3)
    h2 = jax.tree_util.tree_map(lambda v: v + 0, h)
    assert h2.order == 3 and set(h2.by_order) == {2, 3} and h2.triples == h.triples


# --- H statistics of any order ----------------------------------------------------------------


def test_h_statistic_by_order_matches_oracle(reference):
    F, g, _ = reference
    h = jaxshap.h_statistic(mlp_jax, X, order=M)
    assert h.order == M and sorted(h.by_order) == list(range(2, M + 1))
    for j in range(2, M + 1):
        sets = list(itertools.combinations(range(M), j))
        assert list(h.by_order[j]) == sets
        for S in sets:
            want = np.sum(g[S] ** 2) / np.sum(F[S] ** 2)
            np.testing.assert_allclose(float(h.by_order[j][S]), want, rtol=5e-3, atol=1e-6, err_msg=str(S))


def test_h_statistic_orders_two_and_three_equal_todays_values():
    triples = list(itertools.combinations(range(M), 3))
    today = jaxshap.h_statistic(mlp_jax, X, triples=triples)
    h = jaxshap.h_statistic(mlp_jax, X, order=3, triples=triples)
    for (j, k), v in h.by_order[2].items():
        np.testing.assert_allclose(float(v), float(today.pairwise[j, k]), rtol=1e-5)
    np.testing.assert_allclose(np.array([float(h.by_order[3][t]) for t in triples]), np.asarray(today.threeway),
                               rtol=1e-3, atol=1e-7)
    for name in ("overall", "pairwise", "total", "threeway"):
        np.testing.assert_allclose(np.asarray(getattr(h, name)), np.asarray(getattr(today, name)), rtol=1e-5, atol=1e-7)
    assert h.pairs == today.pairs and h.triples == today.triples
    two = jaxshap.h_statistic(mlp_jax, X, order=2)
    assert two.threeway is None and set(two.by_order) == {2}
    np.testing.assert_allclose(np.asarray(two.pairwise), np.asarray(today.pairwise), rtol=1e-5)
    assert today.by_order is None and today.order is None  # without `order`, as before


def test_h_statistic_order_on_known_structure():
    f = lambda x: x[:, 0] * x[:, 1] * x[:, 2] + x[:, 3]
    h = jaxshap.h_statistic(f, X, order=3)
    assert float(h.by_order[3][(0, 1, 2)]) > 0.05
    for S in [(0, 1, 3), (0, 2, 3), (1, 2, 3)]:
        assert float(h.by_order[3][S]) < 1e-6, S


# --- errors -----------------------------------------------------------------------------------


def test_errors():
    with pytest.raises(ValueError, match="max_order"):
        jaxshap.functional_anova(mlp_jax, X, max_order=0)
    with pytest.raises(ValueError, match="max_order"):
        jaxshap.functional_anova(mlp_jax, X, max_order=True)
    with pytest.raises(ValueError, match="pairs"):
        jaxshap.functional_anova(mlp_jax, X, max_order=3, pairs=[(0, 1)])
    wide = RNG.normal(size=(5, 24)).astype(np.float32)
    calls = []

    def counting(x):
        calls.append(x.shape)
        return x.sum(1)

    with pytest.raises(ValueError, match=r"max_order=10.*model evaluations"):
        jaxshap.functional_anova(counting, wide, max_order=10)
    assert calls == []  # refused before any model evaluation
    with pytest.raises(ValueError, match=r"order=9.*model evaluations"):
        jaxshap.h_statistic(lambda x: x.sum(1), wide, order=9)
    with pytest.raises(ValueError, match="order"):
        jaxshap.h_statistic(mlp_jax, X, order=1)
    with pytest.raises(ValueError, match="order"):
        jaxshap.h_statistic(mlp_jax, X, order=M + 1)
    with pytest.raises(ValueError, match="pairs"):
        jaxshap.h_statistic(mlp_jax, X, order=2, pairs=[(0, 1)])
    with pytest.raises(ValueError, match="pairs"):
        jaxshap.h_statistic(mlp_jax, X, order=2, pairs=2)


def test_fast_subset_transform_against_explicit_sums():
    from jaxshap._coalitions._combinatorics import mobius, mobius_plan
    from jaxshap._effects._partial_dependence import check_set_count, sets_up_to

    m, k = 7, 5
    sets = sets_up_to(m, k)
    values = np.random.default_rng(3).normal(size=(len(sets), 3))
    F = {(): 0.0, **{S: values[r] for r, S in enumerate(sets)}}
    shuffled = [sets[r] for r in np.random.default_rng(4).permutation(len(sets))]  # any row order
    G = np.asarray(mobius(jnp.asarray(np.stack([F[S] for S in shuffled])), mobius_plan(shuffled, shuffled)))
    for r, S in enumerate(shuffled):
        want = sum((-1) ** (len(S) - len(T)) * F[T] for T in oracle_subsets(S))
        np.testing.assert_allclose(G[r], want, rtol=1e-4, atol=1e-4, err_msg=str(S))
    check_set_count(400, 2, 500, "max_order")  # main effects and pairs: no limit, as without max_order
    with pytest.raises(ValueError, match="max_order=16"):
        check_set_count(17, 16, 500, "max_order")
    check_set_count(16, 16, 500, "max_order")  # every set of 16 features is allowed


def test_dense_subset_sums_against_explicit_sums_and_invert_the_mobius_transform():
    """The dense transform over all 2**u subsets (bit codes, the trees' superset shares and subset
    totals) against sums written from the definition, and the family transform undoes it."""
    from jaxshap._coalitions._combinatorics import mobius, mobius_plan, subset_sums

    u = 5
    z = np.random.default_rng(5).normal(size=(3, 2**u))
    sub, sup = subset_sums(z), subset_sums(z, superset=True)
    for q in range(2**u):
        np.testing.assert_allclose(sub[:, q], sum(z[:, r] for r in range(2**u) if r & q == r), atol=1e-12)
        np.testing.assert_allclose(sup[:, q], sum(z[:, r] for r in range(2**u) if r & q == q), atol=1e-12)
    assert not np.shares_memory(sub, z)
    sets = [tuple(j for j in range(u) if c >> j & 1) for c in range(1, 2**u)]  # every non-empty set, by code
    with jax.enable_x64(True):  # with v(empty) = 0: sums less z(empty)
        back = np.asarray(mobius(jnp.asarray((sub[:, 1:] - z[:, :1]).T), mobius_plan(sets, sets)))
    np.testing.assert_allclose(back, z[:, 1:].T, atol=1e-9)


def test_numpy_model_and_dataframe_names(reference):
    pd = pytest.importorskip("pandas")
    F, g, _ = reference
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    a = jaxshap.functional_anova(lambda x: mlp_np(np.asarray(x)).astype(np.float32), df, max_order=3)
    assert a.feature_names == ("a", "b", "c", "d")
    for S in [(0,), (1, 3), (0, 2, 3)]:
        np.testing.assert_allclose(np.asarray(a.components[S]), g[S], atol=3e-5)
    h = jaxshap.h_statistic(lambda x: mlp_np(np.asarray(x)).astype(np.float32), df, order=3)
    want = np.sum(g[(0, 1, 2)] ** 2) / np.sum(F[(0, 1, 2)] ** 2)
    np.testing.assert_allclose(float(h.by_order[3][(0, 1, 2)]), want, rtol=5e-3)
