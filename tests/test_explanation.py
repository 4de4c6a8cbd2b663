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
