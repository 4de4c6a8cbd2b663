"""The shap user's surface (issue 16): drop-in calls, links, backgrounds, data frames, model
errors and saving, each checked against shap on identical inputs or a brute-force oracle."""

import functools
import itertools
import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from oracle import interventional_game, interventional_shapley, shapley_from_game

shap = pytest.importorskip("shap")
pd = pytest.importorskip("pandas")

M = 4
RNG = np.random.default_rng(16)
W1 = RNG.normal(size=(M, 6))
W2 = RNG.normal(size=(6, 3))
BG = RNG.normal(size=(12, M)).astype(np.float32)
X = RNG.normal(size=(5, M)).astype(np.float32)
FULL = 2**M - 2  # a KernelSHAP budget that enumerates every coalition (exact, in shap too)


# module-level models, so that explainers built on them can be pickled
def regress(Z):
    return np.tanh(np.asarray(Z, np.float64) @ W1) @ W2[:, 0]


def proba(Z):
    """Class probabilities [n, 3] (a softmax), a NumPy model."""
    s = np.tanh(np.asarray(Z, np.float64) @ W1) @ W2
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def p_one(Z):
    """A probability [n] of one class."""
    return proba(Z)[:, 1]


def jregress(Z):
    return jnp.tanh(Z @ jnp.asarray(W1, Z.dtype)) @ jnp.asarray(W2[:, 0], Z.dtype)


def nan_tolerant(Z):
    """A NumPy model that handles missing values itself (as XGBoost does): NaN counts as 0.5."""
    Z = np.asarray(Z, np.float64)
    return regress(np.where(np.isnan(Z), 0.5, Z))


@functools.lru_cache(maxsize=None)
def exact_regress():
    """One shared ExactExplainer(regress, BG): its compiled programs are reused across tests."""
    return jaxshap.ExactExplainer(regress, BG)


# --- 1. shap_values / expected_value / jaxshap.Explainer -------------------------------------------
@pytest.mark.parametrize("model", [regress, proba], ids=["single", "multi"])
def test_kernel_shap_values_and_expected_value_match_shap(model):
    ours = jaxshap.KernelExplainer(model, BG, n_coalitions=FULL)
    ref = shap.KernelExplainer(model, BG)
    want = np.asarray(ref.shap_values(X, nsamples=FULL, silent=True))
    got = ours.shap_values(X)
    assert isinstance(got, np.ndarray) and got.shape == want.shape  # [n, M] or [n, M, K], as shap
    np.testing.assert_allclose(got, want, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.expected_value), np.asarray(ref.expected_value), atol=1e-6)
    assert np.shape(ours.expected_value) == np.shape(ref.expected_value)
    one = ours.shap_values(X[0])  # one row as a 1-D array -> [M] (or [M, K]), as shap
    assert one.shape == np.shape(ref.shap_values(X[0], nsamples=FULL, silent=True))
    np.testing.assert_allclose(one, want[0], atol=2e-5)


def test_expected_value_on_every_explainer():
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression

    y = regress(BG)
    exps = {
        "exact": jaxshap.ExactExplainer(jregress, BG),
        "permutation": jaxshap.PermutationExplainer(jregress, BG, n_permutations=4),
        "kernel": jaxshap.KernelExplainer(jregress, BG, n_coalitions=FULL),
    }
    for name, ex in exps.items():
        assert np.ndim(ex.expected_value) == 0, name
        np.testing.assert_allclose(ex.expected_value, y.mean(), rtol=1e-5, err_msg=name)
        expl = ex(X[:2])
        np.testing.assert_allclose(np.asarray(expl.base_values), ex.expected_value, rtol=1e-5, err_msg=name)
    lin = LinearRegression().fit(BG, y)
    ex = jaxshap.LinearExplainer(lin, BG)
    ref = shap.LinearExplainer(lin, BG)
    np.testing.assert_allclose(np.asarray(ex.expected_value), ref.expected_value, rtol=1e-5)
    np.testing.assert_allclose(ex.shap_values(X), ref.shap_values(X), atol=1e-5)
    forest = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(BG, y)
    ex, ref = jaxshap.TreeExplainer(forest), shap.TreeExplainer(forest)
    np.testing.assert_allclose(np.asarray(ex.expected_value), np.ravel(ref.expected_value)[0], rtol=1e-5)
    np.testing.assert_allclose(ex.shap_values(X), ref.shap_values(X), atol=1e-5)


