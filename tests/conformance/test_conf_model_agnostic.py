"""shap's ``notebooks/tabular_examples/model_agnostic`` and the README's KernelSHAP example."""

import functools

import numpy as np
import pytest
import scipy.special

import jaxshap
from conformance_data import adult, assert_exact, assert_no_worse_over_seeds, california

shap = pytest.importorskip("shap")
sklearn = pytest.importorskip("sklearn")
pd = pytest.importorskip("pandas")

from sklearn.model_selection import train_test_split  # noqa: E402


# --- Census income classification with scikit-learn.ipynb ------------------------------------------
@functools.lru_cache(maxsize=None)
def census_knn():
    from sklearn.neighbors import KNeighborsClassifier

    X, y = adult(500)
    X["Occupation"] = X["Occupation"].astype(np.int64)  # shap's int8 codes times 1000 overflow in NumPy 2
    X["Occupation"] *= 1000  # to show the impact of feature scale on KNN predictions
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=7)
    knn = KNeighborsClassifier().fit(X_train, y_train)
    return X, X_train, X_valid, y_train, knn


def test_Census_income_classification_with_scikit_learn_1():
    """notebooks/tabular_examples/model_agnostic/Census income classification with
    scikit-learn.ipynb: ``shap.Explainer(f, med)`` with ``f = knn.predict_proba(x)[:, 1]`` and
    the one-row median background, on ``X_valid.iloc[0:1000, :]`` (here 20 rows). 12 features:
    shap samples permutations (``max_evals=500``, its default, written out so both run at the
    same budget); the error against the exact values is compared over four seeds."""
    X, X_train, X_valid, y_train, knn = census_knn()

    def f(x):
        return knn.predict_proba(x)[:, 1]

    med = X_train.median().values.reshape((1, X_train.shape[1]))

    def example(shap, seed):
        explainer = shap.Explainer(f, med, seed=seed)
        return explainer(X_valid.iloc[0:20, :], max_evals=500).values

    exact = shap.explainers.Exact(f, med)(X_valid.iloc[0:20, :])
    assert_no_worse_over_seeds(example, exact.values)


def test_Census_income_classification_with_scikit_learn_2():
    """notebooks/tabular_examples/model_agnostic/Census income classification with
    scikit-learn.ipynb: the same on standardised columns (``X_train_norm``, ``X_valid_norm``),
    at shap's default budget (``max_evals=500``). With a one-row background shap permutes only
    the features whose value differs from the background row (``masker.invariants``) and gives
    the others exactly 0; jaxshap permutes all 12, so its error is 1.04 times shap's over seeds
    0-3 (1.11 times over 0-9): allowed up to 1.5 times, since "no larger" would pass or fail
    by the draw."""
    from sklearn.neighbors import KNeighborsClassifier

    X, X_train, X_valid, y_train, _ = census_knn()
    X_train_norm, X_valid_norm = X_train.astype(float), X_valid.astype(float)
    for k in X.columns:
        m, s = X_train[k].mean(), X_train[k].std()
        X_train_norm[k] = (X_train_norm[k] - m) / s
        X_valid_norm[k] = (X_valid_norm[k] - m) / s
    knn_norm = KNeighborsClassifier().fit(X_train_norm, y_train)

    def f(x):
        return knn_norm.predict_proba(x)[:, 1]

    med = X_train_norm.median().values.reshape((1, X_train_norm.shape[1]))

    def example(shap, seed):
        explainer = shap.Explainer(f, med, seed=seed)
        return explainer(X_valid_norm.iloc[0:20, :], max_evals=500).values

    exact = shap.explainers.Exact(f, med)(X_valid_norm.iloc[0:20, :])
    assert_no_worse_over_seeds(example, exact.values, factor=1.5)


# --- Diabetes regression.ipynb ----------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def diabetes_split():
    X, y = shap.datasets.diabetes()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    X_train_summary = shap.kmeans(X_train, 10)
    return X_train, X_test, y_train, X_train_summary


def test_Diabetes_regression_1():
    """notebooks/tabular_examples/model_agnostic/Diabetes regression.ipynb:
    ``shap.KernelExplainer(lin_regr.predict, shap.kmeans(X_train, 10))``, ``shap_values`` of one
    row (a Series) and of ``X_test`` (here 20 rows), and ``expected_value``. The default budget
    enumerates all ``2**10 - 2`` coalitions, so the values are exact in both."""
    from sklearn import linear_model

    X_train, X_test, y_train, X_train_summary = diabetes_split()
    lin_regr = linear_model.LinearRegression().fit(X_train, y_train)

    def example(shap):
        ex = shap.KernelExplainer(lin_regr.predict, X_train_summary)
        one = ex.shap_values(X_test.iloc[0, :])
        return ex.expected_value, one, ex.shap_values(X_test.iloc[:20])

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1], what="one row")
    assert_exact(got[2], want[2])


