"""Building a TreeExplainer: vectorised path tables, deep trees, the memory guard.

Oracles: the per-pattern kernels (``path_shapley``, the pair closed form) evaluated pattern by
pattern, the library's own predictions (efficiency) and brute force over the path-dependent game.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxshap

xgb = pytest.importorskip("xgboost")

from jaxshap._tree._import import import_model  # noqa: E402
from jaxshap._tree._interventional import interventional_tables_host, pattern_table  # noqa: E402
from jaxshap._tree._path_dependent import path_shapley, path_tables_host  # noqa: E402
from jaxshap._tree._paths import decompose, follows, follows_host, slot_arrays  # noqa: E402


@pytest.mark.parametrize("u", [1, 2, 4, 6, 12])
def test_tables_equal_pattern_by_pattern_kernels(u):
    rng = np.random.default_rng(u)
    p, b = 5, 37
    z = rng.random((p, u))
    z[0, 0] = 0.0  # a zero fraction (a child with no cover)
    bits = ((np.arange(2**u)[:, None] >> np.arange(u)) & 1).astype(bool)
    per_pattern = jax.jit(jax.vmap(jax.vmap(path_shapley, (None, 0)), (0, None)))
    direct = np.asarray(per_pattern(z.astype(np.float32), bits))
    np.testing.assert_allclose(path_tables_host(z, max_chunk_bytes=1), direct, rtol=2e-5, atol=1e-6)
    codes = rng.integers(0, 2**u, size=(b, p))
    pair = pattern_table(u, np.float64)
    expected = np.stack([pair[:, codes[:, i], :].mean(1) for i in range(p)])
    np.testing.assert_allclose(interventional_tables_host(codes, u, max_chunk_bytes=1), expected, rtol=0, atol=1e-14)


def test_follows_on_device_equals_follows_on_host():
    """``follows`` (JAX, one row) and ``follows_host`` (NumPy, many rows) on numeric, missing and
    categorical slots, including negative and unseen category codes."""
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
    on_device = jax.vmap(follows, (None, 0))(slot_arrays(paths, np.float32), X)
    np.testing.assert_array_equal(np.asarray(on_device), follows_host(paths, X))


def test_path_kernel_program_does_not_grow_with_the_path():
    """``path_shapley`` loops over the slots inside the program (``lax.scan``): a path of 20 slots
    compiles to the same program as one of 4. Unrolled, its products grew into fused kernels whose
    compilation took seconds on depth-20 trees."""

    def lines(u):
        args = (jax.ShapeDtypeStruct((7, u), np.float32), jax.ShapeDtypeStruct((7, u), np.bool_))  # 7 paths
        return jax.jit(jax.vmap(path_shapley)).lower(*args).as_text().count("\n")

    assert lines(20) == lines(4)


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
        assert not all(ex._group_tabled)
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
