"""GradientExplainer (expected gradients) and integrated_gradients against NumPy oracles."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_mlp
from oracle import interventional_shapley

import jaxshap
from jaxshap._estimators._gradients import QUADRATURE_RULES, quadrature


# --- NumPy oracle: the tanh MLP's gradient by hand, path integrals by a fine quadrature -------
def mlp_np(params):
    w1, b1, w2 = (np.asarray(params[k], np.float64) for k in ("w1", "b1", "w2"))
    f = lambda Z: np.tanh(Z @ w1 + b1) @ w2
    # d/dz tanh(z W1 + b1) w2 = W1 diag(1 - tanh^2) w2; [P, M] (or [P, M, K])
    grad = lambda Z: np.einsum("mh,ph,h...->pm...", w1, 1.0 - np.tanh(Z @ w1 + b1) ** 2, w2)
    return f, grad


def ig_oracle(grad, x, b, n_nodes=200):
    """(x - b) * int_0^1 grad(b + a (x - b)) da, with 200-point Gauss-Legendre in float64."""
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    alphas, weights = (t + 1) / 2, w / 2
    g = grad(b[None, :] + alphas[:, None] * (x - b)[None, :])  # [S, M, ...]
    mean = np.tensordot(weights, g, axes=(0, 0))
    return (x - b).reshape((-1,) + (1,) * (mean.ndim - 1)) * mean


def eg_oracle(grad, X, background):
    """Expected gradients as the exact average over background rows of integrated gradients."""
    return np.stack([np.mean([ig_oracle(grad, x, b) for b in background], axis=0) for x in X])


@pytest.fixture
def problem(rng):
    params, apply = make_mlp(3, 4, hidden=6)
    model = lambda X: apply(params, X)
    background = rng.normal(size=(8, 4)).astype(np.float32)
    X = rng.normal(size=(3, 4)).astype(np.float32)
    return params, model, background, X


# --- quadrature -------------------------------------------------------------------------------
def test_gauss_legendre_exact_for_degree_2n_minus_1():
    for n in (1, 2, 3, 5):
        alphas, weights = quadrature("gauss_legendre", n)
        for degree in range(2 * n):
            np.testing.assert_allclose(weights @ alphas**degree, 1.0 / (degree + 1), rtol=1e-12)
        assert abs(weights @ alphas ** (2 * n) - 1.0 / (2 * n + 1)) > 1e-6  # and not beyond


def test_riemann_rules_nodes_and_weights():
    for rule in QUADRATURE_RULES:
        alphas, weights = quadrature(rule, 4)
        np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-12)
        assert alphas.min() >= 0 and alphas.max() <= 1
    np.testing.assert_allclose(quadrature("riemann_left", 4)[0], [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(quadrature("riemann_right", 4)[0], [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(quadrature("riemann_middle", 4)[0], [0.125, 0.375, 0.625, 0.875])
    np.testing.assert_allclose(quadrature("riemann_trapezoid", 3)[1], [0.25, 0.5, 0.25])
    with pytest.raises(ValueError, match="rule"):
        quadrature("simpson", 4)
    with pytest.raises(ValueError, match="n_steps"):
        quadrature("riemann_trapezoid", 1)


# --- integrated gradients ---------------------------------------------------------------------
def test_integrated_gradients_matches_numpy_oracle(problem):
    params, model, background, X = problem
    _, grad = mlp_np(params)
    b = background[0]
    expl = jaxshap.integrated_gradients(model, X, b, n_steps=24)
    want = np.stack([ig_oracle(grad, x.astype(np.float64), b.astype(np.float64)) for x in X])
    np.testing.assert_allclose(np.asarray(expl.values), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.base_values), np.full(3, float(model(b[None])[0])), rtol=1e-6)
    assert expl.stderr is None and expl.values.shape == (3, 4)


def test_integrated_gradients_completeness_and_convergence(problem):
    params, model, background, X = problem
    fx = np.asarray(model(X))
    err = {}
    for rule in ("gauss_legendre", "riemann_left", "riemann_middle"):
        for n in (16, 64):
            e = jaxshap.integrated_gradients(model, X, background[1], n_steps=n, rule=rule)
            err[rule, n] = np.abs(np.asarray(e.values.sum(1) + e.base_values) - fx).max()
    scale = np.abs(fx - np.asarray(model(background[1:2]))).max()
    assert err["gauss_legendre", 64] < 1e-5 * max(scale, 1.0)
    # once the nodes resolve the model's curvature along the path (this random tanh network is
    # steep: at 16 nodes the midpoint rule is still as good), Gauss-Legendre converges
    # geometrically and beats both Riemann sums at the same number of gradient evaluations
    assert err["gauss_legendre", 64] < 0.1 * err["riemann_middle", 64] < 0.1 * err["riemann_left", 64]
    assert err["gauss_legendre", 64] < 1e-3 * err["gauss_legendre", 16]
    assert err["riemann_left", 64] < err["riemann_left", 16]


def test_integrated_gradients_linear_model_is_exact_for_every_rule(rng):
    w = rng.normal(size=5).astype(np.float32)
    model = lambda X: X @ w + 0.5
    X, b = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    for rule in QUADRATURE_RULES:
        expl = jaxshap.integrated_gradients(model, X, b, n_steps=3, rule=rule)
        np.testing.assert_allclose(np.asarray(expl.values), w * (X - b), rtol=1e-5, atol=1e-6)


def test_integrated_gradients_per_row_baselines_and_multi_output(rng):
    params, apply = make_mlp(5, 3, hidden=5, n_outputs=2)
    model = lambda X: apply(params, X)
    X = rng.normal(size=(4, 3)).astype(np.float32)
    B = rng.normal(size=(4, 3)).astype(np.float32)
    expl = jaxshap.integrated_gradients(model, X, B, n_steps=16)
    assert expl.values.shape == (4, 3, 2) and expl.base_values.shape == (4, 2)
    _, grad = mlp_np(params)
    want = np.stack([ig_oracle(grad, x.astype(np.float64), b.astype(np.float64)) for x, b in zip(X, B)])
    np.testing.assert_allclose(np.asarray(expl.values), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.base_values), np.asarray(model(B)), rtol=1e-6)


def test_integrated_gradients_errors(problem):
    _, model, background, X = problem
    with pytest.raises(ValueError, match="baseline"):
        jaxshap.integrated_gradients(model, X, np.zeros(3))
    with pytest.raises(ValueError, match="baseline"):
        jaxshap.integrated_gradients(model, X, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="rule"):
        jaxshap.integrated_gradients(model, X, rule="simpson")
    with pytest.raises(TypeError, match="JAX-traceable"):
        jaxshap.integrated_gradients(lambda A: np.asarray(A).sum(1), X)


# --- expected gradients -----------------------------------------------------------------------
def test_expected_gradients_linear_equals_interventional_shap(rng):
    w = rng.normal(size=(5, 2)).astype(np.float32)
    model = lambda X: X @ w - 1.0
    background = rng.normal(size=(10, 5)).astype(np.float32)
    X = rng.normal(size=(4, 5)).astype(np.float32)
    expl = jaxshap.GradientExplainer(model, background, n_samples=20)(X, key=jax.random.key(3))
    want = interventional_shapley(lambda Z: Z @ w.astype(np.float64) - 1.0, X, background)
    np.testing.assert_allclose(np.asarray(expl.values), want, rtol=1e-5, atol=1e-5)
    fx = np.asarray(model(X))
    np.testing.assert_allclose(np.asarray(expl.values.sum(1) + expl.base_values), fx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.base_values), np.broadcast_to(np.asarray(model(background)).mean(0), (4, 2)), rtol=1e-6)


def test_expected_gradients_agree_with_numpy_oracle_within_stderr(problem):
    params, model, background, X = problem
    _, grad = mlp_np(params)
    expl = jaxshap.GradientExplainer(model, background, n_samples=400)(X, key=jax.random.key(1))
    want = eg_oracle(grad, X.astype(np.float64), background.astype(np.float64))
    z = (np.asarray(expl.values) - want) / np.asarray(expl.stderr)
    assert np.abs(z).max() < 4.0, z
    # and the estimate is informative: the errors are small next to the values
    assert np.abs(np.asarray(expl.values) - want).max() < 0.05 * np.abs(want).max()


def test_expected_gradients_completeness_within_stderr(problem):
    _, model, background, X = problem
    expl = jaxshap.GradientExplainer(model, background, n_samples=800)(X, key=jax.random.key(2))
    gap = np.abs(np.asarray(expl.values.sum(1) + expl.base_values - model(X)))
    # std of a sum <= sum of the stds
    assert (gap < 3.0 * np.asarray(expl.stderr).sum(1)).all(), (gap, np.asarray(expl.stderr).sum(1))
    assert gap.max() < 0.02 * np.abs(np.asarray(model(X) - expl.base_values)).max() + 1e-3


def test_expected_gradients_not_shapley_for_interactions():
    """For f = x0**2 x1 expected gradients (the oracle's path integrals) differ from interventional
    SHAP: the two agree for linear models only, and the explainer estimates the former."""
    model = lambda X: X[:, 0] ** 2 * X[:, 1]
    background = np.array([[0.0, 0.0], [1.0, 2.0]], np.float32)
    X = np.array([[2.0, 1.0]], np.float32)
    eg = jaxshap.GradientExplainer(model, background, n_samples=4000)(X)
    shap_values = interventional_shapley(lambda Z: Z[:, 0] ** 2 * Z[:, 1], X, background)
    f_grad = lambda Z: np.stack([2 * Z[:, 0] * Z[:, 1], Z[:, 0] ** 2], axis=1)
    want = eg_oracle(f_grad, X.astype(np.float64), background.astype(np.float64))
    np.testing.assert_allclose(np.asarray(eg.values), want, atol=5 * float(np.asarray(eg.stderr).max()) + 1e-4)
    assert np.abs(want - shap_values).max() > 0.1


def test_expected_gradients_chunking_keys_and_dataframe(problem):
    pd = pytest.importorskip("pandas")
    _, model, background, X = problem
    ex = jaxshap.GradientExplainer(model, background, n_samples=16)
    small = jaxshap.GradientExplainer(model, background, n_samples=16, memory_budget=256)
    assert small._plan(3)[1] < 16  # the samples of one row are chunked
    a, b = ex(X, key=jax.random.key(5)), small(X, key=jax.random.key(5))
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), rtol=1e-5, atol=1e-6)
    c = ex(X, key=jax.random.key(6))
    assert np.abs(np.asarray(a.values) - np.asarray(c.values)).max() > 1e-4
    # blocks for the progress bar do not change results (row i uses fold_in(key, i))
    d = ex(X, key=jax.random.key(5), progress=True)
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(d.values), rtol=1e-5, atol=1e-6)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    assert ex(frame).feature_names == ["a", "b", "c", "d"]


def test_expected_gradients_local_smoothing(rng):
    w = rng.normal(size=3).astype(np.float32)
    model = lambda X: X @ w
    background = rng.normal(size=(4, 3)).astype(np.float32)
    X = rng.normal(size=(2, 3)).astype(np.float32)
    plain = jaxshap.GradientExplainer(model, background, n_samples=400)(X)
    smooth = jaxshap.GradientExplainer(model, background, n_samples=400, local_smoothing=0.5)(X)
    truth = w * (X - background.mean(0))
    assert np.abs(np.asarray(smooth.values) - truth).max() > 1e-3  # noise was added
    assert (np.abs(np.asarray(smooth.values) - truth) < 4 * np.asarray(smooth.stderr)).all()  # mean-zero noise
    np.testing.assert_allclose(np.asarray(plain.values), truth, rtol=1e-4, atol=1e-5)


def test_expected_gradients_differentiable_and_jittable(rng):
    background = rng.normal(size=(4, 3)).astype(np.float32)
    X = rng.normal(size=(2, 3)).astype(np.float32)

    def loss(w):
        ex = jaxshap.GradientExplainer(lambda Z: Z @ w, background, n_samples=8)
        return (ex(X).values ** 2).sum()

    w = jnp.asarray(rng.normal(size=3), jnp.float32)
    d = X - background.mean(0)
    np.testing.assert_allclose(np.asarray(jax.grad(loss)(w)), 2 * w * (d**2).sum(0), rtol=1e-4)
    np.testing.assert_allclose(float(jax.jit(loss)(w)), float((w**2 * d**2).sum()), rtol=1e-5)


def test_gradient_explainer_errors(problem):
    _, model, background, X = problem
    with pytest.raises(TypeError, match="JAX-traceable"):
        jaxshap.GradientExplainer(lambda A: np.tanh(np.asarray(A)).sum(1), background)
    with pytest.raises(ValueError, match="n_samples"):
        jaxshap.GradientExplainer(model, background, n_samples=1)
    with pytest.raises(ValueError, match="local_smoothing"):
        jaxshap.GradientExplainer(model, background, local_smoothing=-1.0)
    with pytest.raises(ValueError, match="background"):
        jaxshap.GradientExplainer(model, np.zeros((0, 4)))
    weighted = jaxshap.maskers.Independent(background, weights=np.arange(1, 9))
    with pytest.raises(ValueError, match="weighted"):
        jaxshap.GradientExplainer(model, weighted)
    with pytest.raises(ValueError, match="weighted"):
        jaxshap.AmortizedExplainer(model, weighted)
    many = np.random.default_rng(0).normal(size=(150, 4)).astype(np.float32)
    assert jaxshap.GradientExplainer(model, many).background.shape == (150, 4)  # no subsample
    ex = jaxshap.GradientExplainer(model, background, n_samples=4)
    with pytest.raises(ValueError, match="features"):
        ex(X[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        ex(np.full((1, 4), np.nan, np.float32))


def test_gradient_explainer_refuses_a_masker_whose_attribution_is_not_shapley(rng):
    """A Partition masker asks for Owen values; expected gradients would silently ignore its hierarchy."""
    bg = rng.normal(size=(20, 4)).astype(np.float32)
    model = lambda X: jnp.tanh(X).sum(-1)  # noqa: E731
    with pytest.raises(ValueError, match="Owen"):
        jaxshap.GradientExplainer(model, jaxshap.maskers.Partition(bg))
    assert jaxshap.GradientExplainer(model, jaxshap.maskers.Independent(bg, max_samples=None)).n_features == 4