def test_Diabetes_regression_2():
    """notebooks/tabular_examples/model_agnostic/Diabetes regression.ipynb:
    ``shap.TreeExplainer(dtree).shap_values(X_test)`` for a ``DecisionTreeRegressor``."""
    from sklearn import tree

    X_train, X_test, y_train, _ = diabetes_split()
    dtree = tree.DecisionTreeRegressor(min_samples_split=20).fit(X_train, y_train)

    def example(shap):
        ex = shap.TreeExplainer(dtree)
        return ex.expected_value, ex.shap_values(X_test)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])


def test_Diabetes_regression_3():
    """notebooks/tabular_examples/model_agnostic/Diabetes regression.ipynb:
    ``shap.TreeExplainer(rforest).shap_values(X_test)`` for a ``RandomForestRegressor`` (here
    50 trees instead of 1000)."""
    from sklearn.ensemble import RandomForestRegressor

    X_train, X_test, y_train, _ = diabetes_split()
    rforest = RandomForestRegressor(n_estimators=50, max_depth=None, min_samples_split=2, random_state=0)
    rforest.fit(X_train, y_train)

    def example(shap):
        explainer = shap.TreeExplainer(rforest)
        return explainer.expected_value, explainer.shap_values(X_test)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])


def test_Diabetes_regression_4():
    """notebooks/tabular_examples/model_agnostic/Diabetes regression.ipynb:
    ``shap.KernelExplainer(nn.predict, X_train_summary).shap_values(X_test)`` for an
    ``MLPRegressor`` (here 20 rows; the default budget enumerates every coalition)."""
    from sklearn.neural_network import MLPRegressor

    X_train, X_test, y_train, X_train_summary = diabetes_split()
    nn = MLPRegressor(solver="lbfgs", alpha=1e-1, hidden_layer_sizes=(5, 2), random_state=0, max_iter=500)
    nn.fit(X_train, y_train)

    def example(shap):
        explainer = shap.KernelExplainer(nn.predict, X_train_summary)
        return explainer.expected_value, explainer.shap_values(X_test.iloc[:20])

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert_exact(got[1], want[1])


# --- Iris classification with scikit-learn.ipynb ----------------------------------------------------
@functools.lru_cache(maxsize=None)
def iris_split():
    X, y = shap.datasets.iris()
    return train_test_split(X, y, test_size=0.2, random_state=0)


def _iris_example(make_model):
    """``shap.Explainer(model.predict_proba, X_train)(X_test)``: 120 training rows, so shap keeps
    its 100-row sample; 4 features, so exact."""
    X_train, X_test, Y_train, Y_test = iris_split()
    model = make_model().fit(X_train, Y_train)

    def example(shap):
        explainer = shap.Explainer(model.predict_proba, X_train)
        shap_values = explainer(X_test)
        return shap_values, shap_values[..., 0]

    (want, want0), (got, got0) = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)
    assert_exact(got.base_values, want.base_values, what="base_values")
    assert_exact(got0.values, want0.values, what="values[..., 0]")


def test_Iris_classification_with_scikit_learn_1():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``KNeighborsClassifier``."""
    from sklearn.neighbors import KNeighborsClassifier

    _iris_example(KNeighborsClassifier)


def test_Iris_classification_with_scikit_learn_2():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``SVC(kernel="linear", probability=True)``."""
    from sklearn.svm import SVC

    _iris_example(lambda: SVC(kernel="linear", probability=True, random_state=0))


def test_Iris_classification_with_scikit_learn_3():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``SVC(kernel="rbf", probability=True)``."""
    from sklearn.svm import SVC

    _iris_example(lambda: SVC(kernel="rbf", probability=True, random_state=0))


def test_Iris_classification_with_scikit_learn_4():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``LogisticRegression(solver="newton-cg")``."""
    from sklearn.linear_model import LogisticRegression

    _iris_example(lambda: LogisticRegression(solver="newton-cg"))


def test_Iris_classification_with_scikit_learn_5():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``DecisionTreeClassifier(min_samples_split=2)`` through its ``predict_proba``."""
    from sklearn.tree import DecisionTreeClassifier

    _iris_example(lambda: DecisionTreeClassifier(min_samples_split=2, random_state=0))


def test_Iris_classification_with_scikit_learn_6():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``RandomForestClassifier(n_estimators=100)`` through its ``predict_proba``."""
    from sklearn.ensemble import RandomForestClassifier

    _iris_example(lambda: RandomForestClassifier(n_estimators=100, random_state=0))


