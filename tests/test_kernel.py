"""KernelSHAP: sampling plan, exactness at full budget, efficiency, convergence, standard errors."""

from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap.coalitions import kernel_plan, kernel_weight, min_kernel_coalitions, sample_kernel_coalitions
from jaxshap.estimators import kernel_shapley, kernel_solve
from jaxshap._coalitions._kernel_sampling import MIDDLE_SHARE, innermost as _innermost
from oracle import shapley_from_game


# --- an independent oracle, written from the definitions -----------------------------------------
def numpy_mlp(params, x):
    return np.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]


def jax_mlp(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]


def make_problem(m, n_bg=6, n_rows=3, hidden=12, outputs=None, seed=0):
    rng = np.random.default_rng(seed)
    out = () if outputs is None else (outputs,)
    params = {
        "w1": rng.normal(size=(m, hidden)) * 1.5 / np.sqrt(m),
        "b1": rng.normal(size=hidden),
        "w2": rng.normal(size=(hidden,) + out),
    }
    bg = rng.normal(size=(n_bg, m))
    X = rng.normal(size=(n_rows, m))
    return params, bg, X


def oracle_value(f, x, bg, subset):
    """v(S) = mean_b f(x_S, b_rest), the interventional value."""
    z = bg.copy()
    z[:, list(subset)] = x[list(subset)]
    return f(z).mean(axis=0)


def oracle_shapley(f, x, bg):
    """phi_j = sum_{S without j} |S|! (M-|S|-1)! / M! [v(S + j) - v(S)], in float64."""
    return shapley_from_game(lambda s: oracle_value(f, x, bg, sorted(s)), x.shape[0])


def f64(params):
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


# --- the sampling plan ------------------------------------------------------------------------------
def _draws(plan):
    """``keys [n] -> (masks [n, C, M], weights [n, C])``, drawn by the compiled sampler."""
    draw = jax.jit(jax.vmap(lambda k: sample_kernel_coalitions(k, plan)))
    return lambda keys: tuple(np.asarray(a) for a in draw(keys))


def _draw(plan, key):
    masks, weights = _draws(plan)(key[None])
    return masks[0], np.asarray(weights[0], np.float64)


@pytest.mark.parametrize(
    "m,n,sampler",
    [(9, 61, "paired"), (10, 301, "leverage"), (6, 30, "leverage"), (12, 150, "middle"), (11, 90, "middle")],
)
def test_plan_weights_distinct_and_paired(m, n, sampler):
    plan = kernel_plan(m, n, sampler)
    masks, weights = _draw(plan, jax.random.key(3))
    assert masks.shape == (n, m) and weights.shape == (n,)  # the budget is honoured exactly
    assert len({tuple(r) for r in masks}) == n  # without replacement
    sizes = masks.sum(1)
    assert sizes.min() >= 1 and sizes.max() <= m - 1
    # Horvitz-Thompson: each size's weights add up to that size's total kernel mass.
    for s in range(1, m):
        np.testing.assert_allclose(weights[sizes == s].sum(), kernel_weight(m, s) * math.comb(m, s), rtol=1e-5)
    # Every sampled coalition of a stratum's smaller side has its complement in the sample (pairing).
    rows = {tuple(r) for r in masks}
    n_pairs = sum(st.n_pairs for st in plan.strata)
    assert sum(tuple(~r) in rows for r in masks) >= 2 * n_pairs


def test_plan_enumerates_small_layers_first():
    plan = kernel_plan(10, 300, "paired")
    sizes = plan.enum_masks.sum(1)
    assert set(sizes) == {1, 2, 8, 9} and len(sizes) == 2 * (10 + 45)
    assert {st.size for st in plan.strata} == {3, 4, 5}
    full = kernel_plan(6, 62, "paired")
    assert full.exact and len({tuple(r) for r in full.enum_masks}) == 62


def test_sampling_is_keyed_and_jittable():
    plan = kernel_plan(9, 61, "paired")
    draw = lambda k: _draw(plan, k)[0]
    a, b, c = draw(jax.random.key(0)), draw(jax.random.key(0)), draw(jax.random.key(1))
    assert np.array_equal(a, b) and not np.array_equal(b, c)