def test_auto_explainer_picks_as_shap_and_matches_its_values(sampled_silently):
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(3)
    big = rng.normal(size=(150, M))  # more than 100 rows: both libraries keep the same 100
    y = regress(big)
    cases = [
        (LinearRegression().fit(big, y), big, "LinearExplainer"),
        (RandomForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(big, y), big, "TreeExplainer"),
        (regress, big, "ExactExplainer"),
        (lambda Z: np.asarray(Z).sum(1), np.zeros((5, 12)), "PermutationExplainer"),
    ]
    for model, data, name in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours, ref = jaxshap.Explainer(model, data), shap.Explainer(model, data)
        assert type(ours).__name__ == type(ref).__name__ == name
        assert isinstance(ours, jaxshap.Explainer)
        assert f"{name}(" in repr(ours) and "chosen by jaxshap.Explainer" in repr(ours)
    with sampled_silently("keeping a random sample of 100"):
        ours = jaxshap.Explainer(regress, big)
    kept = shap.Explainer(regress, big).masker.data  # shap's 100 rows: the oracle's background
    # the same rows, in the dtype shap gives them to a NumPy model (float64 here)
    assert np.asarray(ours.masker.data).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(ours.masker.data), kept)
    np.testing.assert_allclose(np.asarray(ours(X[:2]).values), interventional_shapley(regress, X[:2], kept), atol=2e-5)
    assert "Partition" in repr(jaxshap.Explainer(regress, jaxshap.maskers.Partition(BG)))
    kernel = jaxshap.Explainer(regress, BG, algorithm="kernel")
    assert isinstance(kernel, jaxshap.KernelExplainer) and "algorithm='kernel'" in repr(kernel)
    with pytest.raises(TypeError, match=r"not callable.*model.predict"):
        jaxshap.Explainer(object.__new__(type("Model", (), {"predict": None})), BG)
    with pytest.raises(ValueError, match="`algorithm` must be one of"):
        jaxshap.Explainer(regress, BG, algorithm="deep")


# --- 2. links ------------------------------------------------------------------------------------
def test_logit_link_matches_shap_kernel_and_the_oracle():
    ours = jaxshap.KernelExplainer(p_one, BG, n_coalitions=FULL, link="logit")
    ref = shap.KernelExplainer(p_one, BG, link="logit")
    want = ref.shap_values(X, nsamples=FULL, silent=True)
    np.testing.assert_allclose(ours.shap_values(X), want, atol=5e-5)
    np.testing.assert_allclose(ours.expected_value, ref.expected_value, atol=1e-5)
    logit = lambda p: np.log(p) - np.log1p(-p)
    game = lambda x: (lambda s: logit(interventional_game(p_one, x, BG)(s)))
    oracle = np.stack([shapley_from_game(game(x), M) for x in X])
    exact = jaxshap.ExactExplainer(p_one, BG, link="logit")(X)
    np.testing.assert_allclose(np.asarray(exact.values), oracle, atol=5e-5)
    np.testing.assert_allclose(np.asarray(exact.values).sum(1) + np.asarray(exact.base_values), logit(p_one(X)), atol=5e-5)
    perm = jaxshap.PermutationExplainer(p_one, BG, n_permutations=4, link="logit")(X)
    np.testing.assert_allclose(np.asarray(perm.values).sum(1) + np.asarray(perm.base_values), logit(p_one(X)), atol=5e-5)


def test_logit_link_is_finite_at_zero_and_one():
    def hard(Z):  # probabilities of exactly 0 and 1
        return (np.asarray(Z)[:, 0] > 0).astype(np.float64)

    expl = jaxshap.ExactExplainer(hard, BG, link="logit")(X)
    values = np.asarray(expl.values)
    assert np.isfinite(values).all() and np.isfinite(np.asarray(expl.base_values)).all()
    top = float(np.log1p(-np.finfo(np.float32).epsneg) - np.log(np.finfo(np.float32).epsneg))  # logit(1 - eps)
    total = values.sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, np.where(X[:, 0] > 0, top, -top), rtol=1e-5)
    with pytest.raises(ValueError, match=r"link='logit'.*outside \[0, 1\].*link='identity'"):
        jaxshap.ExactExplainer(regress, BG, link="logit")
    with pytest.raises(ValueError, match="`link` must be 'identity' or 'logit'"):
        jaxshap.KernelExplainer(regress, BG, link="probit")


