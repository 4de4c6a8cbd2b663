"""shap's ``notebooks/tabular_examples/tree_based_models``."""

import numpy as np
import pytest
import scipy.special

import jaxshap
from conformance_data import adult, assert_exact, california, nhanesi

shap = pytest.importorskip("shap")
xgboost = pytest.importorskip("xgboost")
sklearn = pytest.importorskip("sklearn")
pd = pytest.importorskip("pandas")

from sklearn.model_selection import train_test_split  # noqa: E402


# --- Basic SHAP Interaction Value Example in XGBoost.ipynb -------------------------------------------
def _interaction_data(n=2_000):
    X = np.zeros((n, 5))
    X[:1_000, 0] = 1
    X[:500, 1] = 1
    X[1_000:1_500, 1] = 1
    X[:250, 2] = 1
    X[500:750, 2] = 1
    X[1_000:1_250, 2] = 1
    X[1_500:1_750, 2] = 1
    X[:125, 3] = 1
    X[250:375, 3] = 1
    X[500:625, 3] = 1
    X[750:875, 3] = 1
    X[1_000:1_125, 3] = 1
    X[1_250:1_375, 3] = 1
    X[1_500:1_625, 3] = 1
    X[1_750:1_875, 3] = 1
    X[:, :4] -= 0.4999
    y = 2 * X[:, 0] - 3 * X[:, 1] + 2 * X[:, 1] * X[:, 2]
    return X, y


def test_Basic_SHAP_Interaction_Value_Example_in_XGBoost_1():
    """notebooks/tabular_examples/tree_based_models/Basic SHAP Interaction Value Example in
    XGBoost.ipynb: ``shap.TreeExplainer(model)`` on one ``xgboost.train`` tree, called on a
    ``DMatrix``: ``explainer(Xd)``, ``explainer.shap_interaction_values(Xd)`` and
    ``explainer.expected_value``."""
    X, y = _interaction_data()
    Xd = xgboost.DMatrix(X, label=y)
    model = xgboost.train({"eta": 1, "max_depth": 4, "base_score": 0, "lambda": 0}, Xd, 1)

    def example(shap):
        explainer = shap.TreeExplainer(model)
        explanation = explainer(Xd)
        shap_interaction_values = explainer.shap_interaction_values(Xd)
        return explanation.values, explanation.base_values, shap_interaction_values, explainer.expected_value

    want, got = example(shap), example(jaxshap)
    scale = np.abs(want[0]).max()  # the base value is near 0 (base_score=0): compare on the values' scale
    for g, w, what in zip(got, want, ("values", "base_values", "interaction values", "expected_value")):
        assert_exact(g, w, what=what, scale=scale)


# --- Census income classification with LightGBM.ipynb -------------------------------------------------
def test_Census_income_classification_with_LightGBM_1():
    """notebooks/tabular_examples/tree_based_models/Census income classification with
    LightGBM.ipynb: ``shap.TreeExplainer(model)(X)`` on ``lgb.train`` (binary), then
    ``shap.force_plot(explainer.expected_value, shap_values.values[0, :], X_display.iloc[0, :])``'s
    arguments: ``expected_value`` and ``shap_values.values``."""
    lgb = pytest.importorskip("lightgbm")
    X, y = adult(400)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=7)
    params = {"max_bin": 512, "learning_rate": 0.05, "objective": "binary", "num_leaves": 10, "verbose": -1, "min_data": 20}
    model = lgb.train(params, lgb.Dataset(X_train, label=y_train), 40)

    def example(shap):
        explainer = shap.TreeExplainer(model)
        shap_values = explainer(X)
        return explainer.expected_value, shap_values.values[0, :], shap_values.values

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[2], want[2])
    shap.force_plot(got[0], got[1], X.iloc[0, :])  # shap's legacy plot on jaxshap's results


# --- Census income classification with XGBoost.ipynb ---------------------------------------------------
def test_Census_income_classification_with_XGBoost_1():
    """notebooks/tabular_examples/tree_based_models/Census income classification with
    XGBoost.ipynb: ``shap.TreeExplainer(model).shap_values(X)`` on ``xgboost.train`` with
    ``binary:logistic`` and ``base_score=np.mean(y_train)``."""
    X, y = adult(400)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=7)
    params = {"eta": 0.05, "objective": "binary:logistic", "subsample": 0.5, "base_score": np.mean(y_train), "seed": 0}
    model = xgboost.train(params, xgboost.DMatrix(X_train, label=y_train), 50)

    def example(shap):
        explainer = shap.TreeExplainer(model)
        shap_values = explainer.shap_values(X)
        # read after shap_values, as the notebook does: shap's own expected_value for an XGBoost
        # Booster is a cover-based estimate until its first call replaces it with XGBoost's bias
        return explainer.expected_value, shap_values

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])


