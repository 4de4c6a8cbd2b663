"""Path-integral attributions for differentiable models: integrated and expected gradients.

Both estimators attribute ``f(x) - f(b)`` along the straight path from a reference ``b`` to the
explained row ``x``. For feature ``j``,

.. math::

    \\mathrm{IG}_j(x; b) = (x_j - b_j) \\int_0^1
        \\frac{\\partial f}{\\partial x_j}\\bigl(b + \\alpha (x - b)\\bigr)\\, d\\alpha,

and the gradient theorem gives completeness, ``sum_j IG_j = f(x) - f(b)`` (Sundararajan, Taly &
Yan, 2017, "Axiomatic attribution for deep networks"). *Integrated gradients* fixes one baseline
and computes the integral with a quadrature rule; *expected gradients* averages ``IG`` over
baselines drawn from a background data set, estimating both the average and the integral by
Monte Carlo (Erion, Janizek, Sturmfels, Lundberg & Lee, 2021, "Improving performance of deep
learning models with axiomatic attribution priors and expected gradients"). For a model that is
linear, ``f(z) = w^T z + c``, the integrand is constant and expected gradients equal the
interventional Shapley values ``w_j (x_j - E[b_j])``.

Everything here works on one row; ``vmap`` makes the batch. Model functions map ``[P, M]`` to
``[P, K]``; attributions come back as ``[M, K]``.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks
from .._core._validate import integer

QUADRATURE_RULES = ("gauss_legendre", "riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid")
"""Names accepted by :func:`quadrature` (``"gausslegendre"`` is also read as ``"gauss_legendre"``)."""


def quadrature(rule: str, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``alpha`` in ``[0, 1]`` and weights (summing to one) of a rule for ``int_0^1 g``.

    * ``"gauss_legendre"``: the ``n``-point Gauss-Legendre rule mapped from ``[-1, 1]``
      (``numpy.polynomial.legendre.leggauss``); exact for polynomials of degree ``2 n - 1``,
      and its error falls geometrically in ``n`` for analytic integrands.
    * ``"riemann_left"``, ``"riemann_right"``: ``alpha_k = k / n`` or ``(k + 1) / n``, weights
      ``1 / n``; error of order ``1 / n``.
    * ``"riemann_middle"``: midpoints ``(k + 1/2) / n``; error of order ``1 / n**2``.
    * ``"riemann_trapezoid"``: ``n`` equally spaced nodes including both ends (``n >= 2``),
      end weights halved; error of order ``1 / n**2``.

    Args:
      rule: one of :data:`QUADRATURE_RULES`.
      n_steps: number of nodes (gradient evaluations per row).

    Returns:
      ``(alphas, weights)``, float64 NumPy arrays of length ``n_steps``.

    Raises:
      ValueError: for an unknown rule or a number of steps below the rule's minimum.
    """
    if rule == "gausslegendre":
        rule = "gauss_legendre"
    if rule not in QUADRATURE_RULES:
        raise ValueError(f"`rule` must be one of {QUADRATURE_RULES}; got {rule!r}.")
    least = 2 if rule == "riemann_trapezoid" else 1
    n = integer(n_steps, "n_steps", least=least, rule=f"an integer of at least {least} for rule {rule!r}")
    k = np.arange(n, dtype=np.float64)
    if rule == "gauss_legendre":
        t, w = np.polynomial.legendre.leggauss(n)
        return (t + 1.0) / 2.0, w / 2.0
    if rule == "riemann_trapezoid":
        w = np.full(n, 1.0 / (n - 1))
        w[[0, -1]] /= 2.0
        return k / (n - 1), w
    offset = {"riemann_left": 0.0, "riemann_right": 1.0, "riemann_middle": 0.5}[rule]
    return (k + offset) / n, np.full(n, 1.0 / n)


def input_gradients(f: Callable[[jax.Array], jax.Array], points: jax.Array) -> jax.Array:
    """Gradients of every output at every point: ``[P, M] -> [P, K, M]``.

    One forward pass and ``K`` reverse passes (one per output) over the whole batch; rows do not
    interact in ``f``, so the gradient of ``sum_p f(z_p)_k`` with respect to ``z_p`` is
    ``grad f(z_p)_k``.
    """
    y, pull = jax.vjp(f, points)
    eye = jnp.eye(y.shape[-1], dtype=y.dtype)
    grads = jax.vmap(lambda e: pull(jnp.broadcast_to(e, y.shape))[0])(eye)  # [K, P, M]
    return jnp.moveaxis(grads, 0, 1)