def test_Iris_classification_with_scikit_learn_7():
    """notebooks/tabular_examples/model_agnostic/Iris classification with scikit-learn.ipynb:
    ``MLPClassifier(solver="lbfgs", hidden_layer_sizes=(5, 2))``."""
    from sklearn.neural_network import MLPClassifier

    _iris_example(lambda: MLPClassifier(solver="lbfgs", alpha=1e-1, hidden_layer_sizes=(5, 2), random_state=0, max_iter=500))


# --- Multioutput Regression SHAP.ipynb ---------------------------------------------------------------
def test_Multioutput_Regression_SHAP_1():
    """notebooks/tabular_examples/model_agnostic/Multioutput Regression SHAP.ipynb:
    ``shap.KernelExplainer(model=model.predict, data=X.head(50), link="identity")`` and
    ``explainer.shap_values(X=X.iloc[0:50, :], nsamples=100)`` (here 10 rows) on a 5-output
    regression (the notebook's Keras network is replaced by scikit-learn's ``MLPRegressor``).
    100 of the 1022 coalitions are sampled, so the error against the exact values is compared
    over four seeds (``seed=`` for jaxshap, NumPy's global seed for shap)."""
    from sklearn.datasets import make_regression
    from sklearn.neural_network import MLPRegressor

    X, y = make_regression(n_samples=300, n_features=10, n_informative=7, n_targets=5, random_state=0)
    X = pd.DataFrame(X, columns=[f"feature_{i:02d}" for i in range(1, 11)])
    y = pd.DataFrame(y, columns=[f"labels_{i:02d}" for i in range(1, 6)])
    model = MLPRegressor(hidden_layer_sizes=(32,), random_state=0, max_iter=300).fit(X, y)

    def example(shap):
        explainer = shap.KernelExplainer(model=model.predict, data=X.head(50), link="identity")
        shap_value_single = explainer.shap_values(X=X.iloc[0:1, :], nsamples=100)
        return explainer.expected_value, shap_value_single

    def sampled(shap, seed):
        explainer = shap.KernelExplainer(model=model.predict, data=X.head(50), link="identity", seed=seed)
        return explainer.shap_values(X=X.iloc[0:10, :], nsamples=100)

    exact = shap.KernelExplainer(model.predict, X.head(50)).shap_values(X.iloc[0:10, :], nsamples=1022, silent=True)
    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0], what="expected_value")
    assert np.shape(got[1]) == np.shape(want[1])
    assert_no_worse_over_seeds(sampled, exact)


# --- Simple California Demo.ipynb --------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def california_xgb():
    xgboost = pytest.importorskip("xgboost")
    X, y = california(400)
    model = xgboost.XGBRegressor(n_estimators=30, subsample=0.3, random_state=0).fit(X, y)
    return X, y, model, X[1:11]


def test_Simple_California_Demo_1():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb:
    ``shap.ExactExplainer(model.predict, X)(references)`` (here 10 rows)."""
    X, y, model, references = california_xgb()

    def example(shap):
        exact_explainer = shap.ExactExplainer(model.predict, X)
        return exact_explainer(references)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)


def test_Simple_California_Demo_2():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb:
    ``shap.TreeExplainer(model, X)(references)`` (interventional over all of ``X``)."""
    X, y, model, references = california_xgb()

    def example(shap):
        tree_explainer = shap.TreeExplainer(model, X)
        return tree_explainer(references)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)


def test_Simple_California_Demo_3():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb:
    ``shap.PartitionExplainer(model.predict, X)(references)``: binary Owen (Winter) values over
    shap's default correlation clustering of the background."""
    X, y, model, references = california_xgb()

    def example(shap):
        masker_explainer = shap.PartitionExplainer(model.predict, X)
        return masker_explainer(references)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)


