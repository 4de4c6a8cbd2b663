"""The Explanation pytree and its conversion to shap.Explanation for shap's plots."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap


@functools.lru_cache(maxsize=None)
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
    assert all(isinstance(a, jax.Array) for a in leaves)  # the pytree's leaves are JAX arrays
    assert isinstance(expl.values, np.ndarray)  # and what a user reads outside a trace is NumPy
    assert np.asarray(expl.values).shape == (10, 4)


def test_row_indexing():
    expl = explain()
    one = expl[3]
    assert one.values.shape == (4,) and one.feature_names == expl.feature_names
    np.testing.assert_allclose(expl[2:5].values, expl.values[2:5])
    with pytest.raises(IndexError, match="too many indices"):
        expl[:, 0, 0]


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


# --- shap-style indexing, reductions, sampling, cohorts and saving, checked against shap itself ---
def _pair(n_outputs=None, classes=None):
    """A jaxshap Explanation and the shap.Explanation holding the same arrays and names."""
    shap = pytest.importorskip("shap")
    expl = explain(n_outputs)
    if classes is not None:
        expl = jaxshap.Explanation(expl.values, expl.base_values, expl.data, None, expl.feature_names, classes)
    ref = shap.Explanation(
        np.asarray(expl.values), np.asarray(expl.base_values), np.asarray(expl.data),
        feature_names=expl.feature_names, output_names=classes,
    )
    return expl, ref


def _same(ours, ref):
    np.testing.assert_array_equal(np.asarray(ours.values), np.asarray(ref.values))
    np.testing.assert_array_equal(np.asarray(ours.data), np.asarray(ref.data))
    np.testing.assert_array_equal(np.asarray(ours.base_values), np.asarray(ref.base_values))
    names = ref.feature_names
    assert ours.feature_names == (list(names) if not isinstance(names, str) else names)


@pytest.mark.parametrize(
    "index",
    [0, slice(2, 5), (slice(None), "b"), (slice(None), 2), (slice(None), ["d", "a"]), (3, "c"), ([1, 4, 7],),
     (np.arange(10) % 3 == 0,)],
    ids=["row", "rows", "feature-name", "feature-pos", "feature-list", "row-and-name", "row-list", "row-mask"],
)
def test_indexing_matches_shap_single_output(index):
    ours, ref = _pair()
    _same(ours[index], ref[index])


@pytest.mark.parametrize(
    "index",
    [(Ellipsis, 1), (slice(None), slice(None), "virginica"), (0, Ellipsis, 0), (slice(None), "a", 1), (2,)],
    ids=["ellipsis-output", "output-name", "row-ellipsis", "feature-and-output", "row"],
)
def test_indexing_matches_shap_multi_output(index):
    ours, ref = _pair(2, ["setosa", "virginica"])
    sub = ours[index]
    _same(sub, ref[index])
    if index == (slice(None), slice(None), "virginica"):
        assert sub.output_names == "virginica" and sub.values.shape == (10, 4)


def test_unknown_names_and_row_names_are_errors():
    ours, _ = _pair(2, ["setosa", "virginica"])
    with pytest.raises(IndexError, match="'bmi' is not one of the feature names"):
        ours[:, "bmi"]
    with pytest.raises(IndexError, match="'cat' is not one of the output names"):
        ours[..., "cat"]
    with pytest.raises(IndexError, match="rows are indexed by position"):
        ours["a"]


@pytest.mark.parametrize("op", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_reductions_match_shap(op, axis):
    ours, ref = _pair()
    got, want = getattr(ours.abs, op)(axis), getattr(ref.abs, op)(axis)
    np.testing.assert_allclose(np.asarray(got.values), want.values, rtol=1e-6)
    if axis == 0:
        np.testing.assert_allclose(np.asarray(got.data), want.data, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got.base_values), want.base_values, rtol=1e-6)
        assert got.feature_names == list(want.feature_names)


def test_mean_over_rows_then_bar_plot(tmp_path):
    shap = pytest.importorskip("shap")
    pytest.importorskip("matplotlib")
    ours, _ = _pair(2, ["setosa", "virginica"])
    glob = ours[..., "virginica"].abs.mean(0)
    assert glob.values.shape == (4,) and glob.feature_names == ["a", "b", "c", "d"]
    np.testing.assert_allclose(np.asarray(glob.values), np.abs(np.asarray(ours.values)[..., 1]).mean(0), rtol=1e-6)
    assert render(lambda: shap.plots.bar(glob.to_shap(), show=False), tmp_path / "bar.png") > 1000


def test_sample_draws_shaps_rows():
    ours, ref = _pair()
    for n, replace in [(4, False), (20, False), (6, True)]:
        _same(ours.sample(n, replace=replace, random_state=3), ref.sample(n, replace=replace, random_state=3))
    with pytest.raises(ValueError, match="no row axis"):
        ours.mean(0).sample(2)


def test_cohorts_by_labels_and_by_tree_match_shap():
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(4)
    data = rng.normal(size=(40, 3)).astype(np.float32)
    values = np.where(data[:, :1] > 0.3, 1.0, -1.0) * np.array([1.0, 0.1, 0.0], np.float32) + 0.01 * data
    ours = jaxshap.Explanation(values, np.zeros(40, np.float32), data, feature_names=["x", "y", "z"])
    ref = shap.Explanation(values, np.zeros(40), data, feature_names=["x", "y", "z"])
    for n in (2, 3):
        got, want = ours.cohorts(n), ref.cohorts(n)
        assert list(got.cohorts) == list(want.cohorts)  # same paths and thresholds as sklearn's tree
        for name in want.cohorts:
            np.testing.assert_array_equal(np.asarray(got.cohorts[name].values), want.cohorts[name].values)
    labels = np.where(data[:, 1] > 0, "high", "low")
    got, want = ours.cohorts(labels), ref.cohorts(labels)
    assert sorted(got.cohorts) == sorted(want.cohorts)
    np.testing.assert_allclose(np.asarray(got.abs.mean(0).cohorts["high"].values), want.abs.mean(0).cohorts["high"].values, rtol=1e-6)
    assert isinstance(got.to_shap(), shap.Cohorts)


@pytest.mark.parametrize("n_outputs", [None, 2])
def test_save_and_load_roundtrip(n_outputs, tmp_path):
    expl = explain(n_outputs)
    if n_outputs:
        expl = jaxshap.Explanation(expl.values, expl.base_values, expl.data, expl.values * 0.1, expl.feature_names, ["no", "yes"])
    for e in (expl, expl[:, "b"], expl.abs.mean(0)):
        path = tmp_path / "expl.npz"
        e.save(path)
        back = jaxshap.Explanation.load(path)
        np.testing.assert_array_equal(np.asarray(back.values), np.asarray(e.values))
        np.testing.assert_array_equal(np.asarray(back.base_values), np.asarray(e.base_values))
        np.testing.assert_array_equal(np.asarray(back.data), np.asarray(e.data))
        assert back.feature_names == e.feature_names and back.output_names == e.output_names
        assert (back.stderr is None) == (e.stderr is None) and back.shape == e.shape
        assert repr(back) == repr(e)


def test_indexing_keeps_a_pytree():
    expl = explain(2)[:, ["a", "c"], 1]
    leaves, treedef = jax.tree_util.tree_flatten(expl)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert back.feature_names == ["a", "c"] and back[:, "c"].values.shape == (10,)


def test_shap_plots_point_to_to_shap_and_jaxshap_plots_convert(tmp_path):
    shap = pytest.importorskip("shap")
    pytest.importorskip("matplotlib")
    expl = explain()
    # shap's force plot reads values, base values, data and names of any "...Explanation": as NumPy
    # they give the plot of the converted result
    for e in (expl, expl[0]):
        assert shap.plots.force(e).data == shap.plots.force(e.to_shap()).data
    with pytest.raises(AttributeError, match=r"not a shap.Explanation.*expl.to_shap\(\)"):
        expl.error_std  # a shap-only field points to to_shap()
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        expl.nothing
    assert render(lambda: jaxshap.plots.beeswarm(expl, show=False), tmp_path / "bees.png") > 1000
    assert render(lambda: jaxshap.plots.waterfall(expl[0], show=False), tmp_path / "water.png") > 1000
    assert render(lambda: jaxshap.plots.scatter(expl[:, "b"], color=expl, show=False), tmp_path / "dep.png") > 1000


def test_indexing_carries_interaction_values_when_present():
    """Row and output picks slice an interaction_values field [n, M, M(, K)]; a feature pick drops it."""
    expl = explain(2)
    expl = jaxshap.Explanation(expl.values, expl.base_values, expl.data, None, expl.feature_names, ["x", "y"])
    inter = np.arange(10 * 4 * 4 * 2, dtype=np.float32).reshape(10, 4, 4, 2)
    expl.interaction_values = inter
    np.testing.assert_array_equal(np.asarray(expl[3].interaction_values), inter[3])
    np.testing.assert_array_equal(np.asarray(expl[2:5, :, "y"].interaction_values), inter[2:5, ..., 1])
    assert expl[:, "a"].interaction_values is None