# --- Example of loading a custom tree model into SHAP.ipynb --------------------------------------------
def _tree_dict(tree, scale=1.0):
    return {
        "children_left": tree.children_left,
        "children_right": tree.children_right,
        "children_default": tree.children_right.copy(),
        "features": tree.feature,
        "thresholds": tree.threshold,
        "values": tree.value.reshape(tree.value.shape[0], 1) * scale,
        "node_sample_weight": tree.weighted_n_node_samples,
    }


def test_Example_of_loading_a_custom_tree_model_into_SHAP_1():
    """notebooks/tabular_examples/tree_based_models/Example of loading a custom tree model into
    SHAP.ipynb: ``shap.TreeExplainer({"trees": [tree_dict]})`` from a scikit-learn tree's arrays;
    ``expected_value + shap_values(X).sum(1)`` equals the tree's prediction."""
    from sklearn.tree import DecisionTreeRegressor

    X, y = adult(400)
    orig_model = DecisionTreeRegressor(max_depth=2).fit(X, y)
    model = {"trees": [_tree_dict(orig_model.tree_)]}

    def example(shap):
        explainer = shap.TreeExplainer(model)
        return explainer.expected_value, explainer.shap_values(X)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])
    assert np.abs(got[0] + got[1].sum(1) - orig_model.predict(X)).max() < 1e-4


def test_Example_of_loading_a_custom_tree_model_into_SHAP_2():
    """notebooks/tabular_examples/tree_based_models/Example of loading a custom tree model into
    SHAP.ipynb: two gradient-boosting trees as a dict with ``base_offset``,
    ``tree_output="log_odds"``, ``objective="binary_crossentropy"``, explained interventionally
    with ``model_output="probability"`` over 200 background rows."""
    from sklearn.ensemble import GradientBoostingClassifier

    X2, y2 = adult(400)
    orig_model2 = GradientBoostingClassifier(n_estimators=2).fit(X2, y2)
    model2 = {
        "trees": [_tree_dict(orig_model2.estimators_[i][0].tree_, orig_model2.learning_rate) for i in range(2)],
        "base_offset": scipy.special.logit(orig_model2.init_.class_prior_[1]),
        "tree_output": "log_odds",
        "objective": "binary_crossentropy",
        "input_dtype": np.float32,
        "internal_dtype": np.float64,
    }
    inds = np.argsort(np.abs(orig_model2.predict_proba(X2)[:, 1] - 0.95))[:200]

    def example(shap):
        explainer2 = shap.TreeExplainer(
            model2, X2.iloc[inds, :], feature_perturbation="interventional", model_output="probability"
        )
        return explainer2.expected_value, explainer2.shap_values(X2.iloc[:100, :])

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])
    shap_sum = got[0] + got[1].sum(1)
    assert np.abs(shap_sum - orig_model2.predict_proba(X2.iloc[:100])[:, 1]).max() < 1e-4


# --- Explaining a simple OR function.ipynb ------------------------------------------------------------
def _or_data():
    rng = np.random.default_rng(42)
    X = (rng.standard_normal(size=(4_000, 2)) > 0) * 1
    X = pd.DataFrame(X, columns=["is_young", "is_female"])
    X.loc[0, :] = [1, 0]
    y = ((X.loc[:, "is_young"] + X.loc[:, "is_female"]).to_numpy() > 0) * 1
    model = xgboost.XGBRegressor(n_estimators=100, learning_rate=0.1, random_state=3).fit(X, y)
    return X, y, model


def _or_example(which):
    """``shap.TreeExplainer(model, background, feature_perturbation="interventional")(X.loc[[0], :])``."""
    X, y, model = _or_data()
    background = {"all": X, "non-survival": X.loc[y == 0, :], "survival": X.loc[y == 1, :]}[which]

    def example(shap):
        explainer = shap.TreeExplainer(model, background, feature_perturbation="interventional")
        explanation = explainer(X.loc[[0], :])
        return explanation.base_values[0], explanation.values[0]

    want, got = example(shap), example(jaxshap)
    scale = np.abs(want[1]).max()  # a base value near 0 is compared on the values' scale
    assert_exact(got[0], want[0], what="expected_value", scale=scale)
    assert_exact(got[1], want[1])


def test_Explaining_a_simple_OR_function_1():
    """notebooks/tabular_examples/tree_based_models/Explaining a simple OR function.ipynb: the
    young boy against the whole training set (4000 rows here, 40000 there) as background."""
    _or_example("all")


def test_Explaining_a_simple_OR_function_2():
    """notebooks/tabular_examples/tree_based_models/Explaining a simple OR function.ipynb:
    against the non-survivors ``X.loc[y == 0, :]``."""
    _or_example("non-survival")