# --- 3. output names from classes_ ----------------------------------------------------------------
def test_output_names_from_classes():
    from sklearn.linear_model import LogisticRegression

    y = np.array(["ant", "bee", "cat"])[np.argmax(proba(BG), 1)]
    y[:3] = ["ant", "bee", "cat"]
    clf = LogisticRegression().fit(BG, y)
    expl = jaxshap.ExactExplainer(clf.predict_proba, BG)(X)
    assert expl.output_names == ["ant", "bee", "cat"]
    np.testing.assert_array_equal(np.asarray(expl[..., "cat"].values), np.asarray(expl.values)[..., 2])
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), clf.predict_proba(X), atol=1e-5)
    assert jaxshap.LinearExplainer(clf, BG)(X).output_names == ["ant", "bee", "cat"]
    from sklearn.tree import DecisionTreeClassifier

    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(BG, y)
    assert jaxshap.TreeExplainer(tree)(X).output_names == ["ant", "bee", "cat"]


# --- 4. backgrounds as shap takes them ---------------------------------------------------------------
def test_independent_keeps_shaps_100_rows_silently_as_shap(sampled_silently):
    rng = np.random.default_rng(5)
    big = rng.normal(size=(130, M)).astype(np.float32)
    with sampled_silently("130 rows; keeping a random sample of 100 (max_samples=100"):
        masker = jaxshap.maskers.Independent(big)
    with sampled_silently("max_samples=None to keep all 130 rows"):
        jaxshap.maskers.Independent(big)
    np.testing.assert_array_equal(np.asarray(masker.data), shap.maskers.Independent(big).data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jaxshap.maskers.Independent(big, max_samples=None).data.shape == (130, M)
        every = jaxshap.ExactExplainer(regress, jaxshap.maskers.Independent(big, max_samples=None))
        assert every.masker.data.shape == (130, M)  # how to keep every row
    # an array given to ExactExplainer: shap's 100 rows, as shap's ExactExplainer (issue 28)
    with sampled_silently("keeping a random sample of 100"):
        exact = jaxshap.ExactExplainer(regress, big)
    np.testing.assert_array_equal(np.asarray(exact.masker.data), shap.maskers.Independent(big).data)


def test_weighted_backgrounds_kmeans_and_mean_dict():
    rows = BG[:3]
    dup = np.concatenate([rows[:1], rows[:1], rows[1:]])  # row 0 twice = weight 2
    a = jaxshap.ExactExplainer(regress, jaxshap.maskers.Independent(rows, weights=[2.0, 1.0, 1.0]))(X)
    b = jaxshap.ExactExplainer(regress, dup)(X)
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), atol=1e-5)
    np.testing.assert_allclose(np.asarray(a.base_values), np.asarray(b.base_values), atol=1e-6)
    summary = shap.kmeans(BG, 3)  # shap's weighted summary: centres and cluster sizes
    ours = jaxshap.KernelExplainer(regress, jaxshap.maskers.Independent(summary), n_coalitions=FULL)
    ref = shap.KernelExplainer(regress, summary)
    np.testing.assert_allclose(ours.shap_values(X), ref.shap_values(X, nsamples=FULL, silent=True), atol=2e-5)
    np.testing.assert_allclose(ours.expected_value, ref.expected_value, atol=1e-6)
    mean = BG.mean(0)
    c = jaxshap.ExactExplainer(regress, jaxshap.maskers.Independent({"mean": mean, "cov": np.cov(BG.T)}))(X)
    np.testing.assert_allclose(np.asarray(c.values), interventional_shapley(regress, X, mean[None]), atol=2e-5)
    with pytest.raises(ValueError, match="`weights` must be finite, non-negative"):
        jaxshap.maskers.Independent(rows, weights=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="`weights` has 2 entries but the background has 3 rows"):
        jaxshap.maskers.Independent(rows, weights=[1.0, 1.0])


def _owen_oracle(model, x, background, Z):
    """Owen values by enumerating every hierarchy-consistent order (each node flips or not)."""
    m = x.shape[0]
    children = {m + t: (int(a), int(b)) for t, (a, b) in enumerate(Z[:, :2])}

    def order(node, flips):
        if node < m:
            return [node]
        a, b = children[node]
        first, second = (b, a) if flips[node - m] else (a, b)
        return order(first, flips) + order(second, flips)

    game = interventional_game(model, x, background)
    cache = {}
    v = lambda s: cache.setdefault(s, game(s))
    phi = np.zeros(m)
    orders = [order(2 * m - 2, f) for f in itertools.product([0, 1], repeat=m - 1)]
    for perm in orders:
        for k, j in enumerate(perm):
            phi[j] += v(frozenset(perm[: k + 1])) - v(frozenset(perm[:k]))
    return phi / len(orders)