def _chi_square(codes, cells):
    """Pearson's statistic of integer ``codes`` against the uniform law on ``cells``, and its dof."""
    counts = np.array([np.sum(codes == c) for c in cells])
    assert counts.sum() == codes.size  # nothing outside the support
    expected = codes.size / len(cells)
    return ((counts - expected) ** 2 / expected).sum(), len(cells) - 1


def _bound(dof):
    return dof + 5 * np.sqrt(2 * dof)  # about 5 standard deviations above the mean


@pytest.mark.parametrize("max_ranked", [None, 12])
def test_strata_are_uniform_without_replacement(monkeypatch, max_ranked):
    """Every stratum draws uniformly: all k-subsets equally often, in uniform order, and (middle
    stratum, 2 draws of 10) every ordered pair of distinct subsets equally often."""
    import jaxshap._coalitions._kernel_sampling as ks

    if max_ranked is not None:  # the size-2 stratum (15 sets) falls back to independent draws
        monkeypatch.setattr(ks, "MAX_RANKED", max_ranked)
    m, n_keys = 6, 20000
    plan = kernel_plan(m, 25, "paired")
    (s2, mid) = plan.strata
    assert (s2.size, s2.n_draws, s2.n_pairs, mid.size, mid.n_draws, mid.n_pairs) == (2, 5, 4, 3, 2, 2)
    keys = jax.random.split(jax.random.key(5), n_keys)
    masks = _draws(plan)(keys)[0]
    codes = masks.astype(np.int64) @ (1 << np.arange(m))  # [keys, C] subsets as bit patterns
    e = len(plan.enum_masks)
    draws2, comps2 = codes[:, e : e + 5], codes[:, e + 5 : e + 9]
    draws3, comps3 = codes[:, e + 9 : e + 11], codes[:, e + 11 : e + 13]
    full = (1 << m) - 1
    np.testing.assert_array_equal(comps2, full - draws2[:, :4])
    np.testing.assert_array_equal(comps3, full - draws3)

    size2 = [sum(1 << i for i in c) for c in itertools.combinations(range(m), 2)]
    for codes_ in (draws2.ravel(), draws2[:, 0], draws2[:, 4]):  # all draws, the first, the extra
        stat, dof = _chi_square(codes_, size2)
        assert stat < _bound(dof), (stat, dof)
    if max_ranked is None:
        assert all(len(set(r)) == 5 for r in draws2)  # without replacement

    # Middle layer: one representative per complementary pair, the one holding feature 0.
    mid_sets = [1 + sum(1 << i for i in c) for c in itertools.combinations(range(1, m), 2)]
    pairs = [a * 64 + b for a in mid_sets for b in mid_sets if a != b]
    stat, dof = _chi_square(draws3[:, 0] * 64 + draws3[:, 1], pairs)
    assert stat < _bound(dof), (stat, dof)


