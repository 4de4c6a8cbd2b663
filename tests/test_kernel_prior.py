"""KernelSHAP's priors on the third-order controls: the hierarchical prior against NumPy oracles."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import null_space

import jaxshap
from jaxshap.coalitions import Auto, kernel_plan, sample_kernel_coalitions
from jaxshap.estimators import Hierarchical, Isotropic, Leading, RowPrior, kernel_shapley, kernel_solve
from jaxshap._coalitions._kernel_sampling import plan_rows
from jaxshap._estimators._control_variates import weighted_triple_kernel
from jaxshap._estimators._kernel import third_order_ridge
from jaxshap._estimators._kernel_solve import apply_operator, gls_apply, gls_operator, regression_rows
from oracle import shapley_from_game


# --- oracles, written from the definitions -------------------------------------------------------
def draw(plan, seed):
    """A draw of ``plan``'s coalitions as NumPy arrays: masks ``[C, M]``, weights ``[C]`` (float64)."""
    with jax.enable_x64(True):
        masks, weights = sample_kernel_coalitions(jax.random.key(seed), plan)
    return np.asarray(masks), np.asarray(weights, np.float64)


def triples(m):
    return np.array(list(itertools.combinations(range(m), 3)), dtype=int)


def residualised_terms(masks, m):
    """``r_T(S) = u_T(S) - (u_a + u_b + u_c) / 3`` for every triple, ``[C, C(M, 3)]``, with ``u = 2 z - 1``."""
    u = 2.0 * np.asarray(masks, np.float64) - 1.0
    cols = u[:, triples(m)]
    return cols.prod(-1) - cols.sum(-1) / 3


def oracle_fit(masks, weights, values, v0, v1, variances, rho):
    """The efficiency-constrained, kernel-weighted regression over the coalitions themselves, with
    every residualised third-order term as an extra column whose coefficient has a ridge
    ``1 / variance`` (``variances [C(M, 3)]`` in units of ``1 / lambda``, ``lambda = rho tr(D^T W D) / M``).

    The constraint ``sum(phi) = v1 - v0`` is kept by writing ``phi = (v1 - v0) / M + B eta`` with
    ``B`` an orthonormal basis of the directions orthogonal to ``1``; solved by the normal equations.
    """
    m = masks.shape[1]
    z = np.asarray(masks, np.float64)
    w = np.asarray(weights, np.float64) / np.sum(weights)
    delta = v1 - v0
    r = values - v0 - z.mean(1) * delta  # the response after the constraint's offset
    d = z - z.mean(1, keepdims=True)
    lam = rho * np.einsum("c,cm,cm->", w, d, d) / m
    basis = null_space(np.ones((1, m)))
    x = np.concatenate([d @ basis, residualised_terms(masks, m)], axis=1)
    pen = np.concatenate([np.zeros(m - 1), lam / np.asarray(variances)])
    coef = np.linalg.solve((x * w[:, None]).T @ x + np.diag(pen), (x * w[:, None]).T @ r)
    return delta / m + basis @ coef[: m - 1]


def oracle_variances(masks, weights, values, v0, v1, rho, power, mix, features=None, terms=None, tail=None):
    """The hierarchical prior's variances ``mix + (1 - mix) a_T / mean(a_T)`` (units of ``1 / lambda``),
    ``a_T`` the product over the triple of the isotropic fit's scales ``a_j = |phi_j|^p / mean |phi|^p``;
    with ``features``/``terms``, those only on the ``terms`` largest ``a_T`` among the triples of
    the ``features`` largest ``a_j``, and ``tail`` (default ``mix``) on every other term, with
    ``tail`` the least variance of any term (the leading-terms prior)."""
    m = masks.shape[1]
    t = triples(m)
    phi = oracle_fit(masks, weights, values, v0, v1, np.ones(len(t)), rho)
    a = np.abs(phi) ** power
    a = a / a.mean()
    a_t = a[t].prod(1)
    keep = np.ones(len(t), bool)
    if features is not None:
        top = np.argsort(-a, kind="stable")[:features]
        keep = np.isin(t, top).all(1)
        if terms is not None and terms < keep.sum():
            cut = np.sort(a_t[keep])[-terms]
            keep &= a_t >= cut
            assert keep.sum() == terms  # no ties at the cut in these tests
    tail = mix if tail is None else tail
    return np.where(keep, np.maximum(mix + (1 - mix) * a_t / a_t.mean(), tail), tail)