def test_partition_masker_owen_values_against_shap_and_oracle():
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(8)
    bg = rng.normal(size=(15, 5)).astype(np.float32)
    bg[:, 1] += bg[:, 0]
    bg[:, 4] += 2 * bg[:, 3]
    w = rng.normal(size=(5, 4))
    model = lambda Z: np.tanh(np.asarray(Z, np.float64) @ w).sum(1) + np.asarray(Z)[:, 0] * np.asarray(Z)[:, 2]
    x = rng.normal(size=(1, 5)).astype(np.float32)
    for method in ("single", "complete", "average"):  # our NumPy clustering is SciPy's
        Z = jaxshap.maskers.Partition(bg, linkage=method).clustering
        np.testing.assert_allclose(Z, linkage(pdist(bg.T.astype(np.float64), "correlation"), method), atol=1e-9)
    masker = jaxshap.maskers.Partition(bg)
    Z = masker.clustering
    ours = jaxshap.ExactExplainer(model, masker)(x)
    ref = shap.ExactExplainer(model, shap.maskers.Partition(bg, clustering=Z))(x)
    np.testing.assert_allclose(np.asarray(ours.values), ref.values, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.values), np.stack([_owen_oracle(model, r, bg, Z) for r in x]), atol=2e-5)
    assert masker.owen_coalitions[0].shape[0] < 2**5  # fewer coalitions than all of them
    perm = jaxshap.PermutationExplainer(model, masker, n_permutations=200)(x, key=jax.random.key(2))
    err = np.abs(np.asarray(perm.values) - ref.values)
    assert (err <= 5 * np.asarray(perm.stderr) + 1e-5).all(), (err, perm.stderr)
    np.testing.assert_allclose(np.asarray(perm.values).sum(1) + np.asarray(perm.base_values), model(x), atol=2e-5)
    with pytest.raises(ValueError, match="KernelExplainer.*no Owen form"):
        jaxshap.KernelExplainer(model, masker)
    with pytest.raises(ValueError, match=r"linkage matrix of shape \[M - 1, 4\]"):
        jaxshap.maskers.Partition(bg, clustering=np.zeros((2, 4)))


def test_partition_permutation_flips_are_balanced_and_exact_on_shallow_hierarchies():
    from jaxshap._coalitions._hierarchy import balanced_flips

    flips = np.asarray(jax.jit(balanced_flips, static_argnums=(1, 2))(jax.random.key(3), 16, 7))  # 2 blocks of 8
    for block in (flips[:8], flips[8:]):
        assert (block.sum(0) == 4).all()  # every node flips in half the orders
        for a, b in itertools.combinations(range(7), 2):  # every pair in each combination twice
            assert np.bincount(2 * block[:, a] + block[:, b], minlength=4).tolist() == [2, 2, 2, 2]
    assert not (flips[:8] == flips[8:]).all()  # a fresh scramble per block
    # a balanced hierarchy of depth 3: one block of orders (with their reverses) gives exact Owen values
    rng = np.random.default_rng(5)
    bg = rng.normal(size=(12, 8)).astype(np.float32)
    w = rng.normal(size=(8, 6))
    model = lambda Z: np.tanh(np.asarray(Z, np.float64) @ w).sum(1) * (1 + np.asarray(Z, np.float64)[:, 1] * np.asarray(Z, np.float64)[:, 6])
    Z = np.array([[0, 1, 1, 2], [2, 3, 1, 2], [4, 5, 1, 2], [6, 7, 1, 2], [8, 9, 2, 4], [10, 11, 2, 4], [12, 13, 3, 8]], float)
    masker = jaxshap.maskers.Partition(bg, clustering=Z)
    x = rng.normal(size=(3, 8)).astype(np.float32)
    owen = np.asarray(jaxshap.ExactExplainer(model, masker)(x).values)
    np.testing.assert_allclose(owen, np.stack([_owen_oracle(model, r, bg, Z) for r in x]), atol=1e-5)
    for seed in range(3):
        perm = jaxshap.PermutationExplainer(model, masker, n_permutations=16)(x, key=jax.random.key(seed))
        np.testing.assert_allclose(np.asarray(perm.values), owen, atol=1e-5)