def test_Explaining_a_simple_OR_function_3():
    """notebooks/tabular_examples/tree_based_models/Explaining a simple OR function.ipynb:
    against the survivors ``X.loc[y == 1, :]``."""
    _or_example("survival")


def test_Explaining_a_simple_OR_function_4():
    """notebooks/tabular_examples/tree_based_models/Explaining a simple OR function.ipynb:
    ``np.ones((1, M))`` (all young women) as background for a DataFrame's first rows;
    ``explanation.data`` and ``explanation.values.round(4)``."""
    X, y, model = _or_data()

    def example(shap):
        explainer = shap.TreeExplainer(model, np.ones((1, 2)), feature_perturbation="interventional")
        explanation = explainer(X.head(3))
        return explanation.data, explanation.values.round(4)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="data")
    assert_exact(got[1], want[1])


# --- Explaining the Loss of a Model.ipynb -------------------------------------------------------------
def test_Explaining_the_Loss_of_a_Model_1():
    """notebooks/tabular_examples/tree_based_models/Explaining the Loss of a Model.ipynb:
    ``shap.TreeExplainer(model, X, feature_perturbation="interventional",
    model_output="log_loss")``; ``explainer.shap_values(X.iloc[:10, :], y[:10]).sum(1) +
    np.array([explainer.expected_value(v) for v in y[:10]])`` is the model's log loss."""
    X, y = adult(300)
    model = xgboost.XGBClassifier(n_estimators=20, max_depth=3).fit(X, y)

    def example(shap):
        explainer = shap.TreeExplainer(model, X[:100], feature_perturbation="interventional", model_output="log_loss")
        return explainer.shap_values(X.iloc[:10, :], y[:10]).sum(1) + np.array(
            [explainer.expected_value(v) for v in y[:10]]
        )

    want, got = example(shap), example(jaxshap)
    assert_exact(got, want)
    p = model.predict_proba(X.iloc[:10])
    model_loss = -np.log(p[:, 1]) * y[:10] + -np.log(p[:, 0]) * (1 - y[:10])
    np.testing.assert_allclose(got, model_loss, rtol=1e-4)


# --- Fitting a Linear Simulation with XGBoost.ipynb ---------------------------------------------------
def test_Fitting_a_Linear_Simulation_with_XGBoost_1():
    """notebooks/tabular_examples/tree_based_models/Fitting a Linear Simulation with
    XGBoost.ipynb: ``shap.TreeExplainer(model_depth1)(X_test)`` on an ``XGBRegressor(max_depth=1,
    base_score=..., early_stopping_rounds=20)`` (here 300 rounds at most), and
    ``np.argmax(np.abs(shap_values_depth1.values).mean(0))``."""
    N, M = 2000, 10
    np.random.seed(0)
    X_raw = np.random.randn(N, M)
    X = pd.DataFrame(X_raw, columns=[f"feature {i}" for i in range(M)])
    y = X_raw @ np.random.randn(M)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    X_strain, X_valid, y_strain, y_valid = train_test_split(X_train, y_train, random_state=0)
    model_depth1 = xgboost.XGBRegressor(
        max_depth=1, learning_rate=0.1, subsample=0.5, n_estimators=300, base_score=y_strain.mean(), early_stopping_rounds=20
    )
    model_depth1.fit(X_strain, y_strain, eval_set=[(X_valid, y_valid)], verbose=False)

    def example(shap):
        explainer_depth1 = shap.TreeExplainer(model_depth1)
        shap_values_depth1 = explainer_depth1(X_test[:200])
        return shap_values_depth1.values, np.argmax(np.abs(shap_values_depth1.values).mean(0))

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert got[1] == want[1]


# --- Force Plot Colors.ipynb / Scatter Density vs. Violin Plot Comparison.ipynb ----------------------
def test_Force_Plot_Colors_1():
    """notebooks/tabular_examples/tree_based_models/Force Plot Colors.ipynb:
    ``shap.TreeExplainer(bst)(X)`` on ``xgboost.train({"learning_rate": 0.01}, DMatrix, 100)``
    over ``shap.datasets.california(n_points=1_000)`` (here 300 local rows)."""
    X, y = california(300)
    bst = xgboost.train({"learning_rate": 0.01}, xgboost.DMatrix(X, label=y), 100)

    def example(shap):
        explainer = shap.TreeExplainer(bst)
        explanation = explainer(X)
        return explanation.values, explanation.base_values, explanation[0:5].values

    want, got = example(shap), example(jaxshap)
    for g, w in zip(got, want):
        assert_exact(g, w)


