"""The Explanation a shap user meets (issue 28, points 2 and 4), checked against shap itself.

Results are read as NumPy outside traced code, so shap's legacy plotting functions, NumPy and
pandas take them; the methods shap's plot notebooks use (``argsort``, ``flip``, ``percentile``,
``hclust``, ``sum(1)``, ``cohorts``, ``display_data``, ...) give what ``shap.Explanation`` gives on
the same arrays, and ``jaxshap.plots`` draws what ``shap.plots`` draws.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap

shap = pytest.importorskip("shap")
pd = pytest.importorskip("pandas")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

N_ROWS = 120


@functools.lru_cache(maxsize=None)
def world():
    """Diabetes rows as a DataFrame, an sklearn linear model (Exact) and a boosted forest (Tree)."""
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import LinearRegression

    X, y, names = jaxshap.datasets.load_diabetes()
    X = pd.DataFrame(X[:N_ROWS], columns=names)
    y = y[:N_ROWS]
    linear = LinearRegression().fit(X.to_numpy(), y)
    exact = jaxshap.ExactExplainer(linear.predict, X.iloc[:40].to_numpy())
    forest = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X.to_numpy(), y)
    tree = jaxshap.TreeExplainer(forest)
    return X, linear, exact, exact(X), tree, tree(X)


def pair():
    """The tree explanation and the shap.Explanation of the very same arrays and names."""
    *_, sv = world()
    ref = shap.Explanation(
        np.array(sv.values), np.array(sv.base_values), np.array(sv.data), feature_names=sv.feature_names
    )
    return sv, ref


def drawn(draw):
    """What a plot put on its figure: points, lines, bars, images and texts of every axes."""
    np.random.seed(0)  # shap's legacy summary plot shuffles its points
    result = draw()
    fig = result if isinstance(result, plt.Figure) else plt.gcf()
    out = []
    for ax in fig.axes:
        out.append({
            "points": [np.asarray(c.get_offsets()) for c in ax.collections],
            "lines": [np.asarray(line.get_xydata()) for line in ax.lines],
            "bars": [np.asarray(p.get_verts()) for p in ax.patches],
            "images": [np.asarray(im.get_array()) for im in ax.images],
            "texts": [t.get_text() for t in ax.texts],
            "labels": (ax.get_xlabel(), ax.get_ylabel(), [t.get_text() for t in ax.get_yticklabels()],
                       [t.get_text() for t in ax.get_xticklabels()]),
            "legend": None if ax.get_legend() is None else [t.get_text() for t in ax.get_legend().get_texts()],
        })
    plt.close("all")
    assert out, "nothing was drawn"
    return out


def assert_same_drawing(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a["texts"] == b["texts"] and a["labels"] == b["labels"] and a["legend"] == b["legend"]
        for key in ("points", "lines", "bars", "images"):
            assert len(a[key]) == len(b[key]), key
            for x, y in zip(a[key], b[key]):
                np.testing.assert_array_equal(x, y)


# --- 1. NumPy where shap users hand results to NumPy, pandas and shap's functions -------------
def test_accessors_are_numpy_outside_and_tracers_inside_the_leaves_stay_jax():
    X, linear, exact, sv, *_ = world()
    # a host model given float64 rows computes in float64 and keeps its result as NumPy leaves
    # (JAX arrays of float64 would be cut to float32 by the next JAX operation outside x64 mode)
    assert all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in jax.tree_util.tree_leaves(sv))
    jax_model = jaxshap.ExactExplainer(lambda R: R @ jnp.asarray(linear.coef_, jnp.float32), X.iloc[:8].to_numpy())
    assert all(isinstance(a, jax.Array) for a in jax.tree_util.tree_leaves(jax_model(X.iloc[:5].to_numpy())))
    for field in ("values", "base_values", "data"):
        assert type(getattr(sv, field)) is np.ndarray, field
    assert isinstance(sv[0].base_values, np.floating) and isinstance(sv[0, "bmi"].values, np.floating)
    total = sv.values.sum(1) + sv.base_values
    assert type(total) is np.ndarray
    np.testing.assert_allclose(total, linear.predict(X.to_numpy()), rtol=1e-4)
    seen = []

    def inside(Z):
        e = jaxshap.ExactExplainer(lambda R: R @ jnp.asarray(linear.coef_, jnp.float32), X.iloc[:8].to_numpy())(Z)
        seen.extend(type(getattr(e, f)) for f in ("values", "base_values", "data"))
        return e

    out = jax.jit(inside)(X.iloc[:5].to_numpy())
    assert seen and all(issubclass(t, jax.core.Tracer) for t in seen)
    assert type(out.values) is np.ndarray  # the result of jit is read as NumPy again
    grads = jax.grad(lambda w: (jaxshap.ExactExplainer(lambda R: R @ w, X.iloc[:8].to_numpy())(X.iloc[:3].to_numpy()).values ** 2).sum())(
        jnp.asarray(linear.coef_, jnp.float32))
    assert grads.shape == (10,) and np.isfinite(np.asarray(grads)).all()


def test_a_pandas_mask_from_values_and_expected_value():
    X, linear, exact, sv, *_ = world()
    ev = exact.expected_value
    pred = np.sort(linear.predict(X.to_numpy()))
    gap = int(np.argmax(np.diff(pred)[40:80])) + 40  # a threshold far from every prediction
    threshold = (pred[gap] + pred[gap + 1]) / 2
    mask = (sv.values.sum(1) + ev) > threshold
    assert type(mask) is np.ndarray and mask.dtype == bool
    picked = X[mask]  # pandas reads a NumPy bool array as a row mask
    pd.testing.assert_frame_equal(picked, X[linear.predict(X.to_numpy()) > threshold])


def test_expected_value_is_numpy_as_shaps():
    from sklearn.ensemble import RandomForestClassifier

    X, linear, exact, sv, tree, tsv = world()
    lin = jaxshap.LinearExplainer(linear, X.iloc[:80].to_numpy())  # fewer rows than shap subsamples
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X.to_numpy(), X["sex"] > 1.5)
    classes = jaxshap.TreeExplainer(forest)
    for ex, expl in ((exact, sv), (tree, tsv), (lin, lin(X))):
        ev = ex.expected_value
        assert isinstance(ev, np.floating) and np.ndim(ev) == 0, type(ev)
        np.testing.assert_allclose(ev, expl.base_values[0], rtol=1e-5)
    ev = classes.expected_value
    assert type(ev) is np.ndarray and ev.shape == (2,)
    np.testing.assert_allclose(ev, np.ravel(shap.TreeExplainer(forest).expected_value), rtol=1e-5)
    np.testing.assert_allclose(lin.expected_value, shap.LinearExplainer(linear, X.iloc[:80].to_numpy()).expected_value,
                               rtol=1e-5)


def test_force_plot_takes_values_and_expected_value():
    X, linear, exact, sv, *_ = world()
    ev = exact.expected_value
    plain_ev, plain = float(ev), np.array(sv.values)  # the same numbers as shap's own NumPy types
    ours = drawn(lambda: shap.force_plot(ev, sv.values[0, :], X.iloc[0, :], matplotlib=True, show=False))
    theirs = drawn(lambda: shap.force_plot(plain_ev, plain[0, :], X.iloc[0, :], matplotlib=True, show=False))
    assert_same_drawing(ours, theirs)
    one = shap.force_plot(ev, sv.values[0, :], X.iloc[0, :])  # the JavaScript form: a visualizer
    assert type(one).__name__ == "AdditiveForceVisualizer"
    assert one.data == shap.force_plot(plain_ev, plain[0, :], X.iloc[0, :]).data
    many = shap.force_plot(ev, sv.values[:5], X.iloc[:5])
    assert many.data == shap.force_plot(plain_ev, plain[:5], X.iloc[:5]).data


@pytest.mark.parametrize("source", ["values", "shap_values"])
def test_decision_plot(source):
    X, linear, exact, sv, *_ = world()
    ev = exact.expected_value
    values = sv.values[:10] if source == "values" else exact.shap_values(X.iloc[:10])
    ours = drawn(lambda: shap.decision_plot(ev, values, X.iloc[:10], show=False))
    # the same numbers as plain arrays (ten rows explained alone may differ from the same rows of
    # a larger call in the last bit: another block shape sums in another order)
    theirs = drawn(lambda: shap.decision_plot(float(ev), np.array(values), X.iloc[:10], show=False))
    assert_same_drawing(ours, theirs)


def test_dependence_and_summary_plots():
    X, linear, exact, sv, tree, tsv = world()
    plain = np.array(tsv.values)
    for draw in (
        lambda v: shap.dependence_plot("bmi", v, X, show=False),
        lambda v: shap.summary_plot(v, X, show=False),
        lambda v: shap.summary_plot(v, X, plot_type="bar", show=False),
    ):
        assert_same_drawing(drawn(lambda: draw(tsv.values)), drawn(lambda: draw(plain)))


# --- 2. the Explanation methods shap's plot notebooks use, against shap on the same arrays ----
def _shap_names_sample() -> bool:
    """Whether this shap's ``Explanation.sample`` records itself as ``"sample"`` in ``op_history``
    (shap 0.54; shap 0.51 left the indexing it does as ``"__getitem__"``)."""
    return shap.Explanation(np.zeros((2, 1))).sample(1).op_history[-1].name == "sample"


def _same(ours, ref, data=True):
    np.testing.assert_array_equal(np.asarray(ours.values), np.asarray(ref.values))
    if data:
        np.testing.assert_array_equal(np.asarray(ours.data), np.asarray(ref.data))
    ops = lambda e: [(o.name, tuple(o.prev_shape), o.collapsed_instances, dict(o.kwargs),  # noqa: E731
                      () if o.name == "__getitem__" else tuple(o.args)) for o in e.op_history]
    got = ops(ours.to_shap())
    if not _shap_names_sample():  # jaxshap records shap 0.54's "sample"; an older shap, its indexing
        got = [("__getitem__", *o[1:4], ()) if o[0] == "sample" else o for o in got]
    assert got == ops(ref)


CHAINS = {
    "abs": lambda e: e.abs,
    "abs.mean(0)": lambda e: e.abs.mean(0),
    "abs.max(0)": lambda e: e.abs.max(0),
    "sum(1)": lambda e: e.sum(1),
    "mean(1)": lambda e: e.mean(1),
    "argsort": lambda e: e.argsort,
    "flip": lambda e: e.flip,
    "abs.mean(0).argsort": lambda e: e.abs.mean(0).argsort,
    "abs.mean(0).argsort.flip": lambda e: e.abs.mean(0).argsort.flip,
    "sum(1).argsort.flip": lambda e: e.sum(1).argsort.flip,
    "abs.percentile(95, 0)": lambda e: e.abs.percentile(95, 0),
    "percentile(90, 1)": lambda e: e.percentile(90, 1),
    "percentile(50)": lambda e: e.percentile(50),
    "[:, age].percentile(1)": lambda e: e[:, "age"].percentile(1),
    "[:, bmi]": lambda e: e[:, "bmi"],
    "[3]": lambda e: e[3],
    "sample(30)": lambda e: e.sample(30),
    "sample(500, replace)": lambda e: e.sample(500, replace=True, random_state=2),
}


@pytest.mark.parametrize("chain", list(CHAINS), ids=list(CHAINS))
def test_methods_match_shap_exactly(chain):
    sv, ref = pair()
    _same(CHAINS[chain](sv), CHAINS[chain](ref))


def test_indexing_by_an_explanation_and_by_shaps_op_chains():
    sv, ref = pair()
    for pick in (lambda e: e.abs.mean(0).argsort[-1], lambda e: e.abs.mean(0).argsort[-2],
                 lambda e: e.abs.max(0).argsort[-1], lambda e: e.abs.percentile(95, 0).argsort[-1]):
        ours, theirs = sv[:, pick(sv)], ref[:, pick(ref)]
        assert ours.feature_names == theirs.feature_names
        np.testing.assert_array_equal(ours.values, theirs.values)
    chain = shap.Explanation.abs.mean(0).argsort[-1]  # shap's class-level op chain, applied to ours
    assert sv[:, chain].feature_names == ref[:, ref.abs.mean(0).argsort[-1]].feature_names


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", "cityblock", "cosine"])
def test_hclust_order_is_shaps(metric):
    sv, ref = pair()
    np.testing.assert_array_equal(sv.hclust(metric), ref.hclust(metric))
    np.testing.assert_array_equal(sv.hclust(metric, axis=1), ref.hclust(metric, axis=1))


@pytest.mark.parametrize("n", [2, 3, 17, 64])
def test_hclust_on_random_rows(n):
    from jaxshap._result._cohorts import hclust_order

    for seed in range(3):
        X = np.random.default_rng(seed).normal(size=(n, 5)) * np.arange(1, 6)
        np.testing.assert_array_equal(hclust_order(X), shap.utils.hclust_ordering(X))


def test_hclust_refuses_what_it_cannot_order():
    *_, sv = world()
    with pytest.raises(ValueError, match="2-D values"):
        sv[0].hclust()
    with pytest.raises(ValueError, match="`metric` must be one of"):
        sv.hclust("hamming")
    with pytest.raises(TypeError, match="outside jax.jit"):
        jax.jit(lambda e: e.hclust())(sv)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"instance_order": "sum(1)"}, {"instance_order": "sum(1).argsort.flip"}, {"instance_order": "hclust"},
     {"feature_values": "abs.max(0)"}, {"max_display": 5}],
    ids=["default", "sum", "argsort", "hclust", "feature-values", "max-display"],
)
def test_heatmap_draws_what_shap_draws(kwargs):
    sv, ref = pair()
    make = {
        "sum(1)": lambda e: e.sum(1), "sum(1).argsort.flip": lambda e: e.sum(1).argsort.flip,
        "hclust": lambda e: e.hclust(), "abs.max(0)": lambda e: e.abs.max(0),
    }
    args = lambda e: {k: make[v](e) if v in make else v for k, v in kwargs.items()}  # noqa: E731
    ours = drawn(lambda: jaxshap.plots.heatmap(sv, show=False, **args(sv)))
    theirs = drawn(lambda: shap.plots.heatmap(ref, show=False, **args(ref)))
    assert_same_drawing(ours, theirs)


def test_cohorts_and_bar_plots_draw_what_shap_draws():
    sv, ref = pair()
    sex = ["Women" if sv[i, "sex"].data < 1.5 else "Men" for i in range(sv.shape[0])]
    for make in (lambda e: e.cohorts(2), lambda e: e.cohorts(3), lambda e: e.cohorts(sex),
                 lambda e: e.cohorts(np.asarray(sex)), lambda e: e.cohorts(tuple(sex))):
        ours, theirs = make(sv), make(ref)
        assert list(ours.cohorts) == list(theirs.cohorts)
        for name in theirs.cohorts:
            _same(ours.cohorts[name], theirs.cohorts[name])
        ours_bar = drawn(lambda: jaxshap.plots.bar(ours.abs.mean(0), show=False))
        assert_same_drawing(ours_bar, drawn(lambda: shap.plots.bar(theirs.abs.mean(0), show=False)))
    for make in (lambda e: e.abs.mean(0), lambda e: e, lambda e: e[0], lambda e: e.abs.max(0)):
        assert_same_drawing(drawn(lambda: jaxshap.plots.bar(make(sv), show=False)),
                            drawn(lambda: shap.plots.bar(make(ref), show=False)))


def test_beeswarm_orders_like_shap():
    sv, ref = pair()
    for kwargs in ({"order": lambda e: e.abs.max(0)}, {"color": "shap_red", "abs": True}):
        make = lambda e: {k: v(e) for k, v in kwargs.items() if callable(v)}  # noqa: E731
        extra = {k: v for k, v in kwargs.items() if not callable(v) and k != "abs"}
        pick = (lambda e: e.abs) if kwargs.get("abs") else (lambda e: e)
        ours = drawn(lambda: jaxshap.plots.beeswarm(pick(sv), show=False, **make(sv), **extra))
        assert_same_drawing(ours, drawn(lambda: shap.plots.beeswarm(pick(ref), show=False, **make(ref), **extra)))


def _with_display():
    sv, ref = pair()
    X = world()[0]
    display = np.where(X.to_numpy() > X.to_numpy().mean(0), "high", "low").astype(object)
    display[:, 0] = X["age"].astype(int).to_numpy()  # numbers and text, as a DataFrame's .values
    sv = jaxshap.Explanation(sv.values, sv.base_values, sv.data, feature_names=sv.feature_names, display_data=display)
    ref.display_data = display
    return sv, ref, display


def test_display_data_follows_indexing_and_conversion():
    sv, ref, display = _with_display()
    for pick in (lambda e: e[:, "bmi"], lambda e: e[3], lambda e: e[5:9, ["age", "sex"]],
                 lambda e: e[np.arange(N_ROWS) % 3 == 0], lambda e: e.sample(7), lambda e: e.abs):
        np.testing.assert_array_equal(pick(sv).display_data, pick(ref).display_data)
        np.testing.assert_array_equal(pick(sv).to_shap().display_data, pick(ref).display_data)
    for name, part in sv.cohorts(2).cohorts.items():
        np.testing.assert_array_equal(part.display_data, ref.cohorts(2).cohorts[name].display_data)
    back = jax.tree_util.tree_map(lambda a: a + 0, sv)  # static metadata: kept through pytree maps
    np.testing.assert_array_equal(back.display_data, display)
    assert sv.abs.mean(0).display_data is None  # a mean over rows has no display values
    other = jaxshap.Explanation(sv.values, sv.base_values, sv.data, feature_names=sv.feature_names)
    other.display_data = pd.DataFrame(display)  # set as in shap's notebooks, a frame or its .values
    np.testing.assert_array_equal(other.display_data, display)
    with pytest.raises(ValueError, match="shape of `data`"):
        other.display_data = display[:3]


def test_display_data_is_what_shaps_plots_show(tmp_path):
    sv, ref, display = _with_display()
    assert_same_drawing(drawn(lambda: jaxshap.plots.waterfall(sv[0], show=False)),
                        drawn(lambda: shap.plots.waterfall(ref[0], show=False)))
    assert_same_drawing(drawn(lambda: jaxshap.plots.scatter(sv[:, "age"], color=sv[:, "sex"], show=False)),
                        drawn(lambda: shap.plots.scatter(ref[:, "age"], color=ref[:, "sex"], show=False)))
    sv.save(tmp_path / "e.npz")
    back = jaxshap.Explanation.load(tmp_path / "e.npz")
    np.testing.assert_array_equal(back.display_data, display.astype(str))


def test_scatter_with_percentile_limits_draws_what_shap_draws():
    sv, ref = pair()
    for make in (lambda e: {"xmin": e[:, "bmi"].percentile(1), "xmax": e[:, "bmi"].percentile(99)},
                 lambda e: {"ymin": e[:, "bmi"].percentile(1), "ymax": e[:, "bmi"].percentile(99)}):
        ours = drawn(lambda: jaxshap.plots.scatter(sv[:, "bmi"], show=False, **make(sv)))
        assert_same_drawing(ours, drawn(lambda: shap.plots.scatter(ref[:, "bmi"], show=False, **make(ref))))


def test_methods_trace_under_jit_and_keep_jax_leaves():
    sv, _ = pair()
    sv = jax.tree_util.tree_map(jnp.asarray, sv)  # JAX leaves (the forest's own results are float64 NumPy)
    assert all(isinstance(a, jax.Array) for a in jax.tree_util.tree_leaves(sv))
    chains = {
        "abs.mean(0)": lambda e: e.abs.mean(0).values,
        "percentile": lambda e: e.percentile(75, 0).values,
        "argsort": lambda e: e.abs.mean(0).argsort.values,
        "flip": lambda e: e.flip.values,
        "sum(1)": lambda e: e.sum(1).values,
    }
    for name, chain in chains.items():
        np.testing.assert_allclose(np.asarray(jax.jit(chain)(sv)), chain(sv), rtol=1e-5, atol=1e-5, err_msg=name)
        derived = {"abs.mean(0)": sv.abs.mean(0), "argsort": sv.argsort, "flip": sv.flip}.get(name)
        if derived is not None:
            assert all(isinstance(a, jax.Array) for a in jax.tree_util.tree_leaves(derived)), name


# --- issue 51: shap's own plots and shap's legacy names take jaxshap results ---------------------
def _tree_result():
    """The tree explanation (float32 JAX leaves) of the shared world."""
    *_, tsv = world()
    return tsv


def test_to_shap_gives_float64_and_a_waterfall_headline_that_float32_would_collapse():
    sv = jax.tree_util.tree_map(jnp.asarray, _tree_result())  # float32 JAX leaves, as a JAX model's
    assert np.asarray(sv.values).dtype == np.float32
    converted = sv[0].to_shap()
    assert converted.values.dtype == np.float64 and converted.data.dtype == np.float64
    assert isinstance(converted.base_values, np.float64)
    np.testing.assert_array_equal(converted.values, np.asarray(sv.values)[0].astype(np.float64))
    # shap's waterfall puts the E[f(X)] and f(x) labels on two ticks about 1e-8 apart
    shap.plots.waterfall(sv[0], show=False)
    pairs = [ax.get_xticks() for ax in plt.gcf().axes if len(ax.get_xticks()) == 2]
    plt.close("all")
    assert len(pairs) == 2 and all(t[1] > t[0] for t in pairs), pairs


def test_shaps_own_plots_take_jaxshap_results():
    sv = _tree_result()
    ref = sv.to_shap()
    for plot in (shap.plots.beeswarm, shap.plots.bar, shap.plots.heatmap, shap.plots.violin):
        assert_same_drawing(drawn(lambda: plot(sv, show=False)), drawn(lambda: plot(ref, show=False)))
    assert_same_drawing(drawn(lambda: shap.plots.waterfall(sv[3], show=False)),
                        drawn(lambda: shap.plots.waterfall(ref[3], show=False)))
    assert_same_drawing(drawn(lambda: shap.plots.scatter(sv[:, "bmi"], color=sv, show=False)),
                        drawn(lambda: shap.plots.scatter(ref[:, "bmi"], color=ref, show=False)))
    cohorts = sv.cohorts(2).abs.mean(0)
    assert_same_drawing(drawn(lambda: shap.plots.bar(cohorts, show=False)),
                        drawn(lambda: shap.plots.bar(cohorts.to_shap(), show=False)))
    assert_same_drawing(drawn(lambda: shap.summary_plot(sv, show=False)), drawn(lambda: shap.summary_plot(ref, show=False)))
    with pytest.raises(TypeError, match="requires an `Explanation`"):  # anything else reaches shap untouched
        shap.plots.beeswarm(np.asarray(sv.values))


def test_shap_imported_first_also_takes_jaxshap_results():
    import subprocess
    import sys

    code = ("import matplotlib; matplotlib.use('Agg'); import numpy as np, shap, jaxshap; "
            "ex = jaxshap.ExactExplainer(lambda Z: Z.sum(1), np.eye(3, dtype=np.float32)); "
            "shap.plots.beeswarm(ex(np.ones((4, 3), np.float32)), show=False); print('drawn')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "drawn" in out.stdout, out.stderr[-2000:]


def test_legacy_names_draw_what_shap_draws():
    X, linear, exact, sv, *_ = world()
    values, Xn = sv.values, X.to_numpy()
    ev = exact.expected_value
    assert_same_drawing(drawn(lambda: jaxshap.summary_plot(values, X, show=False)),
                        drawn(lambda: shap.summary_plot(np.float64(values), X, show=False)))
    assert_same_drawing(drawn(lambda: jaxshap.dependence_plot("bmi", values, X, show=False)),
                        drawn(lambda: shap.dependence_plot("bmi", np.float64(values), X, show=False)))
    assert_same_drawing(drawn(lambda: jaxshap.decision_plot(ev, values[:10], Xn[:10], show=False)),
                        drawn(lambda: shap.decision_plot(ev, np.float64(values[:10]), Xn[:10], show=False)))
    assert_same_drawing(drawn(lambda: jaxshap.waterfall_plot(sv[2], show=False)),
                        drawn(lambda: shap.plots.waterfall(sv[2].to_shap(), show=False)))
    row = jnp.asarray(values[0], jnp.float32)  # a JAX array too: given to shap as NumPy float64
    forced = jaxshap.force_plot(ev, row, Xn[0], matplotlib=True, show=False)
    assert_same_drawing(drawn(lambda: forced), drawn(lambda: shap.force_plot(
        ev, np.asarray(row).astype(np.float64), Xn[0], matplotlib=True, show=False)))
    assert jaxshap.initjs() is None


def test_legacy_names_without_shap_name_the_plots_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "shap", None)  # as if shap were not installed
    for plot in (jaxshap.summary_plot, jaxshap.force_plot, jaxshap.initjs, jaxshap.plots.beeswarm):
        with pytest.raises(ImportError, match=r"install the `plots` extra, `pip install 'jaxshap\[plots\]'`"):
            plot(np.zeros((2, 3)))