def test_large_strata_fall_back_to_independent_uniform_draws():
    m = 36  # the middle layers hold more than MAX_RANKED sets
    plan = kernel_plan(m, 200, "leverage")
    assert any(st.population > 2**30 for st in plan.strata) and any(st.population <= 2**30 for st in plan.strata)
    masks, weights = _draw(plan, jax.random.key(2))
    assert masks.shape == (200, m) and len({tuple(r) for r in masks}) == 200
    sizes = masks.sum(1)
    for s in range(1, m):
        np.testing.assert_allclose(weights[sizes == s].sum(), kernel_weight(m, s) * math.comb(m, s), rtol=1e-5)
    middle = masks[sizes == m // 2]  # the draws hold feature 0, their complements do not
    assert len(middle) > 0 and 2 * middle[:, 0].sum() == len(middle)


# --- exactness and efficiency ---------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["paired", "leverage"])
def test_full_budget_is_exact(sampler):
    m = 6
    params, bg, X = make_problem(m, outputs=2, seed=1)
    ex = jaxshap.KernelExplainer(partial(jax_mlp, params), bg, 2**m - 2, sampler=sampler)
    expl = ex(X)
    oracle = np.stack([oracle_shapley(partial(numpy_mlp, f64(params)), x, bg) for x in X])
    scale = np.abs(oracle).max()
    np.testing.assert_allclose(np.asarray(expl.values), oracle, atol=2e-5 * scale, rtol=0)
    assert float(np.abs(expl.stderr).max()) == 0.0
    # A larger budget is capped at 2**M - 2 and gives the same values.
    more = jaxshap.KernelExplainer(partial(jax_mlp, params), bg, 5000, sampler=sampler)(X)
    np.testing.assert_allclose(np.asarray(more.values), np.asarray(expl.values), atol=1e-6 * scale)


def test_full_budget_is_exact_in_float64():
    m = 5
    params, bg, X = make_problem(m, seed=2)
    with jax.enable_x64(True):
        fn = lambda masks, x: jnp.asarray(
            [oracle_value(partial(numpy_mlp, f64(params)), x, bg, np.flatnonzero(r)) for r in np.asarray(masks)]
        )
        for x in X:
            for third in (False, True):
                phi, stderr, v0, v1 = kernel_shapley(
                    jax.random.key(0), lambda ms: fn(ms, x), m, 2**m - 2, third_order=third
                )
                want = oracle_shapley(partial(numpy_mlp, f64(params)), x, bg)
                np.testing.assert_allclose(np.asarray(phi), want, atol=1e-12)


@pytest.mark.parametrize("n", [None, 150])
def test_efficiency_is_exact(n):
    m = 10
    params, bg, X = make_problem(m, n_rows=4, seed=3)
    expl = jaxshap.KernelExplainer(partial(jax_mlp, params), bg, n)(X)
    fx = numpy_mlp(f64(params), X)
    total = np.asarray(expl.values, np.float64).sum(1) + np.asarray(expl.base_values, np.float64)
    np.testing.assert_allclose(total, fx, atol=2e-5 * np.abs(fx).max())
    np.testing.assert_allclose(np.asarray(expl.base_values), numpy_mlp(f64(params), bg).mean(), atol=1e-5)


# --- convergence and standard errors ----------------------------------------------------------------
@pytest.fixture(scope="module")
def game8():
    m = 8
    params, bg, X = make_problem(m, n_bg=5, n_rows=1, hidden=16, seed=4)
    x = X[0]
    exact = oracle_shapley(partial(numpy_mlp, f64(params)), x, bg)
    p32 = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    xj, bgj = jnp.asarray(x, jnp.float32), jnp.asarray(bg, jnp.float32)

    def value_fn(masks):
        return jax_mlp(p32, jnp.where(masks[:, None, :], xj, bgj)).mean(1)

    return m, value_fn, exact


def _runs(value_fn, m, n, sampler, n_keys=300, third_order=False):
    run = jax.jit(jax.vmap(lambda k: kernel_shapley(k, value_fn, m, n, sampler=sampler, third_order=third_order)[:2]))
    phi, se = run(jax.random.split(jax.random.key(11), n_keys))
    return np.asarray(phi, np.float64), np.asarray(se, np.float64)


@pytest.mark.parametrize(
    "sampler,budgets,third",
    [
        ("paired", (24, 80, 200), False),
        ("leverage", (80,), False),
        ("paired", (80, 200), True),
        ("leverage", (200,), True),
        ("middle", (80, 200), True),
    ],
)
def test_error_falls_with_budget_and_stderr_is_calibrated(game8, sampler, budgets, third):
    m, value_fn, exact = game8
    mse = {}
    for n in budgets:
        phi, se = _runs(value_fn, m, n, sampler, third_order=third)
        err = phi - exact
        mse[n] = float((err**2).mean())
        assert mse[n] > 0  # still sampling, not enumerating
        if n >= 80:
            within = np.abs(err) <= 3 * se
            assert within.mean() >= 0.9, (n, within.mean())
            # not trivially wide either: the mean stderr^2 is within a factor 2 of the true MSE
            assert 0.5 < (se**2).mean() / mse[n] < 2.0, ((se**2).mean(), mse[n])
    if len(budgets) == 3:
        assert mse[80] < mse[24] / 2 and mse[200] < mse[80] / 2, mse


@pytest.mark.parametrize("n,third", [(18, False), (20, False), (18, True), (20, True)])
def test_small_budgets_keep_an_honest_stderr(game8, n, third):
    """Below the stratified minimum (22 at M = 8) the pooled layers are sampled with replacement;
    2 M + 2 = 18 is the size-1 layer plus one pair, whose spread cannot be estimated from the
    sample: the standard error stays conservative rather than optimistic."""
    m, value_fn, exact = game8
    assert kernel_plan(m, n, "paired").pooled is not None
    phi, se = _runs(value_fn, m, n, "paired", n_keys=200, third_order=third)
    err = phi - exact
    assert np.isfinite(se).all()
    assert (np.abs(err) <= 3 * se).mean() >= 0.9, (np.abs(err) <= 3 * se).mean()
    assert (se**2).mean() > (err**2).mean()


def test_third_order_controls_cut_the_error(game8):
    """Same coalitions (same keys), same evaluations: the third-order controls lower the MSE."""
    m, value_fn, exact = game8
    for n in (80, 200):
        plain = ((_runs(value_fn, m, n, "paired")[0] - exact) ** 2).mean()
        third = ((_runs(value_fn, m, n, "paired", third_order=True)[0] - exact) ** 2).mean()
        assert third < plain / 2, (n, plain, third)


def test_third_order_recovers_a_cubic_game():
    """A game that is exactly cubic in u = 2z - 1 is (up to the small ridge) fitted exactly."""
    import itertools

    m = 9
    rng = np.random.default_rng(3)
    lin, cub = rng.normal(size=m), {t: rng.normal() for t in itertools.combinations(range(m), 3)}

    def game(masks):
        u = 2.0 * masks.astype(jnp.float32) - 1.0
        return u @ lin + sum(c * u[:, a] * u[:, b] * u[:, d] for (a, b, d), c in cub.items())

    exact = 2 * lin
    for (a, b, d), c in cub.items():
        exact[[a, b, d]] += 2 * c / 3
    errors = {}
    for third in (False, True):
        phi = np.asarray(kernel_shapley(jax.random.key(1), game, m, 300, third_order=third)[0])
        errors[third] = np.abs(phi - exact).max() / np.abs(exact).max()
    assert errors[False] > 0.05, errors  # plain KernelSHAP is not exact on third-order terms
    assert errors[True] < errors[False] / 10, errors  # the controls take them out (up to the ridge)


# --- against shap --------------------------------------------------------------------------------
def test_matches_shap_at_full_enumeration():
    shap = pytest.importorskip("shap")
    m = 6
    params, bg, X = make_problem(m, n_bg=8, n_rows=3, seed=5)
    fn = partial(numpy_mlp, f64(params))
    oracle = np.stack([oracle_shapley(fn, x, bg) for x in X])
    theirs = shap.KernelExplainer(fn, bg).shap_values(X, nsamples=2**m - 2, l1_reg=False, silent=True)
    ours = jaxshap.KernelExplainer(partial(jax_mlp, params), bg, 2**m - 2)(X)
    scale = np.abs(oracle).max()
    np.testing.assert_allclose(np.asarray(theirs), oracle, atol=1e-6 * scale)
    np.testing.assert_allclose(np.asarray(ours.values), oracle, atol=2e-5 * scale)


# --- JAX transformations --------------------------------------------------------------------------
def test_jit_and_grad_through_a_jax_model():
    m = 5
    params, bg, X = make_problem(m, n_rows=2, seed=6)
    p32 = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    key = jax.random.key(0)

    def loss(p, n, cls):
        ex = cls(partial(jax_mlp, p), bg, n) if n else cls(partial(jax_mlp, p), bg)
        return (ex(X, key=key).values ** 2).sum()

    g_kernel = jax.jit(jax.grad(partial(loss, n=2**m - 2, cls=jaxshap.KernelExplainer)))(p32)
    g_exact = jax.grad(partial(loss, n=None, cls=jaxshap.ExactExplainer))(p32)
    for k in p32:
        np.testing.assert_allclose(g_kernel[k], g_exact[k], rtol=1e-3, atol=1e-5)
    # A sampling budget is differentiable too (finite gradients), and jit gives the eager result.
    g = jax.grad(partial(loss, n=20, cls=jaxshap.KernelExplainer))(p32)
    assert all(np.isfinite(np.asarray(v)).all() for v in g.values())
    ex = jaxshap.KernelExplainer(partial(jax_mlp, p32), bg, 20)
    np.testing.assert_allclose(jax.jit(lambda x: ex(x, key=key).values)(X), ex(X, key=key).values, atol=1e-6)
    # the shared draw is a function of the key alone: jax.vmap over keys gives each key's eager result
    keys = jax.random.split(key, 2)
    batched = jax.jit(jax.vmap(lambda k: ex(X, key=k).values))(keys)
    for i in range(2):
        np.testing.assert_allclose(batched[i], ex(X, key=keys[i]).values, atol=1e-6)


# --- "auto" -------------------------------------------------------------------------------------
def test_auto_stops_at_tolerance_and_respects_cap():
    m = 12
    params, bg, X = make_problem(m, n_bg=4, n_rows=2, seed=7)
    model = partial(jax_mlp, params)
    ex = jaxshap.KernelExplainer(model, bg, "auto", tolerance=0.01)
    expl = ex(X)
    v = np.asarray(expl.values)
    ratio = np.asarray(expl.stderr).max(1) / (v.max(1) - v.min(1))
    assert (ratio < 0.01).all()
    capped = jaxshap.KernelExplainer(model, bg, "auto", tolerance=1e-9, max_coalitions=3 * ex.n_coalitions)
    capped(X)
    assert capped.last_rounds_ == 3
    with pytest.raises(ValueError, match="auto"):
        jax.jit(lambda x: capped(x).values)(X)


# --- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_coalitions": -5}, "at least"),
        ({"n_coalitions": 1}, "at least 2"),
        ({"n_coalitions": 100.0}, "integer"),
        ({"n_coalitions": True}, "integer"),
        ({"n_coalitions": "many"}, "auto"),
        ({"sampler": "uniform"}, "sampler"),
        ({"third_order": "yes"}, "third_order"),
        ({"shared_coalitions": 1}, "shared_coalitions"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"n_coalitions": "auto", "max_coalitions": 10}, "max_coalitions"),
    ],
)
def test_bad_arguments(kwargs, match):
    params, bg, _ = make_problem(10)
    with pytest.raises(ValueError, match=match):
        jaxshap.KernelExplainer(partial(jax_mlp, params), bg, **kwargs)


