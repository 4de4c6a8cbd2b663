"""Interaction indices and interaction values: brute-force oracles, axioms, shapiq, shap."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_mlp
from oracle import interventional_game

import jaxshap
from jaxshap import estimators

INDICES = ["SII", "k-SII", "STII", "FSII", "BII"]
BERNOULLI = [1.0, -0.5, 1.0 / 6.0, 0.0]


# --- brute-force oracles from the definitions (float64, sets as frozensets) -----------------------
def derivative(v, T, S):
    """Discrete derivative Delta_T v(S) = sum_{L <= T} (-1)^{|T| - |L|} v(S | L)."""
    total = 0.0
    for size in range(len(T) + 1):
        for L in itertools.combinations(T, size):
            total += (-1) ** (len(T) - size) * v(frozenset(S) | frozenset(L))
    return total


def subsets(items):
    items = list(items)
    for size in range(len(items) + 1):
        yield from itertools.combinations(items, size)


def oracle_sii(v, m, T):
    """Grabisch & Roubens (1999): sum_S (M - |S| - t)! |S|! / (M - t + 1)! Delta_T v(S)."""
    t = len(T)
    rest = [i for i in range(m) if i not in T]
    return sum(
        math.factorial(m - len(S) - t) * math.factorial(len(S)) / math.factorial(m - t + 1) * derivative(v, T, S)
        for S in subsets(rest)
    )


def oracle_bii(v, m, T):
    rest = [i for i in range(m) if i not in T]
    return sum(derivative(v, T, S) for S in subsets(rest)) / 2 ** (m - len(T))


def oracle_stii(v, m, T, k):
    """Sundararajan et al. (2020): Delta_T v(empty) below the top order; k/M sum Delta / C(M-1, |S|) at it."""
    if len(T) < k:
        return derivative(v, T, ())
    rest = [i for i in range(m) if i not in T]
    return k / m * sum(derivative(v, T, S) / math.comb(m - 1, len(S)) for S in subsets(rest))


def oracle_ksii(v, m, T, k):
    """Bordt & von Luxburg (2023): sum_j B_j sum_{K disjoint from T, |K| = j} SII_{T u K}."""
    rest = [i for i in range(m) if i not in T]
    total = 0.0
    for j in range(k - len(T) + 1):
        for K in itertools.combinations(rest, j):
            total += BERNOULLI[j] * oracle_sii(v, m, tuple(sorted(T + K)))
    return total


def oracle_fsii(v, m, k):
    """Tsai et al. (2023): the constrained Shapley-kernel weighted least-squares fit, by an explicit design."""
    sets = [T for t in range(1, k + 1) for T in itertools.combinations(range(m), t)]
    rows, weights, targets = [], [], []
    v0 = v(frozenset())
    for S in subsets(range(m)):
        if 0 < len(S) < m:
            rows.append([float(set(T) <= set(S)) for T in sets])
            weights.append((m - 1) / (math.comb(m, len(S)) * len(S) * (m - len(S))))
            targets.append(v(frozenset(S)) - v0)
    X, w, y = np.array(rows), np.array(weights), np.array(targets)
    n = len(sets)
    kkt = np.zeros((n + 1, n + 1))
    kkt[:n, :n] = X.T @ (w[:, None] * X)
    kkt[:n, n] = kkt[n, :n] = 1.0
    rhs = np.append(X.T @ (w * y), v(frozenset(range(m))) - v0)
    sol = np.linalg.solve(kkt, rhs)[:n]
    return dict(zip(sets, sol))


def oracle(index, v, m, k):
    """``{T: value}`` for every T with 1 <= |T| <= k."""
    if index == "FSII":
        return oracle_fsii(v, m, k)
    out = {}
    for t in range(1, k + 1):
        for T in itertools.combinations(range(m), t):
            if index == "SII":
                out[T] = oracle_sii(v, m, T)
            elif index == "BII":
                out[T] = oracle_bii(v, m, T)
            elif index == "STII":
                out[T] = oracle_stii(v, m, T, k)
            else:
                out[T] = oracle_ksii(v, m, T, k)
    return out


# --- games -------------------------------------------------------------------------------------
def table_game(m, seed):
    """A random game: one N(0, 1) value per coalition, as a JAX value function and a set function."""
    table = np.random.default_rng(seed).normal(size=2**m)
    weights = 2 ** np.arange(m)

    def value_fn(masks):
        return jnp.asarray(table, jnp.float32)[(masks.astype(jnp.int32) * weights).sum(-1)]

    def v(S):
        return float(table[sum(2**j for j in S)])

    def v_numpy(masks):  # shapiq's game: [C, M] bool -> [C]
        return table[(np.asarray(masks, int) * weights).sum(-1)]

    return value_fn, v, v_numpy


def check_terms(terms, expected, m, k, atol):
    """Every entry (all orderings of each set) equals the oracle; entries with a repeated index are zero."""
    assert len(terms) == k
    for t in range(1, k + 1):
        dense = np.asarray(terms[t - 1])
        assert dense.shape == (m,) * t
        want = np.zeros((m,) * t)
        for T in itertools.combinations(range(m), t):
            for P in itertools.permutations(T):
                want[P] = expected[T]
        np.testing.assert_allclose(dense, want, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("index", INDICES)
def test_indices_match_definition_oracles(index):
    m = 5
    value_fn, v, _ = table_game(m, seed=11)
    for k in (2, 3):
        terms, v0, v1 = estimators.exact_interactions(value_fn, m, index=index, order=k)
        check_terms(terms, oracle(index, v, m, k), m, k, atol=2e-5)
    np.testing.assert_allclose([v0, v1], [v(frozenset()), v(frozenset(range(m)))], rtol=1e-6)


@pytest.mark.parametrize("index", INDICES)
def test_indices_match_shapiq_exact_computer(index):
    shapiq = pytest.importorskip("shapiq")
    m = 5
    value_fn, _, v_numpy = table_game(m, seed=5)
    computer = shapiq.ExactComputer(v_numpy, n_players=m)
    for k in (2, 3):
        terms, _, _ = estimators.exact_interactions(value_fn, m, index=index, order=k)
        reference = computer(index, order=k)
        expected = {T: reference[T] for t in range(1, k + 1) for T in itertools.combinations(range(m), t)}
        check_terms(terms, expected, m, k, atol=3e-5)


def test_order_one_terms_are_shapley_and_banzhaf_values():
    m = 5
    value_fn, v, _ = table_game(m, seed=3)
    sii, _, _ = estimators.exact_interactions(value_fn, m, "SII", 1)
    phi, _, _ = estimators.exact_shapley(value_fn, m)
    np.testing.assert_allclose(sii[0], phi, atol=2e-6)
    beta, _, _ = estimators.banzhaf_values(value_fn, m)
    want = [sum(v(frozenset(S) | {j}) - v(frozenset(S)) for S in subsets(set(range(m)) - {j})) / 2 ** (m - 1) for j in range(m)]
    np.testing.assert_allclose(beta, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("index", ["k-SII", "STII", "FSII"])
def test_efficient_indices_sum_to_the_total_and_rows_to_shapley(index):
    m = 6
    value_fn, v, _ = table_game(m, seed=8)
    total = v(frozenset(range(m))) - v(frozenset())
    for k in (2, 3):
        terms, _, _ = estimators.exact_interactions(value_fn, m, index, k)
        # each set once: a dense order-t tensor counts every set t! times
        s = sum(float(np.asarray(terms[t - 1]).sum()) / math.factorial(t) for t in range(1, k + 1))
        np.testing.assert_allclose(s, total, rtol=1e-5, atol=1e-5)
    terms, _, _ = estimators.exact_interactions(value_fn, m, index, 2)
    matrix = np.asarray(estimators.interaction_matrix(terms))
    phi, _, _ = estimators.exact_shapley(value_fn, m)
    np.testing.assert_allclose(matrix, matrix.T, atol=1e-7)
    np.testing.assert_allclose(matrix.sum(1), phi, atol=2e-5)


@pytest.mark.parametrize("index", ["SII", "k-SII", "STII", "BII"])
def test_dummy_and_symmetry_axioms(index):
    """A null player has no interactions; swapping two symmetric players swaps their terms."""
    m = 5
    rng = np.random.default_rng(2)
    a = rng.normal(size=3)

    def value_fn(masks):  # player 4 is null, players 0 and 1 are symmetric
        z = masks.astype(jnp.float32)
        return a[0] * z[:, 0] * z[:, 1] + a[1] * (z[:, 0] + z[:, 1]) * z[:, 2] + a[2] * z[:, 2] * z[:, 3] + z[:, 3]

    terms, _, _ = estimators.exact_interactions(value_fn, m, index, 3)
    for dense in terms:
        dense = np.asarray(dense)
        np.testing.assert_allclose(np.take(dense, 4, axis=0), 0.0, atol=5e-6)
        perm = [1, 0, 2, 3, 4]
        swapped = dense[np.ix_(*([perm] * dense.ndim))]
        np.testing.assert_allclose(swapped, dense, atol=5e-6)


def test_multi_output_games_keep_the_output_axis():
    m = 4
    value_fn, _, _ = table_game(m, seed=1)
    two = lambda masks: jnp.stack([value_fn(masks), -2.0 * value_fn(masks)], axis=-1)
    one, _, _ = estimators.exact_interactions(value_fn, m, "k-SII", 2)
    both, _, _ = estimators.exact_interactions(two, m, "k-SII", 2)
    assert both[1].shape == (m, m, 2)
    np.testing.assert_allclose(both[1][..., 0], one[1], atol=1e-6)
    np.testing.assert_allclose(both[1][..., 1], -2.0 * one[1], atol=1e-5)


def test_bad_index_and_order_raise():
    value_fn, _, _ = table_game(3, seed=0)
    with pytest.raises(ValueError, match="index"):
        estimators.exact_interactions(value_fn, 3, index="shapley")
    with pytest.raises(ValueError, match="order"):
        estimators.exact_interactions(value_fn, 3, index="SII", order=4)
    with pytest.raises(ValueError, match="order"):
        estimators.exact_interactions(value_fn, 3, index="SII", order=0)
    with pytest.raises(ValueError, match="index"):
        jaxshap.ExactExplainer(lambda X: X.sum(1), np.zeros((2, 3)), index="Shapley-Taylor")


# --- ExactExplainer ------------------------------------------------------------------------------
def _mlp_setup(seed, m, n_outputs=None):
    params, apply = make_mlp(seed, m, n_outputs=n_outputs)
    model = lambda X: apply(params, X)
    rng = np.random.default_rng(seed)
    background = rng.normal(size=(6, m)).astype(np.float32)
    X = rng.normal(size=(3, m)).astype(np.float32)
    return model, background, X


@pytest.mark.parametrize("index", [None, "k-SII", "SII", "FSII", "BII"])
def test_exact_explainer_interactions_match_the_oracle(index):
    m = 4
    model, background, X = _mlp_setup(0, m)
    explainer = jaxshap.ExactExplainer(model, background, index=index)
    expl = explainer(X, interactions=True)
    plain = jaxshap.ExactExplainer(model, background)(X)
    assert expl.interaction_values.shape == (3, m, m)
    # shap's contract for interactions=True: the values are the [n, M, M] interaction values
    np.testing.assert_array_equal(np.asarray(expl.values), np.asarray(expl.interaction_values))
    if index is not None:  # index given, interactions not asked for: Shapley values beside them
        beside = explainer(X)
        np.testing.assert_allclose(beside.values, plain.values, atol=1e-6)
        np.testing.assert_allclose(beside.interaction_values, expl.interaction_values, atol=1e-6)
    f = lambda Z: np.asarray(model(jnp.asarray(Z, jnp.float32)), np.float64)
    for r, x in enumerate(X):
        v = interventional_game(f, x, background)
        cache = {}
        vc = lambda S: cache.setdefault(S, float(v(S)))
        terms = oracle(index or "STII", vc, m, 2)
        want = np.zeros((m, m))
        for i in range(m):
            want[i, i] = terms[(i,)]
            for j in range(i + 1, m):
                want[i, j] = want[j, i] = terms[(i, j)] / 2
        np.testing.assert_allclose(expl.interaction_values[r], want, rtol=1e-4, atol=2e-5)
    if index in (None, "k-SII", "FSII"):
        np.testing.assert_allclose(np.asarray(expl.interaction_values).sum(-1), plain.values, atol=2e-5)


def test_exact_explainer_interactions_equal_shaps_exact_interactions_2():
    shap = pytest.importorskip("shap")
    m = 4
    model, background, X = _mlp_setup(4, m)
    ours = jaxshap.ExactExplainer(model, background)(X, interactions=True)
    f = lambda Z: np.asarray(model(jnp.asarray(Z, jnp.float32)), np.float64)
    theirs = shap.explainers.Exact(f, shap.maskers.Independent(background, max_samples=100))(X, interactions=2)
    assert theirs.values.shape == ours.interaction_values.shape
    np.testing.assert_allclose(ours.interaction_values, theirs.values, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.base_values, theirs.base_values, rtol=1e-5, atol=1e-6)


def test_exact_explainer_interactions_use_no_second_round_of_model_evaluations():
    m = 4
    model, background, X = _mlp_setup(1, m)
    counted = []

    def numpy_model(Z):  # a host model: every evaluated row passes through here
        counted.append(len(Z))
        return np.asarray(model(jnp.asarray(Z, jnp.float32)))

    explainer = jaxshap.ExactExplainer(numpy_model, background)
    explainer(X)  # compile both programs before counting (probing the model may call it)
    explainer(X, interactions=True)
    counted.clear()
    explainer(X)
    plain = sum(counted)
    counted.clear()
    expl = explainer(X, interactions=True)
    assert plain >= 2**m * len(background) * len(X)
    assert sum(counted) == plain
    assert expl.interaction_values.shape == (3, m, m)


def test_exact_explainer_multi_output_and_to_shap():
    m = 3
    model, background, X = _mlp_setup(2, m, n_outputs=2)
    expl = jaxshap.ExactExplainer(model, background, index="k-SII")(X)
    assert expl.interaction_values.shape == (3, m, m, 2)
    np.testing.assert_allclose(np.asarray(expl.interaction_values).sum(2), expl.values, atol=2e-5)
    pytest.importorskip("shap")
    converted = expl.to_shap()
    np.testing.assert_allclose(
        converted.main_effects, np.diagonal(np.asarray(expl.interaction_values), axis1=1, axis2=2).transpose(0, 2, 1)
    )
    as_values = expl.to_shap(interactions=True)
    np.testing.assert_allclose(as_values.values, expl.interaction_values)
    without = jaxshap.ExactExplainer(model, background)(X)
    assert without.interaction_values is None
    with pytest.raises(ValueError, match="interactions=True"):
        without.to_shap(interactions=True)


def test_explanation_pytree_and_rows_carry_interaction_values():
    m = 3
    model, background, X = _mlp_setup(3, m)
    explainer = jaxshap.ExactExplainer(model, background)
    expl = explainer(X, interactions=True)
    leaves, tree = jax.tree_util.tree_flatten(expl)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    np.testing.assert_array_equal(back.interaction_values, expl.interaction_values)
    np.testing.assert_array_equal(expl[1].interaction_values, expl.interaction_values[1])
    jitted = jax.jit(lambda Z: explainer(Z, interactions=True))(X)
    np.testing.assert_allclose(jitted.interaction_values, expl.interaction_values, atol=1e-6)
    # differentiable: the gradient of a loss on interaction values flows back to the rows
    g = jax.grad(lambda Z: (explainer(Z, interactions=True).interaction_values ** 2).sum())(jnp.asarray(X))
    assert g.shape == X.shape and bool(jnp.isfinite(g).all()) and float(jnp.abs(g).sum()) > 0


# --- sampled Faith-SHAP regression -------------------------------------------------------------
def _mlp_game(m, seed):
    rng = np.random.default_rng(seed)
    W, a = rng.normal(size=(m, 16)) / 3, rng.normal(size=16)
    x, b = rng.normal(size=m), rng.normal(size=(20, m))

    def game(masks):
        Z = jnp.where(masks[:, None, :], jnp.asarray(x, jnp.float32), jnp.asarray(b, jnp.float32)[None])
        return (jnp.tanh(Z @ W) @ a).mean(1)

    return game


def test_kernel_interactions_are_exact_at_full_budget():
    m = 5
    value_fn, v, _ = table_game(m, seed=4)
    run = jax.jit(lambda k: estimators.kernel_interactions(k, value_fn, m, 2**m - 2))
    terms, stderr, v0, v1 = run(jax.random.key(1))
    check_terms(terms, oracle_fsii(v, m, 2), m, 2, atol=2e-5)
    assert float(max(np.abs(s).max() for s in stderr)) == 0.0
    np.testing.assert_allclose([v0, v1], [v(frozenset()), v(frozenset(range(m)))], rtol=1e-6)


def test_kernel_interactions_converge_with_calibrated_stderr_and_efficiency():
    m = 10
    game = _mlp_game(m, seed=2)
    exact, v0, v1 = estimators.exact_interactions(game, m, "FSII", 2)
    upper = np.triu_indices(m, 1)
    errors, covered = [], []
    for budget in (200, 800):
        run = jax.jit(lambda k: estimators.kernel_interactions(k, game, m, budget))
        rms = []
        for seed in range(3):
            terms, stderr, _, _ = run(jax.random.key(seed))
            err = np.asarray(terms[1] - exact[1])[upper]
            rms.append(np.sqrt((err**2).mean()))
            covered.append(np.mean(np.abs(err) < 3 * np.asarray(stderr[1])[upper]))
            total = float(terms[0].sum() + terms[1].sum() / 2)
            np.testing.assert_allclose(total, float(v1 - v0), rtol=1e-4, atol=1e-4)
        errors.append(np.mean(rms))
    scale = np.abs(np.asarray(exact[1])[upper]).mean()
    assert errors[1] < errors[0] / 1.5  # four times the budget: clearly lower error
    assert errors[1] < 0.2 * scale
    assert np.mean(covered) > 0.85  # 3-sigma intervals cover most pairs


def test_kernel_interactions_bad_budget_raises():
    game = _mlp_game(6, seed=0)
    with pytest.raises(ValueError, match="n_coalitions"):
        estimators.kernel_interactions(jax.random.key(0), game, 6, 10)
    with pytest.raises(ValueError, match="order"):
        estimators.kernel_interactions(jax.random.key(0), game, 6, 60, order=6)


# --- trees ---------------------------------------------------------------------------------------
TM = 5


def _tree_data(seed=0, nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, TM)).astype(np.float32)
    y = 2 * X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * np.sin(3 * X[:, 3]) * X[:, 4]
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    return X, y


def _tree_model(kind):
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    from sklearn import ensemble

    X, y = _tree_data(nan=kind.startswith(("xgb", "lgb")))
    yb, ym = (y > 0).astype(int), np.digitize(y, [-1.0, 1.0])
    if kind == "xgb_reg":
        return xgb.XGBRegressor(n_estimators=10, max_depth=4).fit(X, y), X
    if kind == "xgb_bin":
        return xgb.XGBClassifier(n_estimators=6, max_depth=3).fit(X, yb), X
    if kind == "xgb_multi":
        return xgb.XGBClassifier(n_estimators=4, max_depth=3).fit(X, ym), X
    if kind == "lgb_reg":
        return lgb.LGBMRegressor(n_estimators=8, num_leaves=9, min_child_samples=5, verbose=-1).fit(X, y), X
    if kind == "lgb_multi":
        return lgb.LGBMClassifier(n_estimators=3, num_leaves=7, min_child_samples=5, verbose=-1).fit(X, ym), X
    if kind == "rf_reg":
        return ensemble.RandomForestRegressor(n_estimators=4, max_depth=5, random_state=0).fit(X, y), X
    if kind == "rf_clf":
        return ensemble.RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, ym), X
    raise KeyError(kind)


def _margin(model, kind):
    if kind.startswith("xgb"):
        return lambda Z: model.predict(np.asarray(Z), output_margin=True)
    if kind.startswith("lgb"):
        return lambda Z: model.predict(np.asarray(Z), raw_score=True)
    return model.predict_proba if kind == "rf_clf" else model.predict


@pytest.mark.parametrize("kind", ["xgb_reg", "xgb_bin", "xgb_multi", "lgb_reg", "lgb_multi", "rf_reg", "rf_clf"])
def test_tree_path_dependent_interactions_equal_shap(kind):
    shap = pytest.importorskip("shap")
    model, X = _tree_model(kind)
    rows = X[:10]
    explainer = jaxshap.TreeExplainer(model)
    ours = explainer.shap_interaction_values(rows)
    theirs = np.asarray(shap.TreeExplainer(model).shap_interaction_values(rows))
    if theirs.ndim == 4 and theirs.shape[0] != len(rows):  # older shap: a list per class
        theirs = np.moveaxis(theirs, 0, -1)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=2e-5 * max(1.0, np.abs(theirs).max()))
    expl = explainer(rows, interactions=True)
    np.testing.assert_array_equal(np.asarray(expl.values), np.asarray(expl.interaction_values))  # as shap
    np.testing.assert_allclose(np.asarray(expl.interaction_values).sum(2), explainer(rows).values, atol=2e-5)
    np.testing.assert_allclose(expl.interaction_values, np.swapaxes(np.asarray(expl.interaction_values), 1, 2), atol=1e-6)


def _cover_game(e, x):
    """Path-dependent value function of an imported ensemble: follow x on S, cover-average elsewhere."""
    from jaxshap._tree._ensemble import go_left

    def expect(t, node, S):
        f = e.feature[t, node]
        if f < 0:
            return e.value[t, node, 0]
        left, right = e.left[t, node], e.right[t, node]
        if f in S:
            way = go_left(np.float64(x[f]), e.threshold[t, node], e.default_left[t, node], e.missing[t, node])
            return expect(t, left if way else right, S)
        return (e.cover[t, left] * expect(t, left, S) + e.cover[t, right] * expect(t, right, S)) / e.cover[t, node]

    cache = {}
    return lambda S: cache.setdefault(S, float(e.base[0] + sum(expect(t, 0, S) for t in range(e.n_trees))))


def test_tree_path_dependent_interactions_match_the_definition():
    from jaxshap._tree._reader import import_model

    model, X = _tree_model("xgb_reg")
    e = import_model(model)
    ours = jaxshap.TreeExplainer(model).shap_interaction_values(X[:3])
    for r, x in enumerate(X[:3]):
        terms = oracle("k-SII", _cover_game(e, x), TM, 2)
        want = np.zeros((TM, TM))
        for i in range(TM):
            want[i, i] = terms[(i,)]
            for j in range(i + 1, TM):
                want[i, j] = want[j, i] = terms[(i, j)] / 2
        np.testing.assert_allclose(ours[r], want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("kind", ["xgb_multi", "rf_reg"])
def test_tree_interventional_interactions_equal_exact_explainer(kind):
    model, X = _tree_model(kind)
    X = np.nan_to_num(X)
    bg, rows = X[100:120], X[:4]
    ours = jaxshap.TreeExplainer(model, bg)(rows, interactions=True)
    margin = _margin(model, kind)
    exact = jaxshap.ExactExplainer(lambda Z: np.asarray(margin(Z), np.float32), bg, index="k-SII")(rows)
    np.testing.assert_allclose(ours.interaction_values, exact.interaction_values, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.interaction_values).sum(2), jaxshap.TreeExplainer(model, bg)(rows).values, atol=2e-5)


def _layout(terms, m, k):
    """The order-k tensor from ``{T: value}``: each set's value split evenly over the k-tuples whose
    distinct indices are exactly T (brute force over every tuple)."""
    out = np.zeros((m,) * k)
    for idx in itertools.product(range(m), repeat=k):
        T = tuple(sorted(set(idx)))
        count = sum(1 for other in itertools.product(T, repeat=k) if set(other) == set(T))
        out[idx] = terms[T] / count
    return out


BACKGROUND_ROWS = 40


@pytest.mark.parametrize("kind", ["xgb_multi", "lgb_reg", "rf_reg"])
@pytest.mark.parametrize("order", [2, 3])
def test_tree_interventional_interactions_of_every_index_equal_exact_explainer(kind, order):
    """``TreeExplainer(model, bg)(X, interactions=k, index=...)``: the same tensor as ExactExplainer
    on the model's own predict with the same background (every index, orders 2 and 3, 40
    background rows: two chunks)."""
    model, X = _tree_model(kind)
    X = np.nan_to_num(X)
    bg, rows = X[100 : 100 + BACKGROUND_ROWS], X[:3]
    margin = _margin(model, kind)
    tree = jaxshap.TreeExplainer(model, bg)
    for index in INDICES:
        ours = tree(rows, interactions=order, index=index)
        exact = jaxshap.ExactExplainer(lambda Z: np.asarray(margin(Z), np.float64), bg, index=index)(rows, interactions=order)
        assert np.shape(ours.values) == np.shape(exact.values) == (3,) + (TM,) * order + np.shape(exact.values)[1 + order :]
        scale = max(1.0, np.abs(exact.values).max())
        np.testing.assert_allclose(ours.values, exact.values, rtol=1e-4, atol=2e-5 * scale, err_msg=index)
        np.testing.assert_array_equal(np.asarray(ours.values), np.asarray(ours.interaction_values))


@pytest.mark.parametrize("order", [2, 3])
def test_tree_path_dependent_interactions_of_every_index_match_the_definition(order):
    """The path-dependent game's indices (brute force over all coalitions of the cover game) laid
    out as the order-k tensor; for k-SII the rows sum to the SHAP values (efficiency at every order)."""
    from jaxshap._tree._reader import import_model

    model, X = _tree_model("xgb_reg")
    e = import_model(model)
    explainer = jaxshap.TreeExplainer(model)
    rows = X[:2]
    for index in INDICES:
        ours = np.asarray(explainer(rows, interactions=order, index=index).values)
        for r, x in enumerate(rows):
            want = _layout(oracle(index, _cover_game(e, x), TM, order), TM, order)
            np.testing.assert_allclose(ours[r], want, rtol=1e-4, atol=2e-5, err_msg=index)
    ksii = np.asarray(explainer(rows, interactions=order).values)
    shap_values = np.asarray(explainer(rows).values)
    np.testing.assert_allclose(ksii.sum(axis=tuple(range(2, 1 + order))), shap_values, atol=2e-5)
    np.testing.assert_allclose(ksii.reshape(2, -1).sum(1) + np.asarray(explainer(rows).base_values),
                               model.predict(rows, output_margin=True), atol=5e-5)


def test_interaction_tensor_is_the_brute_force_layout():
    """``interaction_tensor`` against :func:`_layout` for a random game's k-SII of order 3 and 4."""
    value_fn, v, _ = table_game(5, 3)
    for k in (3, 4):
        terms, _, _ = estimators.exact_interactions(value_fn, 5, "k-SII", k)
        from jaxshap._estimators._interactions import interaction_tensor

        np.testing.assert_allclose(np.asarray(interaction_tensor(terms, k)), _layout(oracle("k-SII", v, 5, k), 5, k),
                                   rtol=1e-4, atol=1e-5)


