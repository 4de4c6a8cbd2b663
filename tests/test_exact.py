"""ExactExplainer against the brute-force oracle and shap.ExactExplainer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_mlp
from oracle import interventional_shapley

import jaxshap


@pytest.mark.parametrize("seed,n_features", [(0, 3), (1, 5), (2, 6)])
def test_matches_oracle_on_random_mlps(seed, n_features):
    params, apply = make_mlp(seed, n_features)
    model = lambda X: apply(params, X)
    rng = np.random.default_rng(seed)
    background = rng.normal(size=(7, n_features)).astype(np.float32)
    X = rng.normal(size=(4, n_features)).astype(np.float32)

    expl = jaxshap.ExactExplainer(model, background)(X)
    expected = interventional_shapley(lambda Z: np.asarray(model(jnp.asarray(Z, jnp.float32))), X, background)

    assert expl.values.shape == (4, n_features)
    np.testing.assert_allclose(expl.values, expected, rtol=1e-4, atol=1e-5)
    base = np.asarray(model(background)).mean()
    np.testing.assert_allclose(expl.base_values, np.full(4, base), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(expl.values.sum(1) + expl.base_values, model(X), rtol=1e-5, atol=1e-5)
    assert expl.stderr is None


def test_multi_output_shapes_and_oracle():
    params, apply = make_mlp(3, 4, n_outputs=3)
    model = lambda X: apply(params, X)
    rng = np.random.default_rng(3)
    background = rng.normal(size=(5, 4)).astype(np.float32)
    X = rng.normal(size=(3, 4)).astype(np.float32)

    expl = jaxshap.ExactExplainer(model, background)(X)
    expected = interventional_shapley(lambda Z: np.asarray(model(jnp.asarray(Z, jnp.float32))), X, background)

    assert expl.values.shape == (3, 4, 3)
    assert expl.base_values.shape == (3, 3)
    assert expl.output_names == ["Output 0", "Output 1", "Output 2"]
    np.testing.assert_allclose(expl.values, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(expl.values.sum(1) + expl.base_values, model(X), rtol=1e-5, atol=1e-5)


def test_numpy_callable_sklearn_model():
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(4)
    data = rng.normal(size=(200, 4))
    target = data[:, 0] * data[:, 1] + np.sin(data[:, 2])
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(data, target)
    background, X = data[:10], data[10:14]

    expl = jaxshap.ExactExplainer(model.predict, background)(X)
    expected = interventional_shapley(model.predict, X.astype(np.float32), background.astype(np.float32))

    np.testing.assert_allclose(expl.values, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(expl.values.sum(1) + expl.base_values, model.predict(X), rtol=1e-4, atol=1e-4)


def test_chunking_does_not_change_results():
    params, apply = make_mlp(5, 6)
    model = lambda X: apply(params, X)
    rng = np.random.default_rng(5)
    background = rng.normal(size=(9, 6)).astype(np.float32)
    X = rng.normal(size=(7, 6)).astype(np.float32)

    whole = jaxshap.ExactExplainer(model, background)(X)
    # 2 KiB forces both row chunking and coalition chunking (with padding of ragged chunks).
    tiny = jaxshap.ExactExplainer(model, background, memory_budget=2048)(X)
    np.testing.assert_allclose(tiny.values, whole.values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tiny.base_values, whole.base_values, rtol=1e-6, atol=1e-6)


def test_agrees_with_shap_exact_explainer():
    shap = pytest.importorskip("shap")
    params, apply = make_mlp(6, 6)
    jitted = jax.jit(lambda X: apply(params, X))
    numpy_model = lambda X: np.asarray(jitted(np.asarray(X, np.float32)))
    rng = np.random.default_rng(6)
    background = rng.normal(size=(20, 6)).astype(np.float32)
    X = rng.normal(size=(5, 6)).astype(np.float32)

    ours = jaxshap.ExactExplainer(jitted, background)(X)
    masker = shap.maskers.Independent(background, max_samples=len(background))
    theirs = shap.ExactExplainer(numpy_model, masker)(X)

    np.testing.assert_allclose(ours.values, theirs.values, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.base_values, theirs.base_values, rtol=1e-5, atol=1e-5)


def test_dataframe_feature_names():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    columns = ["age", "income", "height"]
    background = pd.DataFrame(rng.normal(size=(6, 3)), columns=columns)
    X = pd.DataFrame(rng.normal(size=(2, 3)), columns=columns)
    model = lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 2]

    expl = jaxshap.ExactExplainer(model, background)(X)
    assert expl.feature_names == columns
    np.testing.assert_allclose(expl.data, X.to_numpy(), rtol=1e-6)
    named = jaxshap.ExactExplainer(model, background.to_numpy(), feature_names=["a", "b", "c"])(X.to_numpy())
    assert named.feature_names == ["a", "b", "c"]
    plain = jaxshap.ExactExplainer(model, background.to_numpy())(X.to_numpy())
    assert plain.feature_names == ["Feature 0", "Feature 1", "Feature 2"]


def test_float64_under_x64():
    with jax.enable_x64(True):
        rng = np.random.default_rng(8)
        w = rng.normal(size=(4, 5))
        model = lambda Z: jnp.sin(Z @ w).sum(-1) * Z[:, 0]
        background = rng.normal(size=(6, 4))
        X = rng.normal(size=(3, 4))
        expl = jaxshap.ExactExplainer(model, background)(X)
        assert expl.values.dtype == jnp.float64
        expected = interventional_shapley(lambda Z: np.asarray(model(jnp.asarray(Z))), X, background)
        np.testing.assert_allclose(expl.values, expected, rtol=1e-10, atol=1e-12)


def test_single_row_is_promoted():
    model = lambda Z: Z[:, 0] - 2 * Z[:, 1]
    background = np.zeros((3, 2), np.float32)
    expl = jaxshap.ExactExplainer(model, background)(np.array([1.0, 1.0], np.float32))
    np.testing.assert_allclose(expl.values, [[1.0, -2.0]], atol=1e-6)