def oracle_hierarchical(masks, weights, values, v0, v1, rho, power, mix):
    """The fit with the hierarchical prior's variances (:func:`oracle_variances`)."""
    return oracle_fit(masks, weights, values, v0, v1, oracle_variances(masks, weights, values, v0, v1, rho, power, mix), rho)


# --- the kernel -----------------------------------------------------------------------------------
def test_weighted_triple_kernel_is_the_sum_over_explicit_terms():
    xp = jnp
    from jaxshap._estimators._control_variates import odd_kernel, triple_mass, weighted_triple_kernel

    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for m in (3, 4, 9):
            ma, mb = rng.random((7, m)) < 0.5, rng.random((5, m)) < 0.5
            scales = rng.random(m) + 0.1
            explicit = (residualised_terms(ma, m) * scales[triples(m)].prod(1)) @ residualised_terms(mb, m).T
            ua, ub = (xp.asarray(2.0 * s - 1.0) for s in (ma, mb))
            got = np.asarray(weighted_triple_kernel(ua, ub, xp.asarray(scales)))
            np.testing.assert_allclose(got, explicit, rtol=1e-10, atol=1e-10)
            ones = np.asarray(weighted_triple_kernel(ua, ub, xp.ones(m)))
            np.testing.assert_allclose(ones, np.asarray(odd_kernel(ua, ub, 3)), rtol=1e-10, atol=1e-10)
            assert math.isclose(float(triple_mass(xp.asarray(scales))), scales[triples(m)].prod(1).sum(), rel_tol=1e-12)


# --- the fit ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("power,mix", [(1.0, 0.3), (0.5, 0.0), (2.0, 1.0)])
def test_hierarchical_fit_is_the_reweighted_ridge_regression(power, mix):
    """The per-row solve (paired rows, kernel form, closed-form kernel) equals the explicit ridge
    regression over the coalitions with the prior's variances; ``mix = 1`` is the isotropic fit."""
    m, n = 8, 70
    rng = np.random.default_rng(2)
    plan = kernel_plan(m, n, "middle")
    masks, weights = draw(plan, 3)
    values = rng.normal(size=n) + (2.0 * masks - 1.0) @ rng.normal(size=m)
    v0, v1 = rng.normal(), rng.normal()
    rho = third_order_ridge(m)
    want = oracle_hierarchical(masks, weights, values, v0, v1, rho, power, mix)
    with jax.enable_x64(True):
        phi, stderr = kernel_solve(
            plan, jnp.asarray(masks), jnp.asarray(weights), jnp.asarray(values)[:, None], jnp.asarray([v0]),
            jnp.asarray([v1]), third_order=True, prior=Hierarchical(power=power, mix=mix),
        )
        iso = kernel_solve(
            plan, jnp.asarray(masks), jnp.asarray(weights), jnp.asarray(values)[:, None], jnp.asarray([v0]),
            jnp.asarray([v1]), third_order=True, prior="isotropic",
        )[0]
    np.testing.assert_allclose(np.asarray(phi)[:, 0], want, rtol=1e-7, atol=1e-9)
    iso_want = oracle_fit(masks, weights, values, v0, v1, np.ones(math.comb(m, 3)), rho)
    np.testing.assert_allclose(np.asarray(iso)[:, 0], iso_want, rtol=1e-7, atol=1e-9)
    if mix < 1:
        assert np.abs(want - iso_want).max() > 1e-3  # the prior does move the estimate
    assert np.isfinite(np.asarray(stderr)).all() and (np.asarray(stderr) > 0).all()