# --- Front page example (XGBoost).ipynb ------------------------------------------------------------
def test_Front_page_example_XGBoost_1():
    """notebooks/tabular_examples/tree_based_models/Front page example (XGBoost).ipynb (the
    README's first example): ``shap.Explainer(xgboost.XGBRegressor().fit(X, y))(X)``, no
    background (path-dependent TreeSHAP), and ``shap_values[:, "Latitude"]``."""
    X, y = california(400)
    model = xgboost.XGBRegressor(n_estimators=50).fit(X, y)

    def example(shap):
        explainer = shap.Explainer(model)
        shap_values = explainer(X)
        return shap_values, shap_values[:, "Latitude"]

    (want, want_lat), (got, got_lat) = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)
    assert_exact(got.base_values, want.base_values, what="base_values")
    assert_exact(got_lat.values, want_lat.values, what="Latitude")


# --- NHANES I Survival Model.ipynb --------------------------------------------------------------------
def test_NHANES_I_Survival_Model_1():
    """notebooks/tabular_examples/tree_based_models/NHANES I Survival Model.ipynb:
    ``shap.TreeExplainer(model).shap_values(X)`` and ``.shap_interaction_values(X.iloc[:300,
    :])`` on an ``xgboost.train`` Cox model (``survival:cox``; local data, 500 rounds)."""
    X, y = nhanesi(300)
    params = {"eta": 0.02, "max_depth": 3, "objective": "survival:cox", "subsample": 0.5, "seed": 0}
    model = xgboost.train(params, xgboost.DMatrix(X, label=y), 100)

    def example(shap):
        shap_values = shap.TreeExplainer(model).shap_values(X)
        shap_interaction_values = shap.TreeExplainer(model).shap_interaction_values(X.iloc[:100, :])
        return shap_values, shap_interaction_values

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1], what="interaction values")


# --- Understanding Tree SHAP for Simple Models.ipynb ---------------------------------------------------
def _simple_tree_example(y_rule):
    """``shap.TreeExplainer(model).shap_values(x)`` of one 1-D row, for a depth-2 tree on 4
    binary features (the notebook's single split, AND, OR and XOR models)."""
    from sklearn.tree import DecisionTreeRegressor

    N, M = 100, 4
    X = np.zeros((N, M))
    X[: N // 2, 0] = 1
    X[: N // 4, 1] = 1
    X[N // 2 : 3 * N // 4, 1] = 1
    y = y_rule(N).astype(float)
    model = DecisionTreeRegressor(max_depth=2).fit(X, y)

    def example(shap):
        return [shap.TreeExplainer(model).shap_values(x) for x in (np.ones(M), np.zeros(M))]

    want, got = example(shap), example(jaxshap)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w) == (M,)
        assert_exact(g, w)


def _rows(n, *spans):
    y = np.zeros(n)
    for a, b in spans:
        y[int(a * n) : int(b * n)] = 1
    return y


def test_Understanding_Tree_SHAP_for_Simple_Models_1():
    """notebooks/tabular_examples/tree_based_models/Understanding Tree SHAP for Simple
    Models.ipynb: the single-split model (``y = x0``)."""
    _simple_tree_example(lambda n: _rows(n, (0, 0.5)))


def test_Understanding_Tree_SHAP_for_Simple_Models_2():
    """notebooks/tabular_examples/tree_based_models/Understanding Tree SHAP for Simple
    Models.ipynb: the AND model."""
    _simple_tree_example(lambda n: _rows(n, (0, 0.25)))


def test_Understanding_Tree_SHAP_for_Simple_Models_3():
    """notebooks/tabular_examples/tree_based_models/Understanding Tree SHAP for Simple
    Models.ipynb: the OR model."""
    _simple_tree_example(lambda n: _rows(n, (0, 0.75)))


def test_Understanding_Tree_SHAP_for_Simple_Models_4():
    """notebooks/tabular_examples/tree_based_models/Understanding Tree SHAP for Simple
    Models.ipynb: the XOR model."""
    _simple_tree_example(lambda n: _rows(n, (0.25, 0.75)))


# --- tree_shap_paper/Performance comparison.ipynb -----------------------------------------------------
def test_Performance_comparison_1():
    """notebooks/tabular_examples/tree_based_models/tree_shap_paper/Performance
    comparison.ipynb: ``shap.KernelExplainer(f, X.mean(0).reshape(1, M)).shap_values(X[:1, :],
    silent=True, nsamples=1000)`` next to ``shap.TreeExplainer(model).shap_values(X)``; with a
    one-row mean background KernelSHAP estimates the interventional values of that row, which
    are exact (``2**8 - 2 < 1000`` coalitions)."""
    X, y = california(300)
    X = X.values
    M = X.shape[1]
    model = xgboost.XGBRegressor(n_estimators=30, max_depth=3).fit(X, y)

    def f(x):
        return model.predict(x, output_margin=True)

    def example(shap):
        e = shap.KernelExplainer(f, X.mean(0).reshape(1, M))
        return e.shap_values(X[:1, :], silent=True, nsamples=1000), shap.TreeExplainer(model).shap_values(X)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1])
