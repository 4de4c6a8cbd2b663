"""Partial dependence, H statistics and the functional ANOVA view, against NumPy oracles."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap

M, N = 4, 24
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, M)).astype(np.float32)
W1 = RNG.normal(size=(M, 8)).astype(np.float32)
W2 = RNG.normal(size=(8,)).astype(np.float32)


def mlp_jax(x):
    return jnp.tanh(x @ W1) @ W2


def mlp_np(x):
    x = np.asarray(x, np.float64)
    return np.tanh(x @ W1.astype(np.float64)) @ W2.astype(np.float64)


# --- independent oracle, straight from Friedman & Popescu (2008), explicit loops -------------


def pd_at_rows(f, X, S):
    """Uncentred PD of feature set S at every row: mean_b f(x_i,S, x_b,-S)."""
    n = X.shape[0]
    out = []
    for i in range(n):
        Z = X.astype(np.float64).copy()
        for j in S:
            Z[:, j] = X[i, j]
        out.append(np.mean(f(Z), axis=0))
    return np.array(out)


def centre(v):
    return v - v.mean(axis=0)


def oracle(f, X, triples=()):
    n, m = X.shape
    fx = centre(f(X.astype(np.float64)))
    F = {(j,): centre(pd_at_rows(f, X, [j])) for j in range(m)}
    rest = {j: centre(pd_at_rows(f, X, [k for k in range(m) if k != j])) for j in range(m)}
    overall = np.zeros(m)
    for j in range(m):
        num = sum((fx[i] - F[(j,)][i] - rest[j][i]) ** 2 for i in range(n))
        overall[j] = num / sum(fx[i] ** 2 for i in range(n))
    pairwise = np.zeros((m, m))
    for j, k in itertools.combinations(range(m), 2):
        F[(j, k)] = Fjk = centre(pd_at_rows(f, X, [j, k]))
        num = sum((Fjk[i] - F[(j,)][i] - F[(k,)][i]) ** 2 for i in range(n))
        pairwise[j, k] = pairwise[k, j] = num / sum(Fjk[i] ** 2 for i in range(n))
    main_sum = sum(F[(j,)] for j in range(m))
    total = sum((fx[i] - main_sum[i]) ** 2 for i in range(n)) / sum(fx[i] ** 2 for i in range(n))
    three = []
    for j, k, l in triples:
        Fjkl = centre(pd_at_rows(f, X, [j, k, l]))
        r = Fjkl - F[(j, k)] - F[(j, l)] - F[(k, l)] + F[(j,)] + F[(k,)] + F[(l,)]
        three.append(np.sum(r**2) / np.sum(Fjkl**2))
    return overall, pairwise, total, np.array(three), F, fx


@pytest.fixture(scope="module")
def reference():
    return oracle(mlp_np, X, triples=[(0, 1, 2)])


@pytest.fixture(scope="module")
def ours():
    return jaxshap.h_statistic(mlp_jax, X, triples=[(0, 2, 1)])


def test_h_statistic_matches_oracle(ours, reference):
    overall, pairwise, total, three, _, _ = reference
    assert overall.min() > 1e-3  # the MLP does interact: the comparison is not trivially 0 = 0
    np.testing.assert_allclose(np.asarray(ours.overall), overall, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ours.pairwise), pairwise, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(float(ours.total), total, rtol=2e-4, atol=1e-6)
    assert ours.triples == ((0, 1, 2),)
    np.testing.assert_allclose(np.asarray(ours.threeway), three, rtol=2e-3, atol=1e-6)
    assert ours.pairs == tuple(itertools.combinations(range(M), 2))
    assert ours.feature_names == tuple(f"Feature {j}" for j in range(M))


def test_additive_model_has_no_interactions():
    f = lambda x: jnp.sin(x[:, 0]) + x[:, 1] ** 2 - 3.0 * x[:, 2] + jnp.exp(0.3 * x[:, 3])
    h = jaxshap.h_statistic(f, X)
    assert np.abs(np.asarray(h.overall)).max() < 1e-6
    assert np.abs(np.asarray(h.pairwise)).max() < 1e-6
    assert abs(float(h.total)) < 1e-6


def test_pure_two_way_interaction_pattern():
    f = lambda x: x[:, 0] * x[:, 1] + x[:, 2]
    h = jaxshap.h_statistic(f, X)
    x0, x1 = X[:, 0].astype(np.float64), X[:, 1].astype(np.float64)
    # Closed form on these rows: F_01 - F_0 - F_1 (centred) = (x0 - m0)(x1 - m1) - mean of that.
    inter = centre((x0 - x0.mean()) * (x1 - x1.mean()))
    expected = np.sum(inter**2) / np.sum(centre(x0 * x1) ** 2)
    pw = np.asarray(h.pairwise)
    np.testing.assert_allclose(pw[0, 1], expected, rtol=1e-4)
    assert pw[1, 0] == pw[0, 1]
    off = [pw[j, k] for j, k in itertools.combinations(range(M), 2) if (j, k) != (0, 1)]
    assert max(off) < 1e-6
    ov = np.asarray(h.overall)
    assert ov[0] > 0.05 and ov[1] > 0.05 and ov[2] < 1e-6 and ov[3] < 1e-6
    assert 0.05 < float(h.total) < 1.0


def test_multi_output_is_per_output():
    f2 = lambda x: jnp.stack([mlp_jax(x), x[:, 0] * x[:, 3]], axis=-1)
    h2 = jaxshap.h_statistic(f2, X, pairs=[(0, 3), (1, 2)])
    h_a = jaxshap.h_statistic(mlp_jax, X, pairs=[(0, 3), (1, 2)])
    assert np.shape(h2.overall) == (M, 2) and np.shape(h2.pairwise) == (M, M, 2)
    assert np.shape(h2.total) == (2,) and h2.output_names == ("Output 0", "Output 1")
    np.testing.assert_allclose(np.asarray(h2.overall[:, 0]), np.asarray(h_a.overall), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(h2.pairwise[..., 0]), np.asarray(h_a.pairwise), rtol=1e-5, atol=1e-7)
    pw1 = np.asarray(h2.pairwise[..., 1])
    assert pw1[0, 3] > 0.5 and pw1[1, 2] == 0.0 and np.isnan(pw1[0, 1])  # (0, 1) was not requested


def test_numpy_callable_model_matches_jax_model(ours):
    h = jaxshap.h_statistic(lambda x: mlp_np(np.asarray(x)).astype(np.float32), X, pairs=[(0, 1)], triples=[(0, 1, 2)])
    np.testing.assert_allclose(np.asarray(h.overall), np.asarray(ours.overall), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(float(h.pairwise[0, 1]), float(ours.pairwise[0, 1]), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(h.threeway), np.asarray(ours.threeway), rtol=1e-3)
    assert np.isnan(np.asarray(h.pairwise)[0, 3])  # not computed, marked as such


def test_top_m_pairs_and_subsampling(ours):
    h = jaxshap.h_statistic(mlp_jax, X, pairs=2)
    top = sorted(np.argsort(-np.asarray(ours.overall))[:2].tolist())
    assert h.pairs == (tuple(top),)
    np.testing.assert_allclose(float(h.pairwise[top[0], top[1]]), float(ours.pairwise[top[0], top[1]]), rtol=1e-5)
    # subsampling: the statistics are those of the drawn rows, which functional_anova reports
    hs = jaxshap.h_statistic(mlp_jax, X, n_max=10, key=jax.random.key(3), pairs=[])
    rows = np.asarray(jaxshap.functional_anova(mlp_jax, X, n_max=10, key=jax.random.key(3), pairs=[]).data)
    assert rows.shape == (10, M) and all(any(np.array_equal(r, x) for x in X) for r in rows)
    overall, *_ = oracle(mlp_np, rows)
    np.testing.assert_allclose(np.asarray(hs.overall), overall, rtol=2e-4, atol=1e-6)


def test_functional_anova_components(reference):
    *_, F, fx = reference
    a = jaxshap.functional_anova(mlp_jax, X, pairs=[(0, 1), (2, 3)])
    main = np.stack([F[(j,)] for j in range(M)], axis=1)
    inter = np.stack([F[(0, 1)] - F[(0,)] - F[(1,)], F[(2, 3)] - F[(2,)] - F[(3,)]], axis=1)
    np.testing.assert_allclose(np.asarray(a.main), main, atol=2e-5)
    np.testing.assert_allclose(np.asarray(a.interaction), inter, atol=2e-5)
    np.testing.assert_allclose(float(a.intercept), mlp_np(X).mean(), rtol=1e-5)
    den = np.sum(fx**2)
    np.testing.assert_allclose(np.asarray(a.main_share), np.sum(main**2, 0) / den, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(a.interaction_share), np.sum(inter**2, 0) / den, rtol=1e-4)
    resid = fx - main.sum(1) - inter.sum(1)
    np.testing.assert_allclose(float(a.residual_share), np.sum(resid**2) / den, rtol=1e-3)


def test_functional_anova_reconstructs_two_way_model():
    f = lambda x: 1.5 + x[:, 0] * x[:, 1] + jnp.sin(x[:, 2]) + x[:, 3] ** 2
    a = jaxshap.functional_anova(f, X)
    recon = a.intercept + np.asarray(a.main).sum(1) + np.asarray(a.interaction).sum(1)
    np.testing.assert_allclose(recon, np.asarray(f(jnp.asarray(X))), atol=1e-4)
    assert abs(float(a.residual_share)) < 1e-6


def test_constant_pieces_give_zero_not_nan():
    h = jaxshap.h_statistic(lambda x: jnp.full(x.shape[0], 2.0), X)
    assert np.all(np.asarray(h.overall) == 0) and np.all(np.asarray(h.pairwise) == 0) and float(h.total) == 0
    h = jaxshap.h_statistic(lambda x: 100.0 + x[:, 0] ** 2, X)  # features 1..3 unused: 0/0 pairs
    assert not np.isnan(np.asarray(h.pairwise)).any()
    assert np.asarray(h.pairwise)[1, 2] == 0.0


def test_dataframe_names_and_pairs_by_name():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    h = jaxshap.h_statistic(lambda x: x[:, 0] * x[:, 1], df, pairs=[("b", "a")])
    assert h.feature_names == ("a", "b", "c", "d") and h.pairs == ((0, 1),)
    assert h.ranked_pairs()[0][:2] == ("a", "b")
    res = jaxshap.partial_dependence(lambda x: x[:, 0] * x[:, 1], df, "b", grid=[0.0, 1.0])
    assert res.features == (1,) and res.feature_names == ("b",)
    np.testing.assert_allclose(np.asarray(res.values), [0.0, X[:, 0].mean()], atol=1e-6)


# --- partial dependence -----------------------------------------------------------------------


def test_partial_dependence_matches_sklearn():
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.inspection import partial_dependence as sk_pd

    Xs = RNG.normal(size=(60, 3))
    y = Xs[:, 0] * Xs[:, 1] + np.sin(Xs[:, 2])
    est = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(Xs, y)
    sk = sk_pd(est, Xs, [0], grid_resolution=7, kind="average", method="brute")
    ours = jaxshap.partial_dependence(est.predict, Xs.astype(np.float32), 0, grid=sk["grid_values"][0])
    np.testing.assert_allclose(np.asarray(ours.values), sk["average"][0], rtol=1e-4, atol=1e-4)
    sk2 = sk_pd(est, Xs, [(0, 2)], grid_resolution=5, kind="average", method="brute")
    grid = np.array(list(itertools.product(*sk2["grid_values"])))
    ours2 = jaxshap.partial_dependence(est.predict, Xs.astype(np.float32), [0, 2], grid=grid)
    np.testing.assert_allclose(np.asarray(ours2.values), sk2["average"][0].reshape(-1), rtol=1e-4, atol=1e-4)
    assert ours2.grid.shape == (25, 2)


def test_partial_dependence_default_grid_data_grid_and_centring(reference):
    *_, F, _ = reference
    res = jaxshap.partial_dependence(mlp_jax, X, 2, grid="data", centered=True)
    np.testing.assert_allclose(np.asarray(res.grid), X[:, 2])
    np.testing.assert_allclose(np.asarray(res.values), F[(2,)], atol=2e-5)  # the centred F_2 of the H statistics
    default = jaxshap.partial_dependence(mlp_jax, X, 1, grid_size=5)
    np.testing.assert_allclose(np.asarray(default.grid), np.quantile(X[:, 1], np.linspace(0, 1, 5)), rtol=1e-6)
    pairs = jaxshap.partial_dependence(lambda x: jnp.stack([x[:, 0], 2 * x[:, 1]], -1), X, [0, 1], grid_size=3)
    assert pairs.grid.shape == (9, 2) and pairs.values.shape == (9, 2)
    np.testing.assert_allclose(np.asarray(pairs.values[:, 0]), np.asarray(pairs.grid[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pairs.values[:, 1]), 2 * np.asarray(pairs.grid[:, 1]), rtol=1e-6)


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_gets_clear_errors():
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        jaxshap.h_statistic(mlp_jax, bad)
    with pytest.raises(ValueError, match="NaN"):
        jaxshap.partial_dependence(mlp_jax, X, 0, grid=[0.0, np.inf])
    with pytest.raises(ValueError, match="out of range"):
        jaxshap.partial_dependence(mlp_jax, X, 7)
    with pytest.raises(ValueError, match="unknown feature name"):
        jaxshap.partial_dependence(mlp_jax, X, "age")
    with pytest.raises(ValueError, match="out of range"):
        jaxshap.h_statistic(mlp_jax, X, pairs=[(0, 9)])
    with pytest.raises(ValueError, match="repeats a feature"):
        jaxshap.h_statistic(mlp_jax, X, pairs=[(1, 1)])
    with pytest.raises(ValueError, match="name 3 features"):
        jaxshap.h_statistic(mlp_jax, X, triples=[(0, 1)])
    with pytest.raises(ValueError, match="n_max"):
        jaxshap.h_statistic(mlp_jax, X, n_max=0)
    with pytest.raises(ValueError, match="2-D"):
        jaxshap.h_statistic(mlp_jax, X[None])
    with pytest.raises(ValueError, match="columns"):
        jaxshap.partial_dependence(mlp_jax, X, [0, 1], grid=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="twice"):
        jaxshap.partial_dependence(mlp_jax, X, [0, 0])
    with pytest.raises(ValueError, match="shape"):
        jaxshap.h_statistic(lambda x: x[:1, 0], X)
    with pytest.raises(TypeError, match="callable"):
        jaxshap.h_statistic("model", X)


def test_two_features_and_top_m_with_triples():
    x2 = X[:, :3]
    f = lambda x: x[:, 0] * x[:, 1] * x[:, 2] + x[:, 0]
    ref_overall, ref_pairwise, ref_total, ref_three, *_ = oracle(lambda z: z[:, 0] * z[:, 1] * z[:, 2] + z[:, 0], x2, [(0, 1, 2)])
    h = jaxshap.h_statistic(f, x2, pairs=1, triples=[(2, 1, 0)])
    np.testing.assert_allclose(np.asarray(h.overall), ref_overall, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h.pairwise), ref_pairwise, rtol=2e-4, atol=1e-6)  # triple needs all pairs
    np.testing.assert_allclose(np.asarray(h.threeway), ref_three, rtol=2e-3, atol=1e-6)
    h2 = jaxshap.h_statistic(lambda x: x[:, 0] * x[:, 1], X[:, :2], pairs=2)
    ref2 = oracle(lambda z: z[:, 0] * z[:, 1], X[:, :2])
    np.testing.assert_allclose(np.asarray(h2.overall), ref2[0], rtol=2e-4)
    np.testing.assert_allclose(np.asarray(h2.pairwise), ref2[1], rtol=2e-4)