def test_row_solve_applies_the_gls_without_forming_its_operators():
    """``gls_apply`` (the per-row path) is the GLS written out in NumPy, ``phi = Delta / M + (D^T C^-1 D
    + H_0)^-1 D^T C^-1 o`` with ``C = W^-1 + K``, and its standard error is that of the formed
    ``U x U`` operators (``gls_operator``, whose leave-one-row-out diagonal it computes from ``L^-1``)."""
    m, n = 9, 90
    rng = np.random.default_rng(4)
    plan = kernel_plan(m, n, "paired")
    masks, weights = draw(plan, 5)
    values = rng.normal(size=(n, 2)) + (2.0 * masks - 1.0) @ rng.normal(size=(m, 2))
    v0, v1 = rng.normal(size=2), rng.normal(size=2)
    with jax.enable_x64(True):
        rows = regression_rows(jnp.asarray(masks), jnp.asarray(weights), plan_rows(plan), jnp.float64)
        signs = 2.0 * rows.z - 1.0
        kernel = weighted_triple_kernel(signs, signs, jnp.asarray(rng.uniform(0.1, 2.0, size=m))) / 7.0
        h_first = float(rows.curvature) / (m * (m - 1)) * jnp.ones((m, m))
        args = (plan, jnp.asarray(values), jnp.asarray(v0), jnp.asarray(v1))
        phi, stderr = jax.jit(lambda k: gls_apply(rows, k, h_first, *args))(kernel)
        phi_op, stderr_op = apply_operator(gls_operator(rows, kernel, h_first), *args)
    first, second, a, b, _ = (np.asarray(x) for x in rows.statics)
    r = values - v0 - masks.mean(1, keepdims=True) * (v1 - v0)
    o = a[:, None] * r[first] + b[:, None] * r[second]
    d = np.asarray(rows.design)
    cinv = np.linalg.inv(np.diag(1.0 / np.asarray(rows.wu)) + np.asarray(kernel))
    want = (v1 - v0) / m + np.linalg.solve(d.T @ cinv @ d + np.asarray(h_first), d.T @ cinv @ o)
    np.testing.assert_allclose(np.asarray(phi), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.asarray(phi_op), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.asarray(stderr), np.asarray(stderr_op), rtol=1e-9)
    assert (np.asarray(stderr) > 0).all()

def _paired_game(m, n, seed, outputs=None):
    rng = np.random.default_rng(seed)
    plan = kernel_plan(m, n, "paired")
    masks, weights = draw(plan, seed)
    shape = (m,) if outputs is None else (m, outputs)
    values = rng.normal(size=(n,) + shape[1:]) + (2.0 * masks - 1.0) @ rng.normal(size=shape)
    v0, v1 = rng.normal(size=shape[1:]), rng.normal(size=shape[1:])
    return plan, masks, weights, values, v0, v1


