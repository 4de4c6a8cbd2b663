"""Accumulated local effects against a brute-force oracle written from Apley & Zhu (2020)
(``tests/ale_oracle.py``), closed forms, partial dependence's extrapolation, PyALE and a bootstrap
written out."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from ale_oracle import moved, oracle_bin, oracle_categorical, oracle_edges, oracle_first, oracle_order, oracle_pair

RNG = np.random.default_rng(0)


# --- models -----------------------------------------------------------------------------------

W1 = RNG.normal(size=(4, 8))
W2 = RNG.normal(size=(8, 2))


def mlp_np(x):
    return np.tanh(np.asarray(x, np.float64) @ W1) @ W2[:, 0]


def mlp_jax(x):
    return jnp.tanh(x @ W1.astype(np.float32)) @ W2[:, 0].astype(np.float32)


def mlp2_jax(x):
    return jnp.tanh(x @ W1.astype(np.float32)) @ W2.astype(np.float32)


def head(w, x):
    return jnp.tanh(x @ W1.astype(np.float32)) @ w


def data(n=60, m=4, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m))
    X[:, 1] = 0.7 * X[:, 0] + 0.5 * X[:, 1]  # dependent features
    X[:, 3] = np.round(X[:, 3] * 2) / 2  # ties: repeated quantiles collapse
    return X.astype(np.float32)


@pytest.fixture(params=["host", "device"])
def route(request, monkeypatch):
    """Each test so marked runs twice: with quantile edges and the groups' moments on the host (a
    CPU backend's route) and where the rows are (an accelerator's, :func:`_ale.reduce_on_device`)."""
    from jaxshap._effects import _ale

    monkeypatch.setattr(_ale, "reduce_on_device", lambda: request.param == "device")
    return request.param


def rerun_rtol(route):
    """How far a second identical call may move: not at all on a CPU; on an accelerator the device
    route's float32 sums are added in an order that varies between runs (XLA's scatter), which
    moves the last bits unless ``XLA_FLAGS=--xla_gpu_deterministic_ops=true``."""
    return 1e-6 if route == "device" and jax.default_backend() != "cpu" else 0.0


def close(a, b, tol=2e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)


# --- against the oracle -----------------------------------------------------------------------


@pytest.mark.parametrize("j,n_bins", [(0, 5), (1, 7), (3, 20), (2, 1)])
def test_first_order_matches_oracle(j, n_bins, route):
    X = data()
    r = jaxshap.accumulated_local_effects(mlp_jax, X, j, n_bins=n_bins, n_bootstrap=0)
    edges, values = oracle_first(mlp_np, X, j, n_bins)
    close(r.grid, edges, 1e-6)
    close(r.values, values)
    assert r.stderr is None and r.features == (j,) and not r.categorical
    assert int(np.sum(r.counts)) == X.shape[0] and np.all(np.asarray(r.counts) > 0)


def test_quantile_edges_collapse_and_host_model(route):
    X = data()
    r = jaxshap.accumulated_local_effects(mlp_np, X, 3, n_bins=40, n_bootstrap=0)
    assert r.grid.shape[0] == np.unique(X[:, 3]).size  # every distinct value became an edge, no more
    close(r.values, oracle_first(mlp_np, X, 3, 40)[1])


def categorical_data(n=80, seed=2):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 5, size=n)
    near = np.array([2, 0, 4, 1, 3])[c]  # categories alike in the other features are not neighbours in code
    X = np.stack([near + rng.normal(size=n) * 0.8, rng.integers(0, 3, size=n) + (near > 2), c.astype(float),
                  rng.normal(size=n)], axis=1)
    return X.astype(np.float32)


def test_categorical_matches_oracle(route):
    X = categorical_data()
    r = jaxshap.accumulated_local_effects(mlp_jax, X, 2, categorical=[1, 2], n_bootstrap=0)
    order, values = oracle_categorical(mlp_np, X, 2, {1, 2})
    assert list(np.asarray(r.grid)) == order and order != sorted(order)
    close(r.values, values)
    assert r.categorical and np.asarray(r.counts).sum() == X.shape[0]
    # the other features' kind changes the distances (total variation vs Kolmogorov-Smirnov)
    r_num = jaxshap.accumulated_local_effects(mlp_jax, X, 2, categorical=[2], n_bootstrap=0)
    order_num, values_num = oracle_categorical(mlp_np, X, 2, {2})
    assert list(np.asarray(r_num.grid)) == order_num
    close(r_num.values, values_num)


def test_categorical_evaluates_each_row_at_its_category_and_its_neighbours_once():
    """A row's two steps share its own prediction: the model sees every row at its own category
    and at each neighbour in the order, once each (three rows, two at the order's ends)."""
    X = categorical_data()
    seen = []

    def counted(x):
        seen.append(np.array(x))
        return mlp_np(x)

    r = jaxshap.accumulated_local_effects(counted, X, 2, categorical=[2], n_bootstrap=0)
    order = list(np.asarray(r.grid))
    want = []
    for row in X:
        p = order.index(row[2])
        want += [moved(row, [2], [order[q]]) for q in (p - 1, p, p + 1) if 0 <= q < len(order)]
    want = np.array(want, np.float32)
    got = np.concatenate(seen[1:])  # after the two rows that tell a host model's output shape
    assert got.shape == want.shape == (202, 4)
    np.testing.assert_array_equal(got[np.lexsort(got.T)], want[np.lexsort(want.T)])
    close(r.values, oracle_categorical(mlp_np, X, 2, {2})[1])


@pytest.mark.parametrize("k,digits", [(7, 1), (7, 6), (15, 6)])
def test_category_distances_are_ks_and_total_variation(k, digits):
    """The distances that order categories, against SciPy's two-sample Kolmogorov–Smirnov
    statistic and total variation written out: with ties within and across groups (every pair at
    every value), and with many groups of continuous values (each group's values alone)."""
    from scipy.stats import ks_2samp

    from jaxshap._effects._ale_bins import ks_distances, tv_distances

    rng = np.random.default_rng(5)
    n = 500
    groups = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
    values = np.round(rng.normal(size=n) + 0.3 * groups, digits).astype(np.float32)
    values[rng.random(n) < 0.05] = -0.0  # one value with 0.0 (float32 values are sorted by their bits)
    levels = rng.integers(0, 4, n) + (groups > 3)
    ks, tv = ks_distances(values, groups, k), tv_distances(levels, groups, k)
    np.testing.assert_array_equal(ks_distances(values.astype(np.float64), groups, k), ks)  # np.unique's route
    for a in range(k):
        for b in range(k):
            xa, xb = values[groups == a], values[groups == b]
            want = ks_2samp(xa, xb).statistic if a != b else 0.0
            np.testing.assert_allclose(ks[a, b], want, rtol=0, atol=1e-12)
            pa = np.bincount(levels[groups == a], minlength=5) / np.sum(groups == a)
            pb = np.bincount(levels[groups == b], minlength=5) / np.sum(groups == b)
            np.testing.assert_allclose(tv[a, b], 0.5 * np.abs(pa - pb).sum(), rtol=0, atol=1e-12)
    assert ks.max() > 0.3 and tv.max() > 0.2  # the groups do differ
    zeros = np.array([-0.0] * 3 + [0.0] * 3, np.float32)  # one value, as NumPy compares them
    np.testing.assert_array_equal(ks_distances(zeros, np.repeat([0, 1], 3), 2), np.zeros((2, 2)))


def test_categorical_from_pandas_category():
    pd = pytest.importorskip("pandas")
    X = categorical_data()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame["c"] = pd.Categorical.from_codes(X[:, 2].astype(int), ["v", "w", "x", "y", "z"])
    r = jaxshap.accumulated_local_effects(mlp_jax, frame, "c", categorical=["b"], n_bootstrap=0)
    order, values = oracle_categorical(mlp_np, X, 2, {1, 2})
    assert r.feature_names == ("c",) and r.categorical and list(np.asarray(r.grid)) == order
    close(r.values, values)


@pytest.mark.parametrize("pair,n_bins", [((0, 1), 4), ((1, 2), 6), ((0, 3), 3)])
def test_second_order_matches_oracle(pair, n_bins, route):
    X = data(n=50)
    r = jaxshap.accumulated_local_effects(mlp_jax, X, pair, n_bins=n_bins, n_bootstrap=0)
    ez, ew, values = oracle_pair(mlp_np, X, *pair, n_bins)
    close(r.grid[0], ez, 1e-6)
    close(r.grid[1], ew, 1e-6)
    close(r.values, values)
    assert r.counts.shape == (ez.size - 1, ew.size - 1)
    if pair == (0, 1):  # dependent features leave cells empty: the nearest-cell rule is exercised
        assert int(np.sum(np.asarray(r.counts) == 0)) > 0


def skewed(n=90, seed=3):
    """Zero-inflated, with a heap at its maximum: many repeated quantiles, the lowest ones too."""
    X = data(n=n, seed=seed)
    rng = np.random.default_rng(seed)
    X[:, 2] = np.where(rng.random(n) < 0.4, 0.0, np.abs(X[:, 2]))  # 40% at the minimum, 0
    X[rng.random(n) < 0.2, 2] = X[:, 2].max()  # and a heap at the maximum
    return X


@pytest.mark.parametrize("item,n_bins", [(2, 10), (2, 80), ((2, 0), 5), ((1, 2), 8)])  # 80: a binary search
def test_repeated_lowest_quantiles_match_the_oracle(item, n_bins, route):
    """Where several quantiles equal the minimum (a zero-inflated feature), the rows at the minimum
    belong to the first bin above it, on either route (the device route bins the rows on the order
    statistics with their repeats and drops the empty bins between equal ones afterwards)."""
    X = skewed()
    assert np.sum(X[:, 2] == 0) > -(-X.shape[0] // n_bins)  # the two lowest quantiles are both the minimum
    r = jaxshap.accumulated_local_effects(mlp_jax, X, item, n_bins=n_bins, n_bootstrap=0)
    if isinstance(item, int):
        edges, values = oracle_first(mlp_np, X, item, n_bins)
        close(r.grid, edges, 1e-6)
        assert edges.size < n_bins + 1  # the repeats collapsed
    else:
        ez, ew, values = oracle_pair(mlp_np, X, *item, n_bins)
        close(r.grid[0], ez, 1e-6)
        close(r.grid[1], ew, 1e-6)
        assert r.counts.shape == (ez.size - 1, ew.size - 1)
    close(r.values, values)
    assert int(np.sum(r.counts)) == X.shape[0]


def test_repeated_quantiles_give_both_routes_the_same_bootstrap(monkeypatch):
    """The device route's empty bins between repeated order statistics are dropped before the
    bootstrap: its counts equal the host route's and its standard errors agree to float32
    rounding (the same key draws the same resamples)."""
    from jaxshap._effects import _ale

    X = skewed(n=400)
    results = {}
    for on_device in (False, True):
        monkeypatch.setattr(_ale, "reduce_on_device", lambda: on_device)
        results[on_device] = [jaxshap.accumulated_local_effects(mlp_jax, X, f, n_bins=10, key=2) for f in (2, (2, 0))]
    for h, d in zip(results[False], results[True]):
        np.testing.assert_array_equal(d.counts, h.counts)
        np.testing.assert_allclose(d.values, h.values, rtol=0, atol=1e-6 * float(np.abs(h.values).max()))
        np.testing.assert_allclose(d.stderr, h.stderr, rtol=1e-5, atol=0)
        assert float(np.max(np.asarray(h.stderr))) > 0


def test_order_statistics_are_a_sorts():
    from jaxshap._effects._ale_bins import order_statistics, quantile_edges

    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(1, 500))
        x = np.round(rng.normal(size=n), int(rng.integers(0, 3))).astype(np.float32)  # ties, often
        kept = x.copy()
        ranks = np.unique(rng.integers(0, n, size=int(rng.integers(1, 30))))
        np.testing.assert_array_equal(order_statistics(x, ranks), np.sort(x)[ranks])
        nb = int(rng.integers(1, 40))
        np.testing.assert_array_equal(quantile_edges(x, nb), oracle_edges(x, nb))
        np.testing.assert_array_equal(x, kept)  # the column is not reordered


def test_nan_or_inf_anywhere_in_x_is_named_and_overflowing_sums_are_not(route):
    X = data(n=300)
    ale = jaxshap.accumulated_local_effects
    for where, item, kw in (((5, 0), 0, {}), ((7, 2), (0, 1), {}), ((299, 3), 1, {}), ((4, 1), 2, {"categorical": [2]})):
        bad = X.copy()
        if kw:
            bad[:, 2] = np.round(np.abs(bad[:, 2]))
        bad[where] = np.inf if where[0] % 2 else np.nan
        with pytest.raises(ValueError, match=rf"`X` contains NaN or inf \(first at index \({where[0]}, {where[1]}\)\)"):
            ale(mlp_jax, bad, item, n_bootstrap=0, **kw)
    big = X.copy()
    big[:, 3] = 3e38  # finite, but a chunk's sum overflows: the program's check then asks the host
    r = ale(lambda x: mlp_jax(x.at[:, 3].set(0.0)), big, 0, n_bins=5, n_bootstrap=0)
    close(r.values, oracle_first(lambda x: mlp_np(np.where(np.arange(4) == 3, 0.0, x)), X, 0, 5)[1])


# --- closed forms -----------------------------------------------------------------------------


def additive(x):
    return jnp.sin(2 * x[:, 0]) + x[:, 1] ** 2 + 0.5 * x[:, 2]


def test_additive_model_gives_each_component_centred():
    X = data(n=300)
    parts = [lambda z: np.sin(2 * z), lambda z: z**2, lambda z: 0.5 * z, lambda z: 0 * z]
    for j, (g, r) in enumerate(zip(parts, jaxshap.accumulated_local_effects(additive, X, [0, 1, 2, 3], n_bins=12))):
        edges = np.asarray(r.grid, np.float64)
        upper = edges[np.clip(np.searchsorted(edges, X[:, j], side="left"), 1, edges.size - 1)]
        close(r.values, g(edges) - np.mean(g(upper)), 1e-4)
    pair = jaxshap.accumulated_local_effects(additive, X, (0, 1), n_bins=6, n_bootstrap=10)
    close(pair.values, 0.0, 1e-4)  # no interaction
    close(pair.stderr, 0.0, 1e-4)


def test_product_of_independent_uniforms():
    X = np.random.default_rng(3).uniform(size=(20000, 2)).astype(np.float32)
    prod = lambda x: x[:, 0] * x[:, 1]
    first = jaxshap.accumulated_local_effects(prod, X, 0, n_bins=10, n_bootstrap=0)
    pair = jaxshap.accumulated_local_effects(prod, X, (0, 1), n_bins=10, n_bootstrap=0)
    z, w = (np.asarray(g, np.float64) for g in pair.grid)
    up = [g[np.clip(np.searchsorted(g, X[:, a], side="left"), 1, g.size - 1)].mean() for a, g in enumerate((z, w))]
    # E[x_1] = 1/2 times the move in x_0, centred at the rows' upper edges
    np.testing.assert_allclose(first.values, 0.5 * (z - up[0]), atol=0.01)
    # the pair's effect is the interaction itself, centred
    np.testing.assert_allclose(pair.values, np.outer(z - up[0], w - up[1]), atol=0.01)


def test_ale_stays_on_the_data_where_pd_extrapolates():
    rng = np.random.default_rng(4)
    x0 = rng.uniform(size=2000)
    X = np.stack([x0, x0 + rng.uniform(-0.05, 0.05, size=2000)], axis=1).astype(np.float32)
    # right on the data (x_1 ~ x_0), absurd off it
    model = lambda x: x[:, 0] + 100.0 * (jnp.abs(x[:, 0] - x[:, 1]) > 0.3)
    r = jaxshap.accumulated_local_effects(model, X, 0, n_bins=20, n_bootstrap=0)
    edges = np.asarray(r.grid, np.float64)
    upper = edges[np.clip(np.searchsorted(edges, X[:, 0], side="left"), 1, edges.size - 1)]
    close(r.values, edges - upper.mean(), 1e-4)
    pd = jaxshap.partial_dependence(model, X, 0, grid=edges, centered=False)
    assert float(jnp.max(pd.values) - jnp.min(pd.values)) > 30.0  # PD reads the model where no data lie


# --- standard errors --------------------------------------------------------------------------


def test_stderr_shrinks_with_rows_and_vanishes_without_dependence():
    def model(x):
        return x[:, 0] * x[:, 1] + x[:, 0] ** 2

    big = np.random.default_rng(5).normal(size=(6400, 3)).astype(np.float32)
    small = big[:400]
    s_small = jaxshap.accumulated_local_effects(model, small, 0, n_bins=8, n_bootstrap=60, key=1).stderr
    s_big = jaxshap.accumulated_local_effects(model, big, 0, n_bins=8, n_bootstrap=60, key=1).stderr
    assert float(jnp.mean(s_big)) < 0.5 * float(jnp.mean(s_small))  # about 1/4 expected
    flat = jaxshap.accumulated_local_effects(model, small, 2, n_bins=8, n_bootstrap=20)
    assert float(jnp.max(jnp.abs(flat.stderr))) == 0.0 and float(jnp.max(jnp.abs(flat.values))) == 0.0


def test_stderr_agrees_with_an_oracle_bootstrap(route):
    X = data(n=200)
    n_boot = 400
    r = jaxshap.accumulated_local_effects(mlp_jax, X, 0, n_bins=5, n_bootstrap=n_boot, key=7)
    edges = oracle_edges(X[:, 0], 5)
    rng = np.random.default_rng(8)
    reps = []
    for _ in range(n_boot):  # resample the rows, keep the edges, recompute (empty bins: full-sample mean)
        Xb = X[rng.integers(0, X.shape[0], size=X.shape[0])]
        bins = np.array([oracle_bin(v, edges) for v in Xb[:, 0]])
        full_steps = [np.mean(mlp_np(moved(X[b], [0], [edges[k]])) - mlp_np(moved(X[b], [0], [edges[k - 1]])))
                      for k, b in ((k, np.array([oracle_bin(v, edges) for v in X[:, 0]]) == k) for k in range(1, 6))]
        steps = [np.mean(mlp_np(moved(Xb[bins == k], [0], [edges[k]])) - mlp_np(moved(Xb[bins == k], [0], [edges[k - 1]])))
                 if np.any(bins == k) else full_steps[k - 1] for k in range(1, 6)]
        g = np.concatenate([[0.0], np.cumsum(steps)])
        reps.append(g - g[bins].mean())
    expected = np.std(reps, axis=0, ddof=1)
    np.testing.assert_allclose(r.stderr, expected, rtol=0.2)
    # the key decides the draws: the same key the same errors, another key others
    again = jaxshap.accumulated_local_effects(mlp_jax, X, 0, n_bins=5, n_bootstrap=n_boot, key=7)
    other = jaxshap.accumulated_local_effects(mlp_jax, X, 0, n_bins=5, n_bootstrap=n_boot, key=8)
    np.testing.assert_allclose(r.stderr, again.stderr, rtol=rerun_rtol(route), atol=0)
    assert not np.allclose(np.asarray(r.stderr), np.asarray(other.stderr), rtol=1e-3, atol=0)


def test_categorical_stderr_agrees_with_an_oracle_bootstrap(route):
    X = categorical_data(n=200)
    n_boot = 300
    r = jaxshap.accumulated_local_effects(mlp_jax, X, 2, categorical=[2], n_bootstrap=n_boot, key=3)
    order = oracle_order(X, 2, {2})  # resamples keep the order, as they keep bins
    pos = np.array([order.index(v) for v in X[:, 2]])
    K = len(order)
    # each row's differences to its neighbours in the order (NaN where it has none)
    up = np.array([mlp_np(moved(X[i], [2], [order[p + 1]])[None])[0] - mlp_np(X[i:i + 1].astype(np.float64))[0]
                   if p < K - 1 else np.nan for i, p in enumerate(pos)])
    down = np.array([mlp_np(X[i:i + 1].astype(np.float64))[0] - mlp_np(moved(X[i], [2], [order[p - 1]])[None])[0]
                     if p > 0 else np.nan for i, p in enumerate(pos)])
    rng = np.random.default_rng(4)
    reps = []
    for _ in range(n_boot):
        b = rng.integers(0, X.shape[0], size=X.shape[0])
        steps = [np.mean(np.concatenate([up[b][pos[b] == s], down[b][pos[b] == s + 1]])) for s in range(K - 1)]
        g = np.concatenate([[0.0], np.cumsum(steps)])
        reps.append(g - g[pos[b]].mean())
    np.testing.assert_allclose(r.stderr, np.std(reps, axis=0, ddof=1), rtol=0.25)


def test_device_route_gives_the_host_routes_results(monkeypatch):
    """Quantile edges from a sort where the rows are, and the groups' moments reduced there in
    chunks (here 64 rows, so every bin's rows are spread over many chunks and merged on the host)
    give the host route's edges and counts exactly, its values and, with the same key, its
    standard errors to float32 rounding (of results that are float32; the moments themselves are
    compared in float64 in ``test_ale_bootstrap.py``)."""
    from jaxshap._effects import _ale, _ale_moments

    X = categorical_data(n=3000, seed=4)
    offset = lambda x: 1e3 * (1 + x[:, :1]) + mlp2_jax(x)  # steps of about 1e3 per unit of x0, outputs of 1e3
    calls = ((0, {}), ((0, 3), {"n_bins": 6}), (2, {"categorical": [2]}))
    host = [jaxshap.accumulated_local_effects(offset, X, f, n_bootstrap=40, key=5, **kw) for f, kw in calls]
    monkeypatch.setattr(_ale, "reduce_on_device", lambda: True)
    monkeypatch.setattr(_ale_moments, "CHUNK_ROWS", 64)
    for (f, kw), h in zip(calls, host):
        d = jaxshap.accumulated_local_effects(offset, X, f, n_bootstrap=40, key=5, **kw)
        for a, b in zip(jax.tree_util.tree_leaves(d.grid), jax.tree_util.tree_leaves(h.grid)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(d.counts, h.counts)
        scale = float(np.abs(np.asarray(h.values)).max())
        np.testing.assert_allclose(d.values, h.values, rtol=0, atol=2.5e-7 * scale)  # 4 float32 roundings
        np.testing.assert_allclose(d.stderr, h.stderr, rtol=1e-5, atol=0)
        assert float(np.max(np.asarray(h.stderr))) > 1e-3 * scale  # the standard errors are about something


# --- outputs, features, pytree ----------------------------------------------------------------


def test_k_outputs_stack_each_output(route):
    X = categorical_data()
    # the output weights are the model's arrays (pytree leaves): both single outputs share a program
    one = lambda k: functools.partial(head, jnp.asarray(W2[:, k], jnp.float32))
    for features, kw in ((0, {}), ((0, 3), {"n_bins": 4}), (2, {"categorical": [2]})):
        both = jaxshap.accumulated_local_effects(mlp2_jax, X, features, n_bootstrap=5, **kw)
        assert both.values.shape[-1] == 2 and both.stderr.shape == both.values.shape
        for k in range(2):
            single = jaxshap.accumulated_local_effects(one(k), X, features, n_bootstrap=5, **kw)
            close(both.values[..., k], single.values, 1e-5)
            close(both.stderr[..., k], single.stderr, 1e-5)


def test_features_by_name_list_and_pytree():
    pd = pytest.importorskip("pandas")
    X = data()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    out = jaxshap.accumulated_local_effects(mlp_jax, frame, ["b", ("a", "c"), 0], n_bins=4, n_bootstrap=0)
    assert isinstance(out, tuple) and [r.feature_names for r in out] == [("b",), ("a", "c"), ("a",)]
    close(out[0].values, oracle_first(mlp_np, X, 1, 4)[1])
    leaves, tree = jax.tree_util.tree_flatten(out[1])
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert back.features == (0, 2) and isinstance(back.grid, tuple) and "pair" in repr(back)


def test_memory_budget_chunks_give_the_same_values():
    X = data(n=300)
    a = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 2), n_bins=5, n_bootstrap=0)
    b = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 2), n_bins=5, n_bootstrap=0, memory_budget=4096)
    close(a.values, b.values, 1e-5)