def test_Simple_California_Demo_4():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb:
    ``shap.PartitionExplainer(model.predict, shap.maskers.Partition(X,
    clustering=shap.utils.partition_tree(X)))(references)``."""
    X, y, model, references = california_xgb()
    np.random.seed(2023)
    partition_tree = shap.utils.partition_tree(X)

    def example(shap):
        masker = shap.maskers.Partition(X, clustering=partition_tree)
        masker_explainer = shap.PartitionExplainer(model.predict, masker)
        return masker_explainer(references)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)


# The notebook's CoalitionExplainer cells: its hierarchies (facts of the example), and the binary
# hierarchy it builds from shap.utils.partition_tree(X) as nested dicts of cluster names.
HIERARCHY_FLAT = {name: name for name in ["AveOccup", "MedInc", "Longitude", "Population", "HouseAge", "Latitude",
                                          "AveBedrms", "AveRooms"]}
HIERARCHY_NONBINARY = {
    "HouseCharacteristics": {"AveBedrms": "AveBedrms", "AveRooms": "AveRooms", "AveOccup": "AveOccup",
                             "HouseAge": "HouseAge"},
    "Area": {"Location": {"Latitude": "Latitude", "Longitude": "Longitude"},
             "Neighbours": {"MedInc": "MedInc", "Population": "Population"}},
}
HIERARCHY_NONBINARY2 = {
    "Activity": {"MedInc": "MedInc", "AveOccup": "AveOccup", "Population": "Population"},
    "Material": {"AveBedrms": "AveBedrms", "AveRooms": "AveRooms", "HouseAge": "HouseAge"},
    "Location": {"Latitude": "Latitude", "Longitude": "Longitude"},
}


def binary_hierarchy(linkage, labels):
    """The linkage matrix as the notebook's nested dict: a merged cluster ``t`` is
    ``{"cluster_t": {child: ..., child: ...}}`` with a leaf written ``{"name": "name"}``."""
    n = len(labels)

    def entry(node):
        if node < n:
            return labels[node], labels[node]
        left, right = (int(c) for c in linkage[node - n, :2])
        return f"cluster_{node}", dict([entry(left), entry(right)])

    return dict([entry(n + len(linkage) - 1)])


@functools.lru_cache(maxsize=None)
def shaps_coalition_explainer_runs():
    """Whether shap's CoalitionExplainer explains a one-output model here (shap 0.51 calls
    ``float()`` on a ``[1]`` array, which NumPy 2 refuses; shap 0.54 fixed it)."""
    if not hasattr(shap, "CoalitionExplainer"):
        return f"shap {shap.__version__} has no CoalitionExplainer"
    X = pd.DataFrame(np.eye(2), columns=["a", "b"])
    try:
        shap.CoalitionExplainer(lambda Z: np.asarray(Z).sum(1), shap.maskers.Partition(X), partition_tree={"g": ["a", "b"]})(X)
    except TypeError as err:
        return f"shap {shap.__version__}'s CoalitionExplainer fails on a one-output model: {err}"
    return None


def test_Simple_California_Demo_5():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb:
    ``shap.CoalitionExplainer(model.predict, shap.maskers.Partition(X),
    partition_tree=hierarchy_flat)(references)``, which the notebook checks against
    ``shap.ExactExplainer(model.predict, X)(references)`` ("recreates the ExactExplainer Shapley
    values: True"): jaxshap's against shap's exact Shapley values, with any shap."""
    X, y, model, references = california_xgb()
    exact = shap.ExactExplainer(model.predict, X)(references)
    partition_masker = jaxshap.maskers.Partition(X)
    explainer = jaxshap.CoalitionExplainer(model.predict, partition_masker, partition_tree=HIERARCHY_FLAT)
    assert_exact(explainer(references).values, exact.values)