@pytest.mark.parametrize("features,terms,tail", [(5, None, 1.0), (7, 12, 1.0), (11, 40, 1.0), (7, 12, 0.3), (11, 40, 0.6)])
def test_leading_fit_is_the_ridge_regression_on_its_largest_terms(features, terms, tail):
    """The Woodbury-updated shared solve equals the explicit ridge regression whose variances are
    the hierarchical prior's on the ``terms`` largest products among the ``features`` strongest
    features' triples (at least ``tail``) and ``tail`` elsewhere, with at most a fifth as many
    terms as regression rows (``rows_per_term``; 40 is cut to 12 here); its standard error equals
    the per-row GLS (``gls_apply``, its own factorisation) with that prior's kernel written out
    term by term."""
    m, n = 11, 120
    plan, masks, weights, values, v0, v1 = _paired_game(m, n, 6)
    rho = third_order_ridge(m)
    prior = Leading(features=features, terms=terms, tail=tail)
    units = len(plan_rows(plan)[0])
    kept = prior.n_terms(m, units)[1]
    assert kept == min(math.comb(features, 3) if terms is None else terms, units // prior.rows_per_term)
    var = oracle_variances(masks, weights, values, v0, v1, rho, prior.power, prior.mix, features, kept, tail)
    want = oracle_fit(masks, weights, values, v0, v1, var, rho)
    with jax.enable_x64(True):
        args = (jnp.asarray(values)[:, None], jnp.asarray([v0]), jnp.asarray([v1]))
        phi, stderr = kernel_solve(plan, jnp.asarray(masks), jnp.asarray(weights), *args, third_order=True, prior=prior)
        rows = regression_rows(jnp.asarray(masks), jnp.asarray(weights), plan_rows(plan), jnp.float64)
        lam = rho * float(rows.curvature) / m
        first = np.asarray(rows.statics[0])
        terms_x = residualised_terms(masks[first], m)
        kernel = jnp.asarray((terms_x * var) @ terms_x.T / lam)
        h_first = float(rows.curvature) / (m * (m - 1)) * jnp.ones((m, m))
        phi_gls, stderr_gls = gls_apply(rows, kernel, h_first, plan, *args)
    np.testing.assert_allclose(np.asarray(phi)[:, 0], want, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(phi_gls)[:, 0], want, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(stderr), np.asarray(stderr_gls), rtol=1e-8)
    hier = oracle_hierarchical(masks, weights, values, v0, v1, rho, prior.power, prior.mix)
    assert np.abs(want - hier).max() > 1e-4  # the truncation does change the estimate here
    assert (np.asarray(stderr) > 0).all()


def test_residualised_triples_equal_the_products_of_their_signs():
    from jaxshap._estimators._kernel_priors import residualised_triples

    rng = np.random.default_rng(3)
    z = rng.random((50, 9)) < 0.5
    t = triples(9)[rng.choice(84, size=20, replace=False)]
    s = 2.0 * z - 1.0
    want = s[:, t].prod(-1) - s[:, t].sum(-1) / 3.0  # [U, r], from the definition
    got = np.asarray(residualised_triples(jnp.asarray(z, jnp.float32), jnp.asarray(t)))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert set(np.round(want.ravel() * 3).astype(int)) == {-4, 0, 4}  # counts 1 and 2, and 0 or 3, occur


def test_leading_with_every_triple_is_the_hierarchical_prior():
    m, n = 7, 100
    plan, masks, weights, values, v0, v1 = _paired_game(m, n, 8, outputs=2)
    assert len(plan_rows(plan)[0]) >= math.comb(m, 3)  # room for every triple at one row per term
    with jax.enable_x64(True):
        run = lambda prior: kernel_solve(  # noqa: E731
            plan, jnp.asarray(masks), jnp.asarray(weights), jnp.asarray(values), jnp.asarray(v0), jnp.asarray(v1),
            third_order=True, prior=prior,
        )
        for mix in (0.3, 0.0):
            want = run(Hierarchical(mix=mix))
            got = run(Leading(features=m, terms=None, mix=mix, tail=mix, rows_per_term=1))
            for a, b in zip(got, want):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
    assert Leading().n_terms(60) == (16, 120) and Leading().n_terms(8) == (8, 56)
    assert Leading().n_terms(100, 1100) == (16, 120) and Leading().n_terms(16, 80) == (16, 16)
    for field, bad in (("features", 2), ("terms", 0), ("tail", 1.5), ("tail", -0.1), ("rows_per_term", 0)):
        with pytest.raises(ValueError, match=field):
            Leading(**{field: bad})


@pytest.mark.parametrize("prior", ["hierarchical", "leading"])
def test_hierarchical_is_exact_when_every_coalition_is_enumerated(prior):
    m = 6
    rng = np.random.default_rng(4)
    table = rng.normal(size=2**m)
    bits = 1 << np.arange(m)

    def game(masks):
        return jnp.asarray(table)[masks.astype(jnp.int32) @ jnp.asarray(bits)]

    exact = shapley_from_game(lambda s: table[sum(1 << j for j in s)], m)
    with jax.enable_x64(True):
        run = jax.jit(lambda k: kernel_shapley(k, game, m, 2**m - 2, third_order=True, prior=prior)[:2])
        phi, stderr = run(jax.random.key(0))
    np.testing.assert_allclose(np.asarray(phi), exact, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(stderr), 0.0)


def _hierarchical_game(m, rng, strength=0.3):
    """A model whose interventional game at ``x = 1`` over the background ``-1`` is ``sum_j beta_j u_j
    + sum_T c_T u_T`` with ``c_T`` proportional to the product of its members' ``beta`` (interactions
    that follow the main effects); its exact Shapley values: ``2 beta_j + 2/3 sum_{T ni j} c_T``."""
    beta = rng.normal(size=m) * (rng.random(m) < 0.5)
    t = triples(m)
    coef = strength * beta[t].prod(1)
    tj, cj, bj = jnp.asarray(t), jnp.asarray(coef, jnp.float32), jnp.asarray(beta, jnp.float32)

    def model(X):
        return X @ bj + (X[:, tj].prod(-1) * cj).sum(-1)

    exact = 2 * beta
    np.add.at(exact, t.ravel(), np.repeat(2 * coef / 3, 3))
    return model, -np.ones((1, m), np.float32), np.ones((1, m), np.float32), exact


def test_hierarchical_prior_cuts_the_error_where_interactions_follow_the_main_effects():
    """Same coalitions (same keys), same evaluations: on a game whose third-order terms follow its
    main effects, the hierarchical prior leaves a fraction of the isotropic prior's squared error,
    and its standard error still covers."""
    m, n = 20, 200
    model, background, x, exact = _hierarchical_game(m, np.random.default_rng(0))
    errors, covered = {}, []
    for prior in ("isotropic", "hierarchical", "leading"):
        ex = jaxshap.KernelExplainer(model, background, n, prior=prior)
        out = [ex(x, key=k) for k in range(8)]
        phi = np.stack([np.asarray(o.values[0], np.float64) for o in out])
        errors[prior] = float(((phi - exact) ** 2).mean())
        if prior != "isotropic":
            se = np.stack([np.asarray(o.stderr[0], np.float64) for o in out])
            covered = np.abs(phi - exact) <= 3 * se
            assert 0.3 < (se**2).mean() / errors[prior] < 3, (prior, (se**2).mean(), errors[prior])
            assert covered.mean() >= 0.9, (prior, covered.mean())
    assert errors["hierarchical"] < errors["isotropic"] / 3, errors
    assert errors["leading"] < errors["isotropic"] / 3, errors


@pytest.mark.parametrize("prior", [Hierarchical(), Leading(features=6, terms=10)])
def test_shared_and_independent_draws_use_the_same_prior(prior):
    """The shared path (the draw's operators and parts once, then each row's step) and the
    per-row solve give the same values for the same coalitions."""
    from jaxshap._estimators._kernel import draw_operators

    m, n = 9, 60
    rng = np.random.default_rng(7)
    plan = kernel_plan(m, n, "middle")
    key = jax.random.key(1)
    controls = ((3, third_order_ridge(m)),)
    masks, ops, parts = draw_operators(key, plan, controls, prior)
    weights = sample_kernel_coalitions(key, plan, jnp.float32)[1]
    values = jnp.asarray(rng.normal(size=(n, 2)) + (2.0 * np.asarray(masks) - 1.0) @ rng.normal(size=(m, 2)), jnp.float32)
    v0, v1 = jnp.asarray(rng.normal(size=2), jnp.float32), jnp.asarray(rng.normal(size=2), jnp.float32)
    shared = jax.jit(lambda v: prior.apply(ops, parts, plan, v, v0, v1))(values)
    traced = jax.jit(lambda v: kernel_solve(plan, masks, weights, v, v0, v1, third_order=True, prior=prior))(values)
    for a, b in zip(shared, traced):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5 * float(np.abs(shared[0]).max()))
    np.testing.assert_allclose(np.asarray(shared[0]).sum(0), np.asarray(v1 - v0), rtol=1e-4, atol=1e-5)  # efficiency