def test_third_order_auto_follows_the_budget():
    params, bg, _ = make_problem(31)
    model = partial(jax_mlp, params)
    assert jaxshap.KernelExplainer(model, bg).third_order  # the default budget: on at any M
    assert not jaxshap.KernelExplainer(model, bg, 2 * 31 + 2).third_order  # too few sampled coalitions
    assert jaxshap.KernelExplainer(model, bg, 2 * 31 + 2, third_order=True).third_order


def test_sampler_auto_follows_the_controls_and_the_budget():
    from jaxshap.coalitions import Auto

    AUTO_MIDDLE_TERMS = Auto().middle_terms

    m = 12
    params, bg, X = make_problem(m)
    model = partial(jax_mlp, params)
    sampler = lambda budget, **kw: jaxshap.KernelExplainer(model, bg, budget, **kw).sampler
    terms = int(AUTO_MIDDLE_TERMS * math.comb(m, 3))  # 330 coalitions for 220 third-order terms
    assert sampler(5 * m) == "middle" and sampler(terms) == "middle"  # the controls interpolate
    assert sampler(terms + 1) == "leverage" and sampler(None) == "leverage"  # past them, leverage
    assert sampler(2 * m + 2) == "paired"  # no controls at shap's smallest budget
    assert sampler(terms, third_order=False) == "paired"  # plain KernelSHAP keeps shap's sampling
    assert sampler(terms, sampler="paired") == "paired" and sampler(64, sampler="leverage") == "leverage"
    wide = make_problem(31)
    assert jaxshap.KernelExplainer(partial(jax_mlp, wide[0]), wide[1]).sampler == "middle"  # 4495 terms
    # "auto" is the same estimator as naming the sampler it chose: identical values for one key
    for budget, name in ((terms, "middle"), (terms + 1, "leverage")):
        auto = jaxshap.KernelExplainer(model, bg, budget)(X[:2], key=4)
        named = jaxshap.KernelExplainer(model, bg, budget, sampler=name)(X[:2], key=4)
        np.testing.assert_array_equal(np.asarray(auto.values), np.asarray(named.values))