def test_Simple_California_Demo_6():
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb: the binary
    hierarchy built from ``shap.utils.partition_tree(X)`` as nested dicts,
    ``shap.CoalitionExplainer(model.predict, shap.maskers.Partition(X),
    partition_tree=hierarchy_binary)``, which the notebook checks against
    ``shap.PartitionExplainer(model.predict, shap.maskers.Partition(X, clustering=partition_tree))``
    ("recreates the PartitionExplainer Winter values: True"): jaxshap's against shap's Owen values."""
    X, y, model, references = california_xgb()
    partition_tree = shap.utils.partition_tree(X)
    hierarchy_binary = binary_hierarchy(partition_tree, list(X.columns))
    owen = shap.PartitionExplainer(model.predict, shap.maskers.Partition(X, clustering=partition_tree))(references)
    explainer = jaxshap.CoalitionExplainer(model.predict, jaxshap.maskers.Partition(X), partition_tree=hierarchy_binary)
    assert_exact(explainer(references).values, owen.values)


@pytest.mark.parametrize("hierarchy", ["flat", "binary", "nonbinary", "nonbinary2"])
def test_Simple_California_Demo_7(hierarchy):
    """notebooks/tabular_examples/model_agnostic/Simple California Demo.ipynb: the
    CoalitionExplainer cells with shap's own CoalitionExplainer (skipped where it fails on a
    one-output model: shap before 0.54 with NumPy 2). The notebook runs the two non-binary
    hierarchies through ``shap.PartitionExplainer(..., partition_tree=...)``, which ignores
    ``partition_tree`` (its values are the masker's binary Owen values); here they go through
    ``CoalitionExplainer``, the class that takes them, and jaxshap's ``PartitionExplainer`` refuses
    the argument with a ValueError that says so."""
    reason = shaps_coalition_explainer_runs()
    if reason:
        pytest.skip(reason)
    X, y, model, references = california_xgb()
    trees = {"flat": HIERARCHY_FLAT, "nonbinary": HIERARCHY_NONBINARY, "nonbinary2": HIERARCHY_NONBINARY2}
    tree = trees.get(hierarchy) or binary_hierarchy(shap.utils.partition_tree(X), list(X.columns))

    def example(shap):
        partition_masker = shap.maskers.Partition(X)
        partition_explainer = shap.CoalitionExplainer(model.predict, partition_masker, partition_tree=tree)
        return partition_explainer(references)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)
    assert_exact(got.base_values, want.base_values, what="base_values")
    assert list(got.feature_names) == list(want.feature_names)
    if hierarchy == "nonbinary":
        with pytest.raises(ValueError, match="CoalitionExplainer"):
            jaxshap.PartitionExplainer(model.predict, jaxshap.maskers.Partition(X), partition_tree=tree)


# --- Simple Kernel SHAP.ipynb ------------------------------------------------------------------------
def simple_kernel_f(X):
    np.random.seed(0)
    beta = np.random.rand(X.shape[-1])
    return np.dot(X, beta) + 10


def test_Simple_Kernel_SHAP_1():
    """notebooks/tabular_examples/model_agnostic/Simple Kernel SHAP.ipynb:
    ``shap.KernelExplainer(f, reference.reshape(1, M)).shap_values(x)`` for one 1-D row and
    ``expected_value``."""
    M = 4
    np.random.seed(1)
    x = np.random.randn(M)
    reference = np.zeros(M)

    def example(shap):
        explainer = shap.KernelExplainer(simple_kernel_f, np.reshape(reference, (1, len(reference))))
        shap_values = explainer.shap_values(x)
        return shap_values, explainer.expected_value

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1], what="expected_value")


# --- Squashing Effect.ipynb ----------------------------------------------------------------------
def squash_f(X):
    return (X[:, 0] > 0) * 1 + (X[:, 1] > 1.5) * 100


def squash_f_logistic(X):
    return scipy.special.expit(squash_f(X))


@functools.lru_cache(maxsize=None)
def squash_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    X[0, 0] = 0
    X[0, 1] = 0
    return pd.DataFrame(X, columns=["A", "B", "C", "D"])


def _squashing_example(f):
    """``shap.KernelExplainer(f, X)`` with a 500-row DataFrame (kept whole, as shap does),
    ``shap_values(X.values[0:2, :])`` and ``float(explainer.expected_value)``."""
    X = squash_data()

    def example(shap):
        explainer = shap.KernelExplainer(f, X)
        return explainer.shap_values(X.values[0:2, :]), float(explainer.expected_value)

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1], what="expected_value")


def test_Squashing_Effect_1():
    """notebooks/tabular_examples/model_agnostic/Squashing Effect.ipynb: the margin function."""
    _squashing_example(squash_f)


def test_Squashing_Effect_2():
    """notebooks/tabular_examples/model_agnostic/Squashing Effect.ipynb: its logistic."""
    _squashing_example(squash_f_logistic)


# --- README.md (KernelSHAP on an SVM) --------------------------------------------------------------
def test_README_1():
    """README.md, "Model agnostic example with KernelExplainer":
    ``shap.KernelExplainer(svm.predict_proba, X_train, link="logit").shap_values(X_test,
    nsamples=100)``: with 4 features ``nsamples=100`` covers every coalition (exact)."""
    from sklearn.svm import SVC

    X_train, X_test, Y_train, Y_test = train_test_split(*shap.datasets.iris(), test_size=0.2, random_state=0)
    svm = SVC(kernel="rbf", probability=True, random_state=0).fit(X_train, Y_train)

    def example(shap):
        explainer = shap.KernelExplainer(svm.predict_proba, X_train, link="logit")
        return explainer.shap_values(X_test, nsamples=100), explainer.expected_value

    want, got = example(shap), example(jaxshap)
    assert_exact(got[0], want[0])
    assert_exact(got[1], want[1], what="expected_value")
