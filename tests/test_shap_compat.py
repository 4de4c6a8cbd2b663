"""shap's documented workflows on jaxshap (issue 28): names, arguments, backgrounds, models and
data as shap takes them, and the hostile-input defects; each against shap or a definition."""

import itertools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from oracle import interventional_shapley

shap = pytest.importorskip("shap")
pd = pytest.importorskip("pandas")

M = 4
RNG = np.random.default_rng(28)
W = RNG.normal(size=(M, 5))
BIG = RNG.normal(size=(150, M))  # more than 100 rows: shap keeps 100 of them
X = RNG.normal(size=(3, M))


def regress(Z):
    return np.tanh(np.asarray(Z, np.float64) @ W).sum(1)


def proba(Z):
    s = np.tanh(np.asarray(Z, np.float64) @ W)[:, :3]
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def shapley_of_game(v, m):
    """Brute-force Shapley values of a set function ``v(frozenset) -> float``."""
    phi = np.zeros(m)
    for j in range(m):
        others = [i for i in range(m) if i != j]
        for r in range(m):
            for S in itertools.combinations(others, r):
                w = math.factorial(r) * math.factorial(m - r - 1) / math.factorial(m)
                phi[j] += w * (v(frozenset(S) | {j}) - v(frozenset(S)))
    return phi


# --- point 3: shap's names and arguments ------------------------------------------------------
def test_explainers_module_has_shaps_names():
    ex = jaxshap.explainers
    assert ex.Exact is jaxshap.ExactExplainer and ex.Permutation is jaxshap.PermutationExplainer
    assert ex.Kernel is jaxshap.KernelExplainer and ex.Linear is jaxshap.LinearExplainer
    assert ex.Tree is jaxshap.TreeExplainer and ex.GPUTree is jaxshap.TreeExplainer
    assert ex.Partition is jaxshap.PartitionExplainer


def test_partition_explainer_matches_shaps_on_raw_rows():
    want = quiet(shap.PartitionExplainer(regress, BIG), X).values
    ours = quiet(jaxshap.PartitionExplainer, regress, BIG)
    assert isinstance(ours.masker, jaxshap.maskers.Partition) and ours.masker.data.shape[0] == 100
    np.testing.assert_allclose(np.asarray(ours(X).values), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="partition_tree"):
        jaxshap.PartitionExplainer(regress, BIG[:20], partition_tree={"a": "a"})


def test_kernel_explainer_takes_shaps_keywords_and_shap_values_arguments():
    ref = shap.KernelExplainer(model=proba, data=BIG[:20], link="logit")
    ours = jaxshap.KernelExplainer(model=proba, data=BIG[:20], link="logit")
    want = ref.shap_values(X, nsamples=14, silent=True)  # 2**4 - 2: every coalition, exact in both
    np.testing.assert_allclose(ours.shap_values(X, nsamples=14, l1_reg="auto", silent=True), want, atol=5e-5)
    budget = ours.shap_values(X, nsamples=6)  # nsamples is this call's budget, n_coalitions=6
    np.testing.assert_allclose(budget, jaxshap.KernelExplainer(proba, BIG[:20], 6, link="logit").shap_values(X), atol=1e-6)
    with pytest.raises(ValueError, match="l1_reg"):
        ours.shap_values(X, l1_reg="num_features(2)")
    with pytest.raises(TypeError, match="both `data` and `background`"):
        jaxshap.KernelExplainer(proba, background=BIG[:20], data=BIG[:20])


def test_max_evals_is_shaps_permutation_budget():
    ex = jaxshap.explainers.Permutation(regress, BIG[:20])
    a = ex(X, max_evals=500)  # 2 * (500 // (2 M + 1)) = 110 walks
    b = jaxshap.PermutationExplainer(regress, BIG[:20], n_permutations=110)(X)
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match=r"max_evals=5 is too low.*2 \* num_features \+ 1 = 9"):
        ex(X, max_evals=5)
    with pytest.raises(ValueError, match="It takes 16 masked evaluations"):
        jaxshap.explainers.Exact(regress, BIG[:20])(X, max_evals=10)
    np.testing.assert_allclose(
        np.asarray(jaxshap.explainers.Exact(regress, BIG[:20])(X, max_evals=100000).values),
        interventional_shapley(regress, X, BIG[:20]), rtol=1e-6, atol=1e-7,
    )