def test_bad_budget_in_the_kernel():
    assert min_kernel_coalitions(10) == 2
    with pytest.raises(ValueError, match="at least"):
        kernel_plan(10, min_kernel_coalitions(10) - 1, "paired")


# --- one operator per draw: kernel form, shared coalitions, small budgets --------------------------
def test_odd_kernel_is_the_sum_over_explicit_terms():
    from jaxshap._estimators._control_variates import odd_kernel, walsh_controls

    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for m, k in ((6, 3), (9, 3), (9, 5), (11, 7)):
            masks = jnp.asarray(rng.random((30, m)) < 0.5)
            r = np.asarray(walsh_controls(masks, k, jnp.float64))
            # written from the definition: u_T - (1/k) sum_{j in T} u_j, for every k-subset T
            u = 2.0 * np.asarray(masks, np.float64) - 1.0
            for t in list(itertools.combinations(range(m), k))[:5]:
                np.testing.assert_allclose(r[:, list(itertools.combinations(range(m), k)).index(t)],
                                           u[:, t].prod(1) - u[:, t].sum(1) / k, atol=1e-12)
            kern = np.asarray(odd_kernel(jnp.asarray(u), jnp.asarray(u[:11]), k))
            np.testing.assert_allclose(kern, r @ r[:11].T, atol=1e-9 * np.abs(r @ r.T).max())