# --- 5. data frames and inputs ------------------------------------------------------------------------
def test_dataframe_columns_are_matched_by_name():
    cols = ["age", "bmi", "bp", "s1"]
    bg, x = pd.DataFrame(BG, columns=cols), pd.DataFrame(X, columns=cols)
    ex = jaxshap.ExactExplainer(regress, bg)
    straight = ex(x)
    shuffled = ex(x[["bp", "age", "s1", "bmi"]])
    np.testing.assert_array_equal(np.asarray(shuffled.values), np.asarray(straight.values))
    assert shuffled.feature_names == cols
    # float64 here (a NumPy model given float64 rows): equal up to the summation order of another batch shape
    np.testing.assert_allclose(np.asarray(ex.shap_values(x[cols[::-1]])), np.asarray(straight.values), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match=r"missing \['s1'\].*not in the background \['sex'\]"):
        ex(x.rename(columns={"s1": "sex"}))
    with pytest.raises(ValueError, match=r"not in the background \['extra'\]"):
        ex(x.assign(extra=1.0))
    streamed = list(ex.explain_batches(x[cols[::-1]], batch_size=2))  # the last batch is padded
    np.testing.assert_allclose(np.concatenate([np.asarray(b.values) for b in streamed]), np.asarray(straight.values),
                               rtol=1e-12, atol=1e-15)
    lin = jaxshap.LinearExplainer((np.arange(1.0, 5.0), 0.5), bg)
    np.testing.assert_allclose(np.asarray(lin(x[cols[::-1]]).values), np.asarray(lin(x).values))


def test_mixed_and_nullable_columns():
    frame = pd.DataFrame(
        {
            "f": X[:, 0],
            "i": pd.array(np.round(X[:, 1] * 3).astype(int), dtype="Int64"),
            "b": pd.array(X[:, 2] > 0, dtype="boolean"),
            "n": X[:, 3].astype(np.float64),
        }
    )
    dense = frame.to_numpy(dtype=np.float64).astype(np.float32)
    ex = exact_regress()
    np.testing.assert_allclose(np.asarray(ex(frame).values), np.asarray(ex(dense).values), atol=1e-6)
    with_na = frame.copy()
    with_na.loc[1, "i"] = pd.NA  # becomes NaN, handed to the model
    got = jaxshap.ExactExplainer(nan_tolerant, BG)(with_na)
    assert np.isfinite(np.asarray(got.values)).all()
    with pytest.raises(TypeError, match=r"column 'c' is a pandas category column, but the masker knows no categories"):
        ex(frame.assign(c=pd.Categorical(["x"] * 5)).drop(columns="n"))


def test_sparse_rows_and_background():
    sp = pytest.importorskip("scipy.sparse")
    Xs = np.where(np.abs(X) > 0.7, X, 0).astype(np.float32)
    ex = jaxshap.ExactExplainer(regress, sp.csr_matrix(BG))
    dense = exact_regress()(Xs)
    got = ex(sp.csr_matrix(Xs))
    np.testing.assert_allclose(np.asarray(got.values), np.asarray(dense.values), atol=1e-6)
    assert got.values.shape == (5, M)
    np.testing.assert_allclose(ex.shap_values(sp.csc_matrix(Xs)), np.asarray(dense.values), atol=1e-6)


def test_nan_in_X_goes_to_the_model_as_in_shap():
    Xn = X.copy()
    Xn[1, 2] = np.nan
    ours = jaxshap.ExactExplainer(nan_tolerant, BG)(Xn)
    ref = shap.ExactExplainer(nan_tolerant, shap.maskers.Independent(BG, max_samples=len(BG)))(Xn)
    np.testing.assert_allclose(np.asarray(ours.values), ref.values, atol=2e-5)
    assert np.isnan(np.asarray(ours.data)[1, 2])
    with pytest.raises(ValueError, match=r"`X` holds NaN or inf in 1 row\(s\) \(rows 1; first at index \(1, 2\)\) "
                                         r"and the model returned NaN or inf on them"):
        exact_regress()(Xn)
    with pytest.raises(ValueError, match=r"NaN or inf for 2 row\(s\) of `X` \(rows 0, 3\)"):
        jaxshap.KernelExplainer(lambda Z: np.where(np.asarray(Z)[:, 0] > 5, np.nan, 1.0), BG)(
            np.where(np.arange(5)[:, None] % 3 == 0, 9.0, X).astype(np.float32)
        )