def test_explainer_feature_names_output_names_and_seed():
    ex = jaxshap.Explainer(proba, BIG[:20], algorithm="permutation", feature_names=list("abcd"),
                           output_names=["x", "y", "z"], seed=7)
    expl = ex(X)
    assert expl.feature_names == list("abcd") and expl.output_names == ["x", "y", "z"]
    again = jaxshap.PermutationExplainer(proba, BIG[:20])(X, key=jax.random.key(7))
    other = jaxshap.PermutationExplainer(proba, BIG[:20])(X, key=jax.random.key(8))
    np.testing.assert_allclose(np.asarray(expl.values), np.asarray(again.values), rtol=1e-6, atol=1e-8)
    assert np.abs(np.asarray(expl.values) - np.asarray(other.values)).max() > 1e-4  # the seed is used
    with pytest.raises(ValueError, match="`output_names` has 2 names"):
        jaxshap.Explainer(proba, BIG[:20], output_names=["x", "y"])


def test_feature_perturbation_none_is_the_default():
    from sklearn.ensemble import RandomForestRegressor

    rf = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(BIG, regress(BIG))
    assert jaxshap.TreeExplainer(rf, feature_perturbation=None).feature_perturbation == "tree_path_dependent"
    lin = jaxshap.LinearExplainer((np.ones(M), 0.0), BIG[:50], feature_perturbation=None)
    assert lin.feature_perturbation == "interventional"


def test_log_loss_expected_value_is_a_function_of_the_label():
    xgboost = pytest.importorskip("xgboost")
    y = regress(BIG) > 0
    model = xgboost.XGBClassifier(n_estimators=10, max_depth=2).fit(BIG, y)
    ours = jaxshap.TreeExplainer(model, BIG[:50], feature_perturbation="interventional", model_output="log_loss")
    ref = shap.TreeExplainer(model, BIG[:50], feature_perturbation="interventional", model_output="log_loss")
    p = model.predict_proba(BIG[:50])[:, 1]
    for label in (0, 1):
        loss = -np.log(p if label else 1 - p).mean()  # the definition: mean loss over the background
        np.testing.assert_allclose(ours.expected_value(label), loss, rtol=1e-6)
        np.testing.assert_allclose(ours.expected_value(label), ref.expected_value(label), rtol=1e-5)
    total = ours.shap_values(X, y[:3]).sum(1) + np.array([ours.expected_value(v) for v in y[:3]])
    q = model.predict_proba(X)[:, 1]
    np.testing.assert_allclose(total, -np.log(np.where(y[:3], q, 1 - q)), rtol=1e-4)


