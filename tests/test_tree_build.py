"""Building a TreeExplainer: the dense path kernels, deep trees, the memory guard.

Oracles: brute-force Shapley values and interaction indices of single paths' games, computed
here from the definitions pattern by pattern, the library's own predictions (efficiency) and
XGBoost's and LightGBM's own TreeSHAP (``pred_contribs`` / ``pred_contrib``).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

xgb = pytest.importorskip("xgboost")

from jaxshap._estimators._interactions import exact_interactions  # noqa: E402
from jaxshap._tree._reader import import_model  # noqa: E402
from jaxshap._tree._interventional import pair_block, shapley_tables, tables_host  # noqa: E402
from jaxshap._tree._quadrature import shapley_arrays, shapley_block  # noqa: E402
from jaxshap._tree._paths import decompose, follows, follows_host, host_slots  # noqa: E402
from jaxshap._tree._quadrature import interior_nodes, product_terms, rule  # noqa: E402


def _patterns(u: int, rng) -> np.ndarray:
    """Every pattern of ``u`` followed slots (at most 64 of them, drawn at random beyond)."""
    if u <= 6:
        return ((np.arange(2**u)[:, None] >> np.arange(u)) & 1).astype(bool)
    return rng.random((64, u)) < 0.5


def _path_game(z, o):
    return lambda s: np.prod([o[j] if j in s else z[j] for j in range(len(z))])


@pytest.mark.parametrize("u", [1, 2, 4, 7, 12])
def test_path_dependent_kernel_equals_brute_force(u):
    """The quadrature kernel (ceil(U/2) Gauss nodes) against the Shapley values of each path's
    game ``prod_{S} o prod_{not S} z`` over its slots, for every pattern of followed slots,
    with a zero cover share (a child with no cover)."""
    rng = np.random.default_rng(u)
    z = rng.random((3, u))
    z[0, 0] = 0.0
    value = rng.normal(size=3)
    o = _patterns(u, rng)  # [n, U]
    host = shapley_arrays(z, value)
    with jax.enable_x64(True):
        params = {k: jnp.asarray(v) for k, v in host.items()}
        follow = jnp.asarray(np.broadcast_to(o.T[None], (3, u, o.shape[0])))
        got = np.asarray(shapley_block(params, follow))  # [P, U, n]
    for p in range(3):
        for r in range(o.shape[0]):
            expected = value[p] * shapley_from_game(_path_game(z[p], o[r]), u)
            np.testing.assert_allclose(got[p, :, r], expected, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("u", [1, 3, 6])
def test_pair_kernel_and_pattern_tables_equal_brute_force(u):
    """The interventional closed form (chunked pair kernel) and the pattern tables built from the
    background's histogram, against the brute-force Shapley values of the hybrid-row game
    ``prod_{S} a prod_{not S} c`` averaged over background rows."""
    rng = np.random.default_rng(10 + u)
    a = _patterns(u, rng)  # rows [n, U]
    c = rng.random((9, u)) < 0.6  # background rows [B, U]
    expected = np.stack([np.mean([shapley_from_game(_path_game(cb, ar), u) for cb in c], axis=0) for ar in a])
    wa, wb = shapley_tables(u)
    with jax.enable_x64(True):
        weight = jnp.full((1, 1, c.shape[0], 1), 1.0 / c.shape[0])
        got = pair_block(jnp.asarray(a.T[None]), jnp.asarray(c.T[None]), jnp.asarray(wa), jnp.asarray(wb), weight)
    np.testing.assert_allclose(np.asarray(got)[0, :, :, 0].T, expected, rtol=1e-12, atol=1e-14)
    codes = (c * (1 << np.arange(u))).sum(1)  # the background's patterns on the one path
    hist = np.bincount(codes, minlength=2**u)[None] / c.shape[0]  # [1 path, 2**U] shares
    table = tables_host(hist, u, max_chunk_bytes=1)[0]  # [2**U, U]
    np.testing.assert_allclose(table[(a * (1 << np.arange(u))).sum(1)], expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("index", ["SII", "STII", "FSII", "BII"])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_product_terms_equal_exact_interactions(index, order):
    """The quadrature terms of one path's product game (with factors that vanish at p = 0 and at
    inner nodes) against ``exact_interactions`` on the same game over the slots and two null features."""
    rng = np.random.default_rng(order)
    u, m = 5, 7
    alpha = rng.random(u) * (rng.random(u) > 0.3)
    beta = rng.random(u) * (rng.random(u) > 0.3)
    alpha[0], beta[0] = 1.0, 0.0  # f(0) = 0 while d = 1
    alpha[1], beta[1] = 0.0, 0.0  # f = 0 everywhere: the leaf is never reached
    for a, b in ((alpha, beta), (np.where(np.arange(u) == 1, 1.0, alpha), np.where(np.arange(u) == 1, 1.0, beta))):
        with jax.enable_x64(True):
            game = lambda masks: jnp.prod(jnp.where(masks[:, :u], a, b), axis=1)[:, None]  # noqa: E731
            terms, _, _ = exact_interactions(game, m, index, order)
            nodes, weights = rule(index, order, u)
            got = product_terms(jnp.asarray(a)[None, :, None], jnp.asarray(b)[None, :, None], nodes, weights,
                                range(1, order + 1))
        for t in range(1, order + 1):
            mine = np.asarray(got[t]).reshape((u,) * t)
            ref = np.asarray(terms[t - 1])[(slice(0, u),) * t][..., 0]
            np.testing.assert_allclose(mine, ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("index", ["SII", "STII"])
@pytest.mark.parametrize("n_paths,n_slots,n_rows", [(1, 12, 3), (1, 6, 8), (3, 12, 8), (2, 5, 1)])
def test_product_terms_compiled_on_blocks_of_one_path(index, n_paths, n_slots, n_rows):
    """Compiled, the interior nodes' batched dot equals the zero-counting form on every node
    (``interior=0``, checked against the definition above), on blocks of one path too: a
    multiply-and-sum over the node axis in place of the dot gave wrong order-3 sums there (values
    near 1e28; jaxlib 0.10.2's CPU fusions), while the same code run eagerly was right."""
    rng = np.random.default_rng(n_slots * n_rows)
    shape = (n_paths, n_slots, n_rows)
    alpha = jnp.asarray(rng.random(shape) < 0.5, jnp.float32)
    beta = jnp.asarray(rng.uniform(0.05, 1.0, shape[:2] + (1,)) * (rng.random(shape[:2] + (1,)) > 0.2), jnp.float32)
    nodes, weights = rule(index, 3, n_slots)
    terms = jax.jit(product_terms, static_argnums=(4, 5))
    fast = terms(alpha, beta, nodes, weights, (1, 2, 3), interior_nodes(nodes))
    counted = terms(alpha, beta, nodes, weights, (1, 2, 3), 0)
    for t in (1, 2, 3):
        scale = float(np.abs(np.asarray(counted[t])).max())
        assert scale > 0 or (index == "STII" and t < 3)  # STII's lower orders at p = 0 may all vanish
        np.testing.assert_allclose(np.asarray(fast[t]), np.asarray(counted[t]), rtol=0, atol=1e-5 * scale)


def test_follows_on_device_equals_follows_on_host():
    """``follows`` (JAX, rows along the minor axis) and ``follows_host`` (NumPy) on numeric, missing
    and categorical slots, including negative and unseen category codes."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    n = 300
    a, b, c = rng.normal(size=n), rng.normal(size=n), rng.integers(0, 40, size=n)
    df = pd.DataFrame({"a": a, "c": pd.Categorical(c, categories=range(40)), "b": b})
    y = np.sin(c * 1.3) + a * (b > 0)
    model = xgb.XGBRegressor(n_estimators=3, max_depth=4, enable_categorical=True, tree_method="hist").fit(df, y)
    paths = decompose(import_model(model))
    assert paths.cat is not None and paths.cat.any()
    X = np.column_stack([a, c.astype(np.float64), b]).astype(np.float32)[:64]
    X[::5, 0] = np.nan
    X[1::7, 1] = np.nan
    X[2::9, 1] = -1.0
    X[3::11, 1] = 45.0
    slots = {k: jnp.asarray(v) for k, v in host_slots(paths, np.float32).items()}
    on_device = np.moveaxis(np.asarray(follows(slots, jnp.asarray(X.T))), 2, 0)
    np.testing.assert_array_equal(on_device, follows_host(paths, X))


def test_kernel_programs_do_not_grow_with_the_path():
    """The path kernels are products and sums over the slot and node axes: a path of 24 slots (12
    nodes) compiles to a program of the same size as one of 4 (2 nodes)."""

    def lines(fn, u, q, *shapes):
        args = [jax.ShapeDtypeStruct(s(u, q), np.float32) for s in shapes]
        return jax.jit(fn).lower(*args).as_text().count("\n")

    def shapley(a1, g, vw, follow):
        params = {"A1": a1, "A0": a1, "G": g, "vw": vw, "zpos": follow[:, :, 0] > 0}
        return shapley_block(params, follow > 0)

    shapes = (lambda u, q: (7, u, q), lambda u, q: (7, u + 1, q), lambda u, q: (7, q), lambda u, q: (7, u, 5))
    assert lines(shapley, 24, 12, *shapes) == lines(shapley, 4, 2, *shapes)

    def terms(u):
        nodes, weights = rule("SII", 2, u)
        fn = lambda a, b: product_terms(a, b, nodes, weights, (1, 2))  # noqa: E731
        return jax.jit(fn).lower(*[jax.ShapeDtypeStruct((7, u, 5), np.float32)] * 2).as_text().count("\n")

    assert terms(24) == terms(4)


def _deep_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 14)).astype(np.float32)
    y = X.sum(1) + np.sin(5 * X[:, 0]) * X[:, 1] + rng.normal(size=400)
    model = xgb.XGBRegressor(n_estimators=2, max_depth=20, min_child_weight=0, reg_lambda=0.0, random_state=0)
    return model.fit(X, y), X


def test_depth_up_to_20_works_both_modes():
    model, X = _deep_model()
    paths = decompose(import_model(model))
    assert paths.length.max() > 10  # some paths are evaluated directly, not tabulated
    rows = X[:4]
    margin = model.predict(rows, output_margin=True)
    contribs = model.get_booster().predict(xgb.DMatrix(rows), pred_contribs=True)
    for data in (None, X[200:208]):
        ex = jaxshap.TreeExplainer(model, data)
        if data is not None:  # the long paths meet the background in chunks, not in tables
            assert not all("table" in g["blocks"] for g in ex._default.groups)
        expl = ex(rows)
        total = np.asarray(expl.values, np.float64).sum(1) + np.asarray(expl.base_values)
        np.testing.assert_allclose(total, margin, rtol=0, atol=5e-5)
        if data is None:
            np.testing.assert_allclose(np.asarray(expl.values), contribs[:, :-1], rtol=1e-3, atol=5e-5)


def test_path_tables_past_the_memory_budget_raise_a_clear_error():
    model, X = _deep_model()
    with pytest.raises(ValueError, match="memory_budget"):
        decompose(import_model(model), max_bytes=10_000)


def test_trailing_single_leaf_trees():
    """Boosting that has nothing left to fit ends with single-leaf trees (depth 0); when the last
    tree is one, the path walk used to index past its entries (IndexError)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2, learning_rate=1.0, base_score=0.0, n_jobs=1).fit(X, y)
    assert [d.count("leaf") for d in model.get_booster().get_dump()][-1] == 1  # the case under test
    theirs = model.get_booster().predict(xgb.DMatrix(X[:5]), pred_contribs=True)
    for data in (None, X[:20]):
        expl = jaxshap.TreeExplainer(model, data)(X[:5])
        if data is None:
            np.testing.assert_allclose(np.asarray(expl.values), theirs[:, :3], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            np.asarray(expl.values.sum(1) + expl.base_values), model.predict(X[:5]), rtol=1e-5, atol=1e-5
        )