# --- errors -----------------------------------------------------------------------------------


def test_errors_name_the_argument(route):
    X = data()
    ale = jaxshap.accumulated_local_effects
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="`n_bins`"):
            ale(mlp_jax, X, 0, n_bins=bad)
    with pytest.raises(ValueError, match="`features`: unknown feature name 'zz'"):
        ale(mlp_jax, X, "zz")
    with pytest.raises(ValueError, match="`features`: feature 9 is out of range"):
        ale(mlp_jax, X, 9)
    with pytest.raises(ValueError, match="`features`: a tuple names a pair"):
        ale(mlp_jax, X, (0, 1, 2))
    with pytest.raises(ValueError, match="same feature twice"):
        ale(mlp_jax, X, (1, 1))
    const = X.copy()
    const[:, 2] = 1.5
    with pytest.raises(ValueError, match="`features`: feature 'Feature 2' is constant"):
        ale(mlp_jax, const, 2)
    with pytest.raises(ValueError, match="`features`: feature 'Feature 2' is constant"):
        ale(mlp_jax, const, (0, 2))
    nan = X.copy()
    nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="`X` contains NaN"):
        ale(mlp_jax, nan, 0)
    for bad in (1, -1, 0.5):
        with pytest.raises(ValueError, match="`n_bootstrap`"):
            ale(mlp_jax, X, 0, n_bootstrap=bad)
    with pytest.raises(ValueError, match="`categorical`: feature 'Feature 0' holds values that are not integers"):
        ale(mlp_jax, X, 0, categorical=[0])
    with pytest.raises(ValueError, match="`categorical`: unknown feature name"):
        ale(mlp_jax, X, 0, categorical=["nope"])
    codes = categorical_data()
    with pytest.raises(ValueError, match="second-order ALE needs two numeric features"):
        ale(mlp_jax, codes, (0, 2), categorical=[2])
    with pytest.raises(ValueError, match="`model` returned NaN or inf"):
        ale(lambda x: jnp.log(x[:, 0]), X, 0)
    odd = X[7, 1]  # the bad row is named on either route (the device's flags are made again to name it)
    with pytest.raises(ValueError, match=r"NaN or inf at row\(s\) \[7\] of `X` \(moved to a bin edge\) \(1 of 60\)"):
        ale(lambda x: jnp.where(x[:, 1] == odd, jnp.nan, x[:, 0]), X, 0)
    order = list(np.asarray(ale(mlp_jax, codes, 2, categorical=[2], n_bootstrap=0).grid))
    below = order[order.index(codes[7, 2]) - 1]  # the category before row 7's (its own is not the first)
    undefined = lambda x: jnp.where((x[:, 0] == codes[7, 0]) & (x[:, 2] == below), jnp.nan, x[:, 0])
    with pytest.raises(ValueError, match=r"NaN or inf at row\(s\) \[7\] of `X` \(at its category or a neighbouring one\) "
                                         r"\(1 of 80\)"):
        ale(undefined, codes, 2, categorical=[2])
    with pytest.raises(ValueError, match="`memory_budget`"):
        ale(mlp_jax, X, 0, memory_budget=0)