def test_an_order_not_implemented_is_refused_naming_interactions():
    """No explainer answers a higher order with a lower one: TreeExplainer and ExactExplainer refuse
    orders above the number of features, KernelExplainer any interaction values, all naming
    ``interactions``; a value that is not an order is refused too."""
    model, X = _tree_model("xgb_reg")
    X = np.nan_to_num(X)
    margin = _margin(model, "xgb_reg")
    tree = jaxshap.TreeExplainer(model)
    with pytest.raises(ValueError, match="interactions"):
        tree(X[:2], interactions=TM + 1)
    with pytest.raises(ValueError, match="interactions"):
        tree(X[:2], interactions=2.5)
    exact = jaxshap.ExactExplainer(lambda Z: np.asarray(margin(Z), np.float32), X[100:110])
    with pytest.raises(ValueError, match="interactions"):
        exact(X[:2], interactions=TM + 1)
    with pytest.raises(ValueError, match="interactions"):
        exact(X[:2], interactions="3")
    kernel = jaxshap.KernelExplainer(lambda Z: np.asarray(margin(Z), np.float32), X[100:110])
    for k in (True, 2, 3):
        with pytest.raises(ValueError, match="interactions"):
            kernel(X[:2], interactions=k)
    assert np.shape(kernel(X[:2], interactions=False).values) == (2, TM)