def _deep_lightgbm():
    """A LightGBM model whose leaf-wise trees chain through up to 28 distinct features (a run of
    features above -2 from the first one is the target)."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 30))
    y = np.cumprod(X > -2.0, axis=1).sum(1) + 0.01 * rng.normal(size=4000)
    model = lgb.LGBMRegressor(n_estimators=3, num_leaves=40, min_child_samples=3, learning_rate=1.0, verbose=-1)
    return model.fit(X, y), X


def test_lightgbm_paths_of_24_and_more_features_are_exact(monkeypatch):
    """Unbounded LightGBM trees: the node count follows the widest path (28 slots, 14 nodes), so the
    values do not move with more nodes, sum to the prediction to 1e-12 (float64, LightGBM's own
    precision) and equal LightGBM's and shap's TreeSHAP (which drift by 5e-9 on this model)."""
    model, X = _deep_lightgbm()
    assert decompose(import_model(model)).length.max() >= 24
    rows = X[:40]
    expl = jaxshap.TreeExplainer(model)(rows)
    values = np.asarray(expl.values)
    assert values.dtype == np.float64
    margin = model.predict(rows, raw_score=True)
    np.testing.assert_allclose(values.sum(1) + np.asarray(expl.base_values), margin, rtol=0, atol=1e-12)
    np.testing.assert_allclose(values, model.predict(rows, pred_contrib=True)[:, :-1], rtol=0, atol=1e-7)
    import jaxshap._tree._quadrature as quadrature

    nodes = quadrature.gauss_legendre
    monkeypatch.setattr(quadrature, "gauss_legendre", lambda n: nodes(n + 6))
    more = np.asarray(jaxshap.TreeExplainer(model)(rows).values)
    np.testing.assert_allclose(more, values, rtol=0, atol=1e-12)


def test_lightgbm_deep_paths_interventional_match_shap():
    """Paths of up to 28 features against the background in chunks: shap's values (whose own sum
    misses the prediction by 1e-6 here) to 2e-6, and the prediction to 1e-12."""
    shap = pytest.importorskip("shap")
    model, X = _deep_lightgbm()
    rows, bg = X[:6], X[-40:]
    ours = jaxshap.TreeExplainer(model, bg)(rows)
    theirs = shap.TreeExplainer(model, bg, feature_perturbation="interventional")(rows)
    np.testing.assert_allclose(np.asarray(ours.values), theirs.values, rtol=0, atol=2e-6)
    np.testing.assert_allclose(np.asarray(ours.values).sum(1) + np.asarray(ours.base_values),
                               model.predict(rows, raw_score=True), rtol=0, atol=1e-12)