# --- PyALE ------------------------------------------------------------------------------------


class _Predictor:
    def __init__(self, f):
        self.f = f

    def predict(self, frame):
        return np.asarray(self.f(np.asarray(frame, np.float32)), np.float64)


def test_matches_pyale_up_to_its_centring():
    pytest.importorskip("PyALE")
    pd = pytest.importorskip("pandas")
    from PyALE._src.ALE_1D import aleplot_1D_continuous
    from PyALE._src.ALE_2D import aleplot_2D_continuous

    # PyALE's quantile at p is the (floor((n - 1) p) + 1)-th smallest value, R's type 1 the
    # ceil(n p)-th; they agree when n is a multiple of the bins (and (n - 1) p is no integer)
    X = data(n=990)
    frame = pd.DataFrame(X.astype(np.float64), columns=["a", "b", "c", "d"])
    model = _Predictor(lambda x: np.asarray(mlp_jax(jnp.asarray(x))))
    for name, j in (("a", 0), ("d", 3)):
        theirs = aleplot_1D_continuous(frame, model, name, grid_size=10, include_CI=False)
        ours = jaxshap.accumulated_local_effects(mlp_jax, X, j, n_bins=10, n_bootstrap=0)
        close(ours.grid, theirs.index.to_numpy(), 1e-6)
        # PyALE centres by a trapezoid average: compare the uncentred differences
        eff = theirs["eff"].to_numpy()
        close(ours.values - ours.values[0], eff - eff[0], 1e-4)
    # (grid_size 6 breaks PyALE 1.2: its float arange of quantile levels gets one level too many)
    theirs = aleplot_2D_continuous(frame, model, ["a", "c"], grid_size=5)
    ours = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 2), n_bins=5, n_bootstrap=0)
    close(ours.grid[0], theirs.index.to_numpy(), 1e-6)
    close(ours.grid[1], theirs.columns.to_numpy(), 1e-6)
    # the centring and the first-order parts vanish under the mixed second difference: cell means
    mixed = lambda v: v[1:, 1:] - v[:-1, 1:] - v[1:, :-1] + v[:-1, :-1]
    close(mixed(np.asarray(ours.values)), mixed(theirs.to_numpy()), 1e-4)