def integrated_gradients_row(
    f: Callable[[jax.Array], jax.Array],
    x: jax.Array,
    baseline: jax.Array,
    alphas: jax.Array,
    weights: jax.Array,
    chunk: int,
) -> tuple[jax.Array, jax.Array]:
    """Integrated gradients of one row by a quadrature rule.

    .. math::

        \\phi_j = (x_j - b_j) \\sum_s w_s\\, \\partial_j f\\bigl(b + \\alpha_s (x - b)\\bigr).

    Args:
      f: model ``[P, M] -> [P, K]``.
      x: the explained row ``[M]``.
      baseline: the reference row ``[M]``.
      alphas, weights: the rule's nodes and weights ``[S]`` (:func:`quadrature`).
      chunk: nodes evaluated at once (static), for the memory budget.

    Returns:
      ``(phi [M, K], f(baseline) [K])``.
    """
    delta = x - baseline
    points = baseline[None, :] + alphas[:, None].astype(x.dtype) * delta[None, :]
    grads = map_chunks(lambda p: input_gradients(f, p), points, chunk)  # [S, K, M]
    mean_grad = jnp.einsum("s,skm->mk", weights.astype(x.dtype), grads)
    return delta[:, None] * mean_grad, f(baseline[None, :])[0]


def expected_gradients_row(
    key: jax.Array,
    f: Callable[[jax.Array], jax.Array],
    x: jax.Array,
    background: jax.Array,
    n_samples: int,
    local_smoothing: float,
    chunk: int,
) -> tuple[jax.Array, jax.Array]:
    """Expected gradients of one row: Monte Carlo over background rows and path positions.

    .. math::

        \\phi_j = \\frac1n \\sum_{k=1}^n (\\tilde x_{k,j} - b_{k,j})\\,
            \\partial_j f\\bigl(b_k + \\alpha_k (\\tilde x_k - b_k)\\bigr),
        \\qquad \\tilde x_k = x + \\sigma \\varepsilon_k,\\ \\varepsilon_k \\sim N(0, I),

    with ``sigma = local_smoothing`` (SmoothGrad-style noise on the input, as shap's
    ``local_smoothing``; Smilkov et al., 2017). The draws are balanced, which keeps the
    estimate unbiased and lowers its variance:

    * background rows ``b_k`` follow a random permutation of the background, repeated: every row
      is used ``n / B`` times when ``n`` is a multiple of ``B`` (then the estimate is *exact* for a
      linear model), and ``n`` distinct rows are used when ``n < B``;
    * path positions are stratified, ``alpha_k = (pi_k + u_k) / n`` with ``pi`` a random
      permutation of ``0..n-1`` and ``u_k ~ U(0, 1)`` (Latin hypercube sampling).

    ``stderr`` is the sample standard deviation over the ``n`` terms divided by ``sqrt(n)``,
    the independent-draws formula, which is conservative (too large) for this balanced design.

    Args:
      key: PRNG key of the row.
      f: model ``[P, M] -> [P, K]``.
      x: the explained row ``[M]``.
      background: ``[B, M]``.
      n_samples: ``n``, gradient evaluations per row (static, at least 2).
      local_smoothing: ``sigma``, the standard deviation of the input noise (0 for none).
      chunk: samples evaluated at once (static), for the memory budget.

    Returns:
      ``(phi [M, K], stderr [M, K])``.
    """
    n, n_bg = n_samples, background.shape[0]
    k_bg, k_alpha, k_u, k_noise = jax.random.split(key, 4)
    order = jax.random.permutation(k_bg, n_bg)
    refs = background[order[jnp.arange(n) % n_bg]]  # [n, M]
    strata = jax.random.permutation(k_alpha, n).astype(x.dtype)
    alphas = (strata + jax.random.uniform(k_u, (n,), dtype=x.dtype)) / n
    xs = jnp.broadcast_to(x, (n, x.shape[0]))
    if local_smoothing:
        xs = xs + local_smoothing * jax.random.normal(k_noise, xs.shape, dtype=x.dtype)
    delta = xs - refs
    points = refs + alphas[:, None] * delta
    grads = map_chunks(lambda p: input_gradients(f, p), points, chunk)  # [n, K, M]
    terms = delta[:, None, :] * grads  # [n, K, M]
    phi = terms.mean(axis=0)
    var = ((terms - phi) ** 2).sum(axis=0) / (n * (n - 1))
    positive = var > 0  # a zero spread (linear models) keeps a finite gradient
    stderr = jnp.where(positive, jnp.sqrt(jnp.where(positive, var, 1.0)), 0.0)
    return phi.T, stderr.T