def test_kernel_form_equals_explicit_columns():
    controls = ((3, 0.2), (5, 0.1))
    from jaxshap._coalitions._kernel_sampling import plan_rows
    from jaxshap._estimators._kernel_solve import apply_operator, kernel_operator

    m, n = 7, 60
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        plan = kernel_plan(m, n, "paired")
        masks, weights = sample_kernel_coalitions(jax.random.key(4), plan)
        values = jnp.asarray(rng.normal(size=(n, 2)))
        v0, v1 = jnp.asarray(rng.normal(size=2)), jnp.asarray(rng.normal(size=2))
        out = {}
        for form in ("primal", "dual"):
            op = kernel_operator(masks, weights, controls, dtype=jnp.float64, form=form, rows=plan_rows(plan))
            out[form] = [np.asarray(a) for a in apply_operator(op, plan, values, v0, v1)]
        for a, b in zip(out["primal"], out["dual"]):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
        plain = np.asarray(apply_operator(kernel_operator(masks, weights, (), dtype=jnp.float64), plan, values, v0, v1)[0])
        assert np.abs(plain - out["primal"][0]).max() > 1e-3  # the controls do move the estimate


def test_shared_coalitions_are_one_draw_per_call():
    """Every row uses the coalitions row 0 draws from fold_in(key, 0) (the per-row solve of those
    coalitions), and shared_coalitions=False gives row i the key fold_in(key, i)."""
    m = 7
    params, bg, X = make_problem(m, n_rows=3, seed=8)
    model = partial(jax_mlp, params)
    key = jax.random.key(5)
    bgj = jnp.asarray(bg, jnp.float32)
    Xj = jnp.asarray(X, jnp.float32)
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])

    def game(x, masks):
        return model(jnp.where(masks[:, None, :], x, bgj)).mean(1)

    # shared: one draw for the call, every row solved with it
    plan = kernel_plan(m, 40, "paired")
    masks, weights = _draw(plan, jax.random.fold_in(key, 0))
    masks = jnp.asarray(masks)

    ex = jaxshap.KernelExplainer(model, bg, 40, shared_coalitions=True, third_order=True, prior="auto")
    assert ex.prior == "leading"  # a small budget: the per-row prior, on the shared draw's parts

    def shared_row(x):
        v = game(x, jnp.concatenate([ends, masks]))[:, None]
        return kernel_solve(plan, masks, jnp.asarray(weights, jnp.float32), v[2:], v[0], v[1], third_order=True,
                            prior=ex.prior)

    expl = ex(X, key=key)
    phi, se = jax.jit(jax.vmap(shared_row))(Xj)
    np.testing.assert_allclose(np.asarray(expl.values), np.asarray(phi)[..., 0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.stderr), np.asarray(se)[..., 0], atol=1e-5)

    # independent: row i draws its own coalitions in the program from fold_in(key, i)
    def row(k, x):
        return kernel_shapley(k, partial(game, x), m, 40, third_order=True, prior=ex.prior)[:2]

    expl = jaxshap.KernelExplainer(model, bg, 40, shared_coalitions=False, third_order=True, prior="auto")(X, key=key)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(len(X)))
    phi, se = jax.jit(jax.vmap(row))(keys, Xj)
    np.testing.assert_allclose(np.asarray(expl.values), np.asarray(phi), atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.stderr), np.asarray(se), atol=1e-5)