# --- the plot ---------------------------------------------------------------------------------


def test_plot_draws_each_kind(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    X = categorical_data()
    results = [
        jaxshap.accumulated_local_effects(mlp_jax, X, 0, n_bootstrap=5),
        jaxshap.accumulated_local_effects(mlp_jax, X, 2, categorical=[2], n_bootstrap=5),
        jaxshap.accumulated_local_effects(mlp_jax, X, (0, 3), n_bins=4, n_bootstrap=0),
    ]
    for i, r in enumerate(results):
        ax = jaxshap.plots.ale(r)
        assert ax.get_xlabel() == r.feature_names[-1]
        ax.figure.savefig(tmp_path / f"{i}.png")
        assert (tmp_path / f"{i}.png").stat().st_size > 1000
        plt.close(ax.figure)
    line = jaxshap.plots.ale(results[0])
    np.testing.assert_allclose(line.lines[0].get_ydata(), results[0].values, rtol=1e-6)
    plt.close(line.figure)
    several = jaxshap.accumulated_local_effects(mlp2_jax, X, 0, n_bootstrap=0)
    with pytest.raises(ValueError, match="`output`"):
        jaxshap.plots.ale(several)
    ax = jaxshap.plots.ale(several, output=1)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), several.values[:, 1], rtol=1e-6)
    plt.close(ax.figure)