# --- the choice ------------------------------------------------------------------------------------
def test_prior_default_and_auto_follow_the_budget_and_bad_priors_are_refused():
    m = 12
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(m, 4)), jnp.float32)
    model = lambda X: jnp.tanh(X @ w).sum(-1)  # noqa: E731
    bg = rng.normal(size=(5, m)).astype(np.float32)
    prior = lambda budget=None, **kw: jaxshap.KernelExplainer(model, bg, budget, **{"prior": "auto", **kw}).prior  # noqa: E731
    units = int(Auto().prior_units * m)
    # the default is the rule: the leading-terms prior at small budgets, the shared solve at the default one
    assert jaxshap.KernelExplainer(model, bg, 5 * m).prior == "leading"
    assert jaxshap.KernelExplainer(model, bg).prior == "isotropic"
    assert prior(5 * m) == "leading" and prior(units) == "leading"
    assert prior(units + 1) == "isotropic" and prior() == "isotropic"  # the default budget: one shared solve
    assert prior(2 * m + 2) == "isotropic"  # no controls at shap's smallest budget
    assert prior(5 * m, third_order=False) == "isotropic"
    wide = Auto().prior_coalitions  # the cap whatever M: at M = 100, 32 M is above it
    assert Auto().prior(100, int(wide), True) == "leading" and Auto().prior(100, int(wide) + 1, True) == "isotropic"
    assert Auto().prior(100, 2 * 100 + 2048, True) == "isotropic"  # the default budget keeps the shared solve
    assert prior(5 * m, prior="isotropic") == "isotropic" and prior(units + 1, prior="hierarchical") == "hierarchical"
    mine = Hierarchical(power=0.5, mix=0.1)
    assert prior(5 * m, prior=mine) is mine
    assert set(RowPrior.registered()) >= {"isotropic", "hierarchical", "leading"} and Isotropic().name == "isotropic"
    with pytest.raises(ValueError, match="third-order control variates"):
        jaxshap.KernelExplainer(model, bg, 5 * m, third_order=False, prior="hierarchical")
    with pytest.raises(ValueError, match="prior='isotropic'"):
        jaxshap.KernelExplainer(model, bg, 5 * m, third_order=False, prior="hierarchical")
    with pytest.raises(ValueError, match="`prior` must be one of"):
        jaxshap.KernelExplainer(model, bg, 5 * m, prior="sparse")
    with pytest.raises(ValueError, match="mix"):
        Hierarchical(mix=1.5)
    with pytest.raises(ValueError, match="power"):
        Hierarchical(power=-1.0)