@pytest.mark.parametrize(
    "m,n,options",
    [(7, 40, {}), (8, 14, {}), (9, 60, {"third_order": True}), (12, 31, {"third_order": True}),
     (9, 60, {"prior": "hierarchical"}), (20, 300, {}), (6, 62, {})],
)
def test_one_key_gives_one_set_of_coalitions_shared_or_not(m, n, options):
    """The shared draw is the one row 0 makes with shared_coalitions=False: the same key gives
    row 0 the same coalitions (so the same values and standard errors) either way, for small
    pooled budgets, explicit and kernel-form controls, a per-row prior and full enumeration; the
    other rows differ between the two (their own draws)."""
    params, bg, X = make_problem(m, n_rows=3, seed=m + n)
    model = partial(jax_mlp, f64(params))
    key = jax.random.key(m * n)
    runs = [jaxshap.KernelExplainer(model, bg, n, shared_coalitions=shared, **options)(X, key=key) for shared in (True, False)]
    (phi_s, se_s), (phi_i, se_i) = ((np.asarray(e.values), np.asarray(e.stderr)) for e in runs)
    scale = np.abs(phi_s).max()
    np.testing.assert_allclose(phi_s[0], phi_i[0], atol=5e-5 * scale)
    np.testing.assert_allclose(se_s[0], se_i[0], rtol=2e-3, atol=5e-5 * scale)
    exact = n >= 2**m - 2
    assert exact or np.abs(phi_s[1:] - phi_i[1:]).max() > 1e-3 * scale  # other rows: other draws
    # and the shared draw does not depend on the rows explained with it
    again = jaxshap.KernelExplainer(model, bg, n, **options)(X[::-1], key=key)
    np.testing.assert_allclose(np.asarray(again.values)[::-1], phi_s, atol=5e-6 * scale)


def test_pooled_small_budget_weights_are_unbiased():
    """Pooled layers (with replacement, importance weights): over many keys each size's weights
    add up, on average, to that size's kernel mass; the plan honours the budget exactly."""
    m, n = 12, 2 * 12 + 7  # size-1 layer enumerated, 3 pairs and one single pooled
    plan = kernel_plan(m, n, "paired")
    assert plan.pooled is not None and plan.pooled.n_pairs == 3 and plan.pooled.extra == 1 and plan.identified
    keys = jax.random.split(jax.random.key(0), 20000)
    masks, weights = _draws(plan)(keys)
    weights = np.asarray(weights, np.float64)
    assert masks.shape == (20000, n, m)
    sizes = masks.sum(-1)
    for s in range(1, m):
        total = np.where(sizes == s, weights, 0.0).sum(1)
        want = kernel_weight(m, s) * math.comb(m, s)
        assert abs(total.mean() - want) < 4 * total.std() / np.sqrt(len(total)) + 1e-6 * want, (s, total.mean(), want)
    assert not kernel_plan(m, 8, "paired").identified


def test_unidentified_budget_gives_infinite_stderr_and_efficiency():
    m = 10
    params, bg, X = make_problem(m, n_rows=2, seed=9)
    expl = jaxshap.KernelExplainer(partial(jax_mlp, params), bg, 6)(X)
    assert np.isinf(np.asarray(expl.stderr)).all() and np.isfinite(np.asarray(expl.values)).all()
    fx = numpy_mlp(f64(params), X)
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), fx, atol=1e-4)


def _random_cubic_game(m, rng):
    """A game exactly cubic in ``u = 2 z - 1``: a linear part and every triple with a small random
    coefficient (``rng`` draws the linear part, then the triples'). Returns ``(game, exact)``,
    ``exact`` the Shapley values (2 per linear unit, 2/3 of a triple's coefficient to each member)."""
    lin = rng.normal(size=m)
    t = np.array(list(itertools.combinations(range(m), 3)))
    coef = rng.normal(size=len(t)) * 0.1

    def game(masks):
        u = 2.0 * masks.astype(jnp.float32) - 1.0
        return u @ lin + jnp.prod(u[:, t], axis=-1) @ coef.astype(np.float32)

    exact = 2 * lin
    np.add.at(exact, t.ravel(), np.repeat(2 * coef / 3, 3))
    return game, exact


