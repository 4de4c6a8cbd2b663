"""The global effects on a DataFrame with a scikit-learn pipeline fitted on it: the pipeline picks
its columns by name and one-hot encodes a pandas ``category`` column, so it cannot take a matrix
of numbers. Each result is checked against a brute-force oracle that calls the pipeline on frames
it builds itself from the category codes."""

import numpy as np
import pytest

import jaxshap
from ale_oracle import oracle_categorical, oracle_first

pd = pytest.importorskip("pandas")
sklearn = pytest.importorskip("sklearn")
from sklearn.compose import make_column_transformer  # noqa: E402
from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder  # noqa: E402

COLORS = ["red", "green", "blue", "amber"]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    n = 240
    color = rng.integers(0, 4, n)
    x0 = (rng.normal(size=n) + 0.4 * color).astype(np.float32).astype(np.float64)  # exact in float32 too
    x1 = rng.normal(size=n).astype(np.float32).astype(np.float64)
    frame = pd.DataFrame({"x0": x0, "color": pd.Categorical.from_codes(color, COLORS), "x1": x1})
    y = 2 * x0 + np.array([1.5, 0.0, -1.0, 0.5])[color] * (1 + x1) + 0.1 * rng.normal(size=n)
    encode = make_column_transformer((OneHotEncoder(), ["color"]), remainder="passthrough")
    pipe = make_pipeline(encode, HistGradientBoostingRegressor(max_iter=40, random_state=0)).fit(frame, y)
    codes = np.stack([x0, color.astype(np.float64), x1], axis=1)

    def on_codes(rows):  # the oracle's model: the frame built here, from codes
        rows = np.asarray(rows, np.float64)
        labels = pd.Categorical.from_codes(rows[:, 1].astype(int), COLORS)
        return pipe.predict(pd.DataFrame({"x0": rows[:, 0], "color": labels, "x1": rows[:, 2]}))

    return frame, pipe, codes, on_codes


def test_numbers_alone_fail_for_this_pipeline(fitted):
    frame, pipe, codes, _ = fitted
    with pytest.raises(ValueError, match="only supported for dataframes"):
        pipe.predict(codes)


def test_ale_on_a_frame_calls_the_pipeline_with_frames(fitted):
    frame, pipe, codes, on_codes = fitted
    numeric = jaxshap.accumulated_local_effects(pipe.predict, frame, "x0", n_bins=8, n_bootstrap=0)
    edges, want = oracle_first(on_codes, codes, 0, 8)
    np.testing.assert_allclose(np.asarray(numeric.grid), edges, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(numeric.values), want, rtol=0, atol=1e-5)
    assert numeric.labels is None

    categorical = jaxshap.accumulated_local_effects(pipe.predict, frame, "color", n_bootstrap=0)
    order, want = oracle_categorical(on_codes, codes, 1, {1})
    assert categorical.categorical and list(np.asarray(categorical.grid)) == order
    assert categorical.labels == tuple(COLORS[int(c)] for c in order)
    np.testing.assert_allclose(np.asarray(categorical.values), want, rtol=0, atol=1e-5)
    assert np.ptp(want) > 0.5  # the categories do matter


def test_ale_plot_names_the_categories(fitted):
    plt = pytest.importorskip("matplotlib.pyplot")
    frame, pipe, _, _ = fitted
    result = jaxshap.accumulated_local_effects(pipe.predict, frame, "color", n_bootstrap=5)
    ax = jaxshap.plots.ale(result)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(result.labels)
    plt.close(ax.figure)