def test_linear_explainer_takes_an_independent_masker():
    coef = np.arange(1.0, M + 1)
    masker = jaxshap.maskers.Independent(BIG[:60])
    ours = jaxshap.LinearExplainer((coef, 0.5), masker)(X)
    np.testing.assert_allclose(np.asarray(ours.values), coef * (X - BIG[:60].mean(0)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="correlation_dependent"):
        jaxshap.LinearExplainer((coef, 0.5), masker, feature_perturbation="correlation_dependent")


# --- point 1: the background each class uses ---------------------------------------------------
def test_each_class_uses_shaps_background_rows(sampled_silently):
    from sklearn.ensemble import RandomForestRegressor

    kept = shap.maskers.Independent(BIG).data  # shap's 100 rows
    for cls in (jaxshap.ExactExplainer, jaxshap.PermutationExplainer):
        with sampled_silently("keeping a random sample of 100"):  # as shap: no warning (issue 51)
            ex = cls(regress, BIG)
        np.testing.assert_array_equal(np.asarray(ex.masker.data), kept)
    with pytest.warns(UserWarning, match="all 150 background rows"):
        kernel = jaxshap.KernelExplainer(regress, BIG)  # shap's KernelExplainer keeps every row, and warns
    assert kernel.masker.data.shape[0] == 150
    rf = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(BIG, regress(BIG))
    with sampled_silently("keeping shap's sample of 100"):
        tree = jaxshap.TreeExplainer(rf, BIG)
    np.testing.assert_allclose(np.asarray(tree(X).values), quiet(shap.TreeExplainer(rf, BIG).shap_values, X), atol=1e-5)
    lin = quiet(jaxshap.LinearExplainer, (np.ones(M), 0.0), BIG)
    np.testing.assert_allclose(float(lin.expected_value), kept.mean(0).sum(), rtol=1e-6)
    every = jaxshap.ExactExplainer(regress, jaxshap.maskers.Independent(BIG, max_samples=None))
    assert every.masker.data.shape[0] == 150  # the documented way to keep every row


# --- point 5: models and data as shap takes them -------------------------------------------------
def test_numpy_model_gets_float64_rows():
    seen = []

    def model(Z):
        seen.append(np.asarray(Z).dtype)
        return regress(Z)

    ex = jaxshap.ExactExplainer(model, BIG[:20])
    got = np.asarray(ex(X).values)
    assert set(seen) == {np.dtype(np.float64)} and got.dtype == np.float64
    np.testing.assert_allclose(got, interventional_shapley(regress, X, BIG[:20]), rtol=1e-6, atol=1e-7)
    frame = pd.DataFrame(BIG[:20], columns=list("abcd"))
    seen.clear()
    quiet(jaxshap.Explainer(model, frame), pd.DataFrame(X, columns=list("abcd")))
    assert set(seen) == {np.dtype(np.float64)}
    seen.clear()
    jaxshap.ExactExplainer(model, BIG[:20].astype(np.float32))(X.astype(np.float32))
    assert set(seen) == {np.dtype(np.float32)}  # float32 rows stay float32


def test_function_masker_as_shaps_custom_masker():
    def zero_masker(mask, x):
        return (x * mask).reshape(1, len(x))

    ex = jaxshap.Explainer(regress, zero_masker, algorithm="exact")
    got = np.asarray(ex(X).values)
    for r, x in enumerate(X):
        want = shapley_of_game(lambda S: regress((x * np.isin(np.arange(M), list(S)))[None])[0], M)
        np.testing.assert_allclose(got[r], want, atol=1e-5)
    sampled = jaxshap.Explainer(regress, zero_masker)  # shap samples permutations
    assert "PermutationExplainer" in repr(sampled(X[:1]) and sampled)
    with pytest.raises(TypeError, match="jaxshap.Explainer"):
        jaxshap.ExactExplainer(regress, zero_masker)


def _tree_dict(tree):
    return {
        "children_left": tree.children_left, "children_right": tree.children_right,
        "children_default": tree.children_right.copy(), "features": tree.feature, "thresholds": tree.threshold,
        "values": tree.value.reshape(tree.value.shape[0], 1), "node_sample_weight": tree.weighted_n_node_samples,
    }


def test_shaps_dictionary_tree_format():
    from sklearn.tree import DecisionTreeRegressor

    wide = np.concatenate([BIG, RNG.normal(size=(150, 2))], axis=1)  # the last columns are never split on
    tree = DecisionTreeRegressor(max_depth=3, random_state=0).fit(wide[:, :M], regress(BIG))
    model = {"trees": [_tree_dict(tree.tree_)]}
    ours = jaxshap.TreeExplainer(model).shap_values(wide[:5])
    want = shap.TreeExplainer(model).shap_values(wide[:5])
    np.testing.assert_allclose(ours, want, atol=1e-6)
    np.testing.assert_allclose(ours.sum(1) + float(jaxshap.TreeExplainer(model).expected_value),
                               tree.predict(wide[:5, :M]), atol=1e-5)
    broken = {"trees": [{k: v for k, v in _tree_dict(tree.tree_).items() if k != "node_sample_weight"}]}
    with pytest.raises(ValueError, match="node_sample_weight"):
        jaxshap.TreeExplainer(broken)


def test_object_arrays_with_none_as_missing():
    xgboost = pytest.importorskip("xgboost")
    model = xgboost.XGBRegressor(n_estimators=5, max_depth=2).fit(BIG, regress(BIG))
    rows = X.astype(object)
    rows[0, 1] = None
    nan = X.copy()
    nan[0, 1] = np.nan
    np.testing.assert_array_equal(np.asarray(jaxshap.TreeExplainer(model)(rows).values),
                                  np.asarray(jaxshap.TreeExplainer(model)(nan).values))
    ex = jaxshap.ExactExplainer(lambda Z: np.nan_to_num(np.asarray(Z)).sum(1), BIG[:5])
    np.testing.assert_array_equal(np.asarray(ex(rows).values), np.asarray(ex(nan).values))
    with pytest.raises(TypeError, match="must hold numbers"):
        ex(np.array([["a", 1, 2, 3]], dtype=object))


def test_kernel_explainer_on_over_a_thousand_sparse_features():
    sparse = pytest.importorskip("scipy.sparse")
    m = 1100  # C(M, M / 2) overflows a float64 (from M = 1030)
    bg = sparse.random(4, m, density=0.01, format="csr", random_state=0)
    rows = sparse.random(2, m, density=0.01, format="csr", random_state=1)
    w = np.random.default_rng(0).normal(size=m)
    got = jaxshap.KernelExplainer(lambda Z: np.asarray(Z) @ w, bg, n_coalitions=4 * m)(rows)
    want = w * (rows.toarray() - bg.toarray().mean(0))  # a linear model's values
    np.testing.assert_allclose(np.asarray(got.values), want, atol=1e-4 * np.abs(want).max())


def test_sample_is_shaps_sample():
    frame = pd.DataFrame(BIG, columns=list("abcd"))
    pd.testing.assert_frame_equal(jaxshap.sample(frame, 100), shap.sample(frame, 100))
    np.testing.assert_array_equal(jaxshap.sample(BIG, 10, random_state=3), shap.sample(BIG, 10, random_state=3))
    assert jaxshap.sample(BIG[:5], 100) is not None and jaxshap.sample(BIG[:5], 100).shape == (5, M)


# --- point 6: hostile inputs ---------------------------------------------------------------------
def test_explain_batches_on_an_empty_array_yields_nothing():
    ex = jaxshap.ExactExplainer(lambda Z: Z.sum(-1), np.zeros((3, M), np.float32))
    assert list(ex.explain_batches(np.zeros((0, M), np.float32))) == []


def test_an_int_key_too_large_names_key():
    ex = jaxshap.ExactExplainer(lambda Z: Z.sum(-1), np.zeros((3, M), np.float32))
    for bad in (2**63, 2**70, -(2**63) - 1):  # jax.random.key itself raises a bare OverflowError
        with pytest.raises(ValueError, match=r"`key` must be .*int seed in \[-2\*\*63, 2\*\*63\)"):
            ex(X.astype(np.float32), key=bad)
    ex(X.astype(np.float32), key=2**40)  # what jax.random.key takes, taken as it does


def test_gaussian_masker_centres_a_float32_feature_with_mean_1e6():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(500, 3))
    A[:, 1] += 0.8 * A[:, 0]
    A[:, 2] += 1e6
    X32 = A.astype(np.float32)
    coef = np.array([1.0, 2.0, 3.0])

    def model(Z):  # a model that centres its own input: its outputs are of order one
        return (Z - jnp.asarray([0.0, 0.0, 1e6], Z.dtype)) @ jnp.asarray(coef, Z.dtype)

    got = np.asarray(jaxshap.ExactExplainer(model, jaxshap.maskers.Gaussian.fit(X32))(X32[:5]).values)
    with jax.enable_x64(True):
        X64 = X32.astype(np.float64)  # the same numbers, in float64
        want = np.asarray(jaxshap.ExactExplainer(model, jaxshap.maskers.Gaussian.fit(X64))(X64[:5]).values)
    assert np.abs(got - want).max() < 6e-4 * np.abs(want).max()


def test_a_host_model_given_float64_rows_receives_them_in_float64_on_every_thread():
    """The rows reach a NumPy model as float64 whichever thread runs the callback: XLA may run it on
    a thread of its own, where the explainer's local float64 mode does not hold and JAX would cut
    the rows to float32 (a KNN classifier's ties then break otherwise, silently)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)) + 0.1  # values that float32 cannot hold exactly
    seen = []

    def model(Z):
        seen.append(np.asarray(Z).dtype)
        return np.asarray(Z) @ np.arange(1.0, 5.0)

    for _ in range(3):
        explainer = jaxshap.Explainer(model, X[:100])
        for n in (3, 8, 5, 13, 20):
            explainer(X[100 : 100 + n])
    assert seen and set(seen) == {np.dtype(np.float64)}