def test_third_order_in_kernel_form_beyond_16_features():
    """At M = 20 (1140 triples, more than the 400 coalitions) the controls run in kernel form and
    still take most of a cubic game's error out (every triple has a small random coefficient)."""
    m = 20
    game, exact = _random_cubic_game(m, np.random.default_rng(2))
    err = {}
    for third in (False, True):
        run = jax.jit(jax.vmap(lambda k: kernel_shapley(k, game, m, 400, third_order=third)[0]))
        phi = np.asarray(run(jax.random.split(jax.random.key(3), 8)))
        err[third] = float(((phi - exact) ** 2).mean())
    # about 180 sampled pairs for 1140 terms: the ridge fit removes roughly the share the sample can identify
    assert err[True] < err[False] / 1.5, err


@pytest.mark.parametrize("m,n", [(12, 60), (20, 400)])
def test_middle_sizes_help_the_controls_while_terms_outnumber_pairs(m, n):
    """With more third-order terms than sampled pairs (220 for 18 at M = 12; 1140 for about 180
    at M = 20), the middle design, on the same budget and game, leaves less of a random cubic
    game's error than uniform sizes (leverage) or kernel-proportional ones (paired); and every
    layer keeps at least one pair."""
    game, exact = _random_cubic_game(m, np.random.default_rng(m))
    err = {}
    for sampler in ("paired", "leverage", "middle"):
        run = jax.jit(jax.vmap(lambda k: kernel_shapley(k, game, m, n, sampler=sampler, third_order=True)[0]))
        phi = np.asarray(run(jax.random.split(jax.random.key(5), 24)), np.float64)
        err[sampler] = float(((phi - exact) ** 2).mean())
    assert err["middle"] < min(err["paired"], err["leverage"]) / 1.2, err
    plan = kernel_plan(m, n, "middle")
    inner = [st.n_pairs for st in plan.strata if _innermost(m, st.size)]
    assert sum(inner) >= MIDDLE_SHARE * sum(st.n_pairs for st in plan.strata) - len(plan.strata)
    assert min(st.n_pairs for st in plan.strata) >= 1


def test_cached_plans_survive_switching_x64():
    """A plan first used inside a float32 jit must still work eagerly under x64 (and back)."""
    m, c = 6, 40
    weights = np.arange(1.0, m + 1.0)
    f32 = jax.jit(lambda key: kernel_shapley(key, lambda ms: (ms @ jnp.asarray(weights, jnp.float32)), m, c)[0])
    np.testing.assert_allclose(f32(jax.random.key(1)), weights, rtol=1e-5)
    with jax.enable_x64(True):
        phi = kernel_shapley(jax.random.key(1), lambda ms: ms.astype(jnp.float64) @ jnp.asarray(weights), m, c)[0]
        assert phi.dtype == jnp.float64
        np.testing.assert_allclose(phi, weights, rtol=1e-12)


@pytest.mark.parametrize("budget", [14, 16])
def test_pooled_draws_that_miss_a_direction_are_flagged_not_nan(budget):
    """At M=8, budgets 2M-2 and 2M pool the sizes and sample with replacement: some draws do not
    identify the regression. They used to give NaN (reported as a non-finite *model* output).
    At 2M-2 there are as many sampled pairs as unknowns, so no draw has a residual for a stderr."""
    m = 8
    params, bg, X = make_problem(m, n_rows=3, seed=4)
    model = partial(jax_mlp, params)
    ex = jaxshap.KernelExplainer(model, bg, budget)
    exact = jaxshap.ExactExplainer(model, bg)(X)
    spanned = 0
    for k in range(6):
        expl = ex(X, key=k)
        values, stderr = np.asarray(expl.values), np.asarray(expl.stderr)
        assert np.isfinite(values).all()
        np.testing.assert_allclose(values.sum(1) + np.asarray(expl.base_values), np.asarray(model(X)), atol=1e-5)
        if np.isfinite(stderr).all():
            spanned += 1
            assert np.abs(values - np.asarray(exact.values)).max() < 10 * stderr.max() + 1e-5
        else:
            assert np.isinf(stderr).all()
    assert spanned == 0 if budget == 2 * m - 2 else spanned >= 1