def test_partial_dependence_on_a_frame(fitted):
    frame, pipe, codes, on_codes = fitted
    pd_color = jaxshap.partial_dependence(pipe.predict, frame, "color")
    np.testing.assert_array_equal(np.asarray(pd_color.grid), [0, 1, 2, 3])  # every code, not quantiles
    for g, value in zip(range(4), np.asarray(pd_color.values)):
        moved = codes.copy()
        moved[:, 1] = g
        np.testing.assert_allclose(value, on_codes(moved).mean(), rtol=0, atol=1e-5)
    pd_x0 = jaxshap.partial_dependence(pipe.predict, frame, "x0", grid=[-1.0, 0.5])
    for g, value in zip((-1.0, 0.5), np.asarray(pd_x0.values)):
        moved = codes.copy()
        moved[:, 0] = g
        np.testing.assert_allclose(value, on_codes(moved).mean(), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"`grid`: feature 'color' is a pandas category column.*integers 0 to 3"):
        jaxshap.partial_dependence(pipe.predict, frame, "color", grid=[0.0, 1.5])
    with pytest.raises(ValueError, match=r"`grid`: feature 'color'"):
        jaxshap.partial_dependence(pipe.predict, frame, "color", grid=[4.0])


def test_functional_anova_and_h_statistic_on_a_frame(fitted):
    frame, pipe, codes, on_codes = fitted
    names = list(frame.columns)
    fanova = jaxshap.functional_anova(pipe.predict, frame, max_order=3, n_max=60)
    same = jaxshap.functional_anova(on_codes, codes, max_order=3, n_max=60, feature_names=names)
    assert fanova.components.keys() == same.components.keys()
    for s in fanova.components:
        np.testing.assert_allclose(np.asarray(fanova.components[s]), np.asarray(same.components[s]),
                                   rtol=0, atol=1e-5)
    h = jaxshap.h_statistic(pipe.predict, frame, n_max=60)
    h_same = jaxshap.h_statistic(on_codes, codes, n_max=60, feature_names=names)
    np.testing.assert_allclose(np.asarray(h.pairwise), np.asarray(h_same.pairwise), rtol=1e-5, atol=1e-7)
    assert float(np.max(np.asarray(h.pairwise))) > 0.05  # color and x1 interact in the pipeline's model


def test_a_host_model_given_float64_rows_gets_them_in_float64():
    """As the explainers do: outside JAX's x64 mode the rows would reach the model rounded to
    float32, and a tree splits between data values, where an ALE puts its rows."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))  # float64 values that float32 cannot hold
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.1 * rng.normal(size=300)
    tree = HistGradientBoostingRegressor(max_iter=50, random_state=0).fit(X, y)
    ale = jaxshap.accumulated_local_effects(tree.predict, X, 0, n_bins=10, n_bootstrap=0)
    edges, want = oracle_first(tree.predict, X, 0, 10)
    np.testing.assert_array_equal(np.asarray(ale.grid), edges)  # the data's values, not their float32 roundings
    scale = np.ptp(want)
    np.testing.assert_allclose(np.asarray(ale.values), want, rtol=0, atol=1e-6 * scale)  # the model's float32 outputs
    pd_x0 = jaxshap.partial_dependence(tree.predict, X, 0, grid=edges)
    means = [tree.predict(np.where(np.arange(3) == 0, e, X)).mean() for e in edges]
    np.testing.assert_allclose(np.asarray(pd_x0.values), means, rtol=0, atol=1e-6 * scale)
    assert np.asarray(ale.values).dtype == np.float64


def test_a_text_column_is_refused_with_the_way_to_a_category_column(fitted):
    frame, pipe, _, _ = fitted
    text = frame.assign(color=frame["color"].astype(str))
    for call in (lambda: jaxshap.accumulated_local_effects(pipe.predict, text, "x0"),
                 lambda: jaxshap.partial_dependence(pipe.predict, text, "x0"),
                 lambda: jaxshap.PermutationExplainer(pipe.predict, text.iloc[:20])):
        with pytest.raises(TypeError, match=r"'color' \(\w+\)\. Make a text column a pandas category column "
                                            r"\(`df\[col\]\.astype\('category'\)`\)"):
            call()
    back = text.assign(color=pd.Categorical(text["color"], COLORS))  # what the message asks for works
    result = jaxshap.accumulated_local_effects(pipe.predict, back, "color", n_bootstrap=0)
    assert set(result.labels) == set(COLORS)
