"""The Explanation pytree and its conversion to shap.Explanation for shap's plots."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap


def explain(n_outputs=None):
    rng = np.random.default_rng(31)
    w = rng.normal(size=(4,) + (() if n_outputs is None else (n_outputs,))).astype(np.float32)
    model = lambda Z: jnp.tanh(Z) @ w
    background = rng.normal(size=(8, 4)).astype(np.float32)
    X = rng.normal(size=(10, 4)).astype(np.float32)
    return jaxshap.ExactExplainer(model, background, feature_names=["a", "b", "c", "d"])(X)


def test_pytree_roundtrip_keeps_metadata():
    expl = explain()
    leaves, treedef = jax.tree_util.tree_flatten(expl)
    assert len(leaves) == 3  # values, base_values, data (stderr is None)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert rebuilt.feature_names == ["a", "b", "c", "d"]
    doubled = jax.tree_util.tree_map(lambda a: 2 * a, expl)
    np.testing.assert_allclose(doubled.values, 2 * expl.values)
    assert isinstance(expl.values, jax.Array)
    assert np.asarray(expl.values).shape == (10, 4)


def test_row_indexing():
    expl = explain()
    one = expl[3]
    assert one.values.shape == (4,) and one.feature_names == expl.feature_names
    np.testing.assert_allclose(expl[2:5].values, expl.values[2:5])
    with pytest.raises(TypeError, match="row indexing only"):
        expl[:, 0]


@pytest.mark.parametrize("n_outputs", [None, 2])
def test_to_shap_and_plots_render(n_outputs, tmp_path):
    shap = pytest.importorskip("shap")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    expl = explain(n_outputs).to_shap()
    assert isinstance(expl, shap.Explanation)
    assert isinstance(expl.values, np.ndarray) and isinstance(expl.base_values, np.ndarray)
    assert expl.feature_names == ["a", "b", "c", "d"]
    if n_outputs is not None:
        assert expl.values.shape == (10, 4, 2)
        expl = expl[:, :, 1]
    plots = {
        "waterfall": lambda: shap.plots.waterfall(expl[0], show=False),
        "beeswarm": lambda: shap.plots.beeswarm(expl, show=False),
        "bar": lambda: shap.plots.bar(expl, show=False),
        "scatter": lambda: shap.plots.scatter(expl[:, "a"], show=False),
    }
    for name, draw in plots.items():
        draw()
        path = tmp_path / f"{name}.png"
        plt.gcf().savefig(path)
        plt.close("all")
        assert path.stat().st_size > 1000


def render(draw, path):
    import matplotlib.pyplot as plt

    draw()
    plt.gcf().savefig(path)
    plt.close("all")
    return path.stat().st_size


@pytest.mark.parametrize("n_outputs", [None, 2])
def test_to_shap_sampled_dataframe_and_single_rows(n_outputs, tmp_path):
    """Feature names from DataFrame columns, a sampled result (stderr -> error_std), one row,
    and scatter coloured by the whole explanation or by another feature."""
    shap = pytest.importorskip("shap")
    pd = pytest.importorskip("pandas")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    rng = np.random.default_rng(32)
    w = rng.normal(size=(3,) + (() if n_outputs is None else (n_outputs,))).astype(np.float32)
    model = lambda Z: jnp.tanh(Z) @ w
    X = pd.DataFrame(rng.normal(size=(12, 3)).astype(np.float32), columns=["age", "bmi", "bp"])
    expl = jaxshap.PermutationExplainer(model, X.iloc[:6], n_permutations=4)(X, key=jax.random.key(1))
    assert expl.feature_names == ["age", "bmi", "bp"] and expl.stderr is not None

    full = expl.to_shap()
    assert full.feature_names == ["age", "bmi", "bp"]
    np.testing.assert_array_equal(full.error_std, np.asarray(expl.stderr))
    one = expl[3].to_shap()  # a single row of the jaxshap result, converted on its own
    np.testing.assert_array_equal(one.values, np.asarray(expl.values)[3])
    outputs = [None] if n_outputs is None else range(n_outputs)
    for k in outputs:
        sub, row = (full, one) if k is None else (full[:, :, k], one[:, k])
        assert np.ndim(row.base_values) == 0
        np.testing.assert_allclose(row.values.sum() + row.base_values, np.asarray(model(X.to_numpy()))[3] if k is None
                                   else np.asarray(model(X.to_numpy()))[3, k], rtol=1e-5, atol=1e-5)
        plots = {
            "waterfall_row": lambda: shap.plots.waterfall(row, show=False),
            "bar_row": lambda: shap.plots.bar(row, show=False),
            "scatter_color_all": lambda: shap.plots.scatter(sub[:, "bmi"], color=sub, show=False),
            "scatter_color_one": lambda: shap.plots.scatter(sub[:, "bmi"], color=sub[:, "age"], show=False),
            "beeswarm": lambda: shap.plots.beeswarm(sub, show=False),
        }
        for name, draw in plots.items():
            assert render(draw, tmp_path / f"{name}_{k}.png") > 1000, name