def test_zero_rows_complex_input_and_bad_keys():
    for ex in (jaxshap.ExactExplainer(proba, BG), jaxshap.PermutationExplainer(regress, BG, n_permutations=4)):
        expl = ex(np.zeros((0, M), np.float32))
        k = (3,) if ex.model.n_outputs == 3 else ()
        assert expl.values.shape == (0, M) + k and expl.base_values.shape == (0,) + k and len(expl) == 0
        assert (expl.stderr is None) == isinstance(ex, jaxshap.ExactExplainer)
        assert ex.shap_values(np.zeros((0, M))).shape == (0, M) + k
    with pytest.raises(TypeError, match="`X` holds complex numbers"):
        exact_regress()(X.astype(np.complex64))
    with pytest.raises(TypeError, match="`background` holds complex numbers"):
        jaxshap.ExactExplainer(regress, BG.astype(np.complex64))
    ex = jaxshap.PermutationExplainer(regress, BG, n_permutations=4)
    for bad in (0.5, "seed", np.zeros(3), True):
        with pytest.raises(TypeError, match="`key` must be a JAX PRNG key"):
            ex(X, key=bad)
    a, b = ex(X, key=jax.random.PRNGKey(3)), ex(X, key=3)  # legacy uint32 keys and int seeds still work
    assert a.values.shape == b.values.shape == (5, M)


# --- 6. model errors ---------------------------------------------------------------------------------
def test_model_exceptions_surface_with_the_models_own_message():
    def flaky(Z):  # fine on the two probe rows, fails on the explainer's batches
        if len(Z) > 2:
            raise KeyError("column 'bmi' went missing")
        return regress(Z)

    ex = jaxshap.ExactExplainer(flaky, BG)
    with pytest.raises(KeyError, match="column 'bmi' went missing"):
        ex(X)

    def reshaping(Z):
        out = regress(Z)
        return out if len(Z) <= 2 else np.stack([out, out], 1)

    with pytest.raises(ValueError, match=r"changed its output shape while being explained"):
        jaxshap.KernelExplainer(reshaping, BG)(X)


def test_background_width_is_checked_when_built():
    from sklearn.linear_model import LinearRegression

    lin = LinearRegression().fit(BG, regress(BG))
    with pytest.raises(ValueError, match=r"`background` has 3 columns but the model \(LinearRegression\) was fitted on 4"):
        jaxshap.ExactExplainer(lin.predict, BG[:, :3])
    w = jnp.ones((5,))
    with pytest.raises(TypeError, match=r"`model` could not be evaluated.*raised .*(dot_general|matmul|shape)"):
        jaxshap.KernelExplainer(lambda Z: Z @ w, BG)


# --- 7. saving -----------------------------------------------------------------------------------------
def test_explainers_pickle_and_save(tmp_path):
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression

    y = regress(BG)
    exps = [
        exact_regress(),
        jaxshap.PermutationExplainer(jregress, jaxshap.maskers.Partition(BG), n_permutations=4),
        jaxshap.KernelExplainer(p_one, BG, n_coalitions=FULL, link="logit"),
        jaxshap.LinearExplainer(LinearRegression().fit(BG, y), BG),
        jaxshap.TreeExplainer(RandomForestRegressor(n_estimators=2, max_depth=3, random_state=0).fit(BG, y)),
    ]
    for i, ex in enumerate(exps):
        before = np.asarray(ex(X).values)
        if i % 2:
            again = pickle.loads(pickle.dumps(ex))
        else:
            path = tmp_path / f"explainer{i}.pkl"
            ex.save(path)
            again = jaxshap.Explainer.load(path)
        assert type(again) is type(ex)
        np.testing.assert_allclose(again.shap_values(X), before, atol=1e-6, err_msg=type(ex).__name__)


def test_one_row_series_and_sparse_batches():
    sp = pytest.importorskip("scipy.sparse")
    cols = ["age", "bmi", "bp", "s1"]
    ex = jaxshap.ExactExplainer(regress, pd.DataFrame(BG, columns=cols))
    row = pd.DataFrame(X, columns=cols).iloc[2]
    want = np.asarray(ex(X[2:3]).values)[0]
    np.testing.assert_allclose(ex.shap_values(row[cols[::-1]]), want, atol=1e-6)  # matched by label
    with pytest.raises(ValueError, match=r"one row, a Series.*missing \['s1'\]"):
        ex(row.rename({"s1": "sex"}))
    batches = list(ex.explain_batches(sp.csr_matrix(X), batch_size=2))  # last batch padded
    got = np.concatenate([np.asarray(b.values) for b in batches])
    np.testing.assert_allclose(got, np.asarray(ex(X).values), atol=1e-6)
