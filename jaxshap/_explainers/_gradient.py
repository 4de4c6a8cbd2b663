"""``GradientExplainer`` (expected gradients) and ``integrated_gradients`` for JAX models."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._estimators._gradients import QUADRATURE_RULES, expected_gradients_row, integrated_gradients_row, quadrature
from .._explanation import Explanation
from .._runtime._chunking import DEFAULT_MEMORY_BUDGET, map_chunks, plan_blocks, plan_chunks
from .._runtime._inputs import (
    as_key,
    as_matrix,
    check_finite,
    check_n_features,
    column_names,
    is_traced,
    resolve_feature_names,
)
from .._runtime._model import Model, wrap_model
from .._runtime._progress import ProgressBar, wants_progress
from ..maskers import Independent
from ._row_blocks import run_blocks


def _check_budget(memory_budget: Any) -> int:
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
        raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
    return int(memory_budget)


def differentiable_model(model: Callable, n_features: int, dtype: Any, probe: jax.Array, who: str) -> Model:
    """:func:`wrap_model`, refusing models that JAX cannot differentiate (host callables)."""
    wrapped = wrap_model(model, n_features, dtype, probe)
    if wrapped.is_host:
        raise TypeError(
            f"{who} needs the gradient of `model`, so `model` must be a JAX-traceable function "
            "(jax.numpy operations); a NumPy or scikit-learn callable has no gradient. Use "
            "jaxshap.KernelExplainer or jaxshap.PermutationExplainer for such models."
        )
    return wrapped


def reject_weights(masker: Any, who: str) -> None:
    """Raise for a weighted background (a k-means summary): its rows would be used unweighted."""
    if getattr(masker, "weights", None) is not None:
        raise ValueError(
            f"{who} draws background rows uniformly and does not support a weighted background "
            "(such as shap.kmeans centres with weights); pass background rows, for example a random "
            "sample of 100 to 1000 training rows."
        )


def _bytes_per_point(model: Model, n_features: int, dtype: Any) -> int:
    """Working memory of one gradient evaluation: a forward pass kept for ``K`` reverse passes."""
    itemsize = jnp.dtype(dtype).itemsize
    return model.bytes_per_row * (2 + model.n_outputs) + itemsize * n_features * (4 + model.n_outputs)


def _wrap(model: Model, phi, base, stderr, X, names, feature_names) -> Explanation:
    if model.single_output:
        phi, base = phi[..., 0], base[..., 0]
        stderr = None if stderr is None else stderr[..., 0]
    output_names = None if model.single_output else [f"Output {k}" for k in range(model.n_outputs)]
    return Explanation(phi, base, X, stderr, feature_names, output_names)


class GradientExplainer:
    r"""Expected gradients: Shapley-style attributions of a differentiable model from its gradients.

    .. math::

        \phi_j(x) = \mathbb{E}_{b \sim D,\ \alpha \sim U(0, 1)}
            \Bigl[(x_j - b_j)\, \frac{\partial f}{\partial x_j}\bigl(b + \alpha (x - b)\bigr)\Bigr],

    integrated gradients (Sundararajan et al., 2017) averaged over baselines ``b`` from the
    background ``D`` (Erion et al., 2021, "Improving performance of deep learning models with
    axiomatic attribution priors and expected gradients"; shap's ``GradientExplainer``). Each
    row costs ``n_samples`` gradient evaluations (one forward and ``K`` reverse passes each), far
    fewer than a model-agnostic estimator needs, because the gradient carries the information of
    all ``M`` features at once.

    Properties:

    * *completeness in expectation*: ``E[sum_j phi_j] = f(x) - E_b[f(b)]``, so
      ``values.sum(1) + base_values`` equals ``model(X)`` up to the Monte Carlo error
      (``stderr``), not exactly;
    * for a linear model, ``phi_j = w_j (x_j - E[b_j])``: the interventional Shapley values,
      computed exactly when ``n_samples`` is a multiple of the number of background rows (each
      background row is then used equally often) and ``local_smoothing`` is 0;
    * for non-linear models expected gradients are the Aumann-Shapley values of the path
      game averaged over baselines, not the interventional Shapley values; they agree to first
      order and differ where the model has interactions.

    Sampling is balanced (a repeated random permutation of the background rows; Latin hypercube
    positions along the path), see :func:`jaxshap._estimators._gradients.expected_gradients_row`.
    ``stderr`` is the independent-draws standard error of the mean, which is conservative for
    this design.

    Args:
      model: JAX-traceable callable ``[n, M] -> [n]`` or ``[n, K]`` (it is differentiated).
      background: background rows ``[B, M]`` (array or DataFrame; every row is kept, as the cost
        does not grow with them) or an unweighted :class:`jaxshap.maskers.Independent` masker
        (its rows are used).
      n_samples: gradient evaluations per explained row (shap's ``nsamples``, default 200); an
        integer of at least 2.
      local_smoothing: standard deviation of Gaussian noise added to the explained row in each
        sample (shap's ``local_smoothing``; SmoothGrad), default 0.
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes one chunk of gradient evaluations may use (default 512 MiB; on a CPU
        chunks are capped at a cache-sized 8 MiB). Results do not depend on it.

    Example::

        ex = jaxshap.GradientExplainer(model, background, n_samples=200)
        expl = ex(X, key=jax.random.key(0))      # expl.values [n, M], expl.stderr [n, M]

    The explainer is traceable: ``jax.grad`` of a function of ``ex(X).values`` with respect to
    the model's parameters works (second derivatives of the model).

    Raises:
      TypeError: when ``model`` is not JAX-traceable.
      ValueError: for an empty background or one holding NaN/inf, ``n_samples`` below 2, or a
        negative ``local_smoothing``.
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        n_samples: int = 200,
        *,
        local_smoothing: float = 0.0,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
            raise ValueError(f"`n_samples` must be an integer of at least 2 (gradient evaluations per row); got {n_samples!r}.")
        if isinstance(local_smoothing, bool) or not isinstance(local_smoothing, (int, float)) or not local_smoothing >= 0:
            raise ValueError(f"`local_smoothing` must be a non-negative number (a noise standard deviation); got {local_smoothing!r}.")
        if background is None:
            raise ValueError("`background` is required: pass background rows [B, M] (for example 100 training rows).")
        # every background row is kept (the cost is n_samples per row, whatever their number)
        masker = background if isinstance(background, Independent) else Independent(background, max_samples=None)
        reject_weights(masker, "GradientExplainer")
        self.background = masker.data
        self.n_features = masker.n_features
        self.n_samples = int(n_samples)
        self.local_smoothing = float(local_smoothing)
        self.memory_budget = _check_budget(memory_budget)
        self.model = differentiable_model(model, self.n_features, self.background.dtype, self.background, "GradientExplainer")
        self._names = feature_names
        self._bg_names = masker.feature_names
        self._program = jax.jit(self._explain, static_argnums=(4, 5))

    def _plan(self, n_rows: int) -> tuple[int, int]:
        per_point = _bytes_per_point(self.model, self.n_features, self.background.dtype)
        return plan_chunks(n_rows, self.n_samples, 1, per_point, self.memory_budget)

    def _explain(self, background, X, key, first, rows_per_chunk, samples_per_chunk):
        f = self.model.fn
        index = first + jnp.arange(X.shape[0])
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(index)

        def one(k, x):
            return expected_gradients_row(k, f, x, background, self.n_samples, self.local_smoothing, samples_per_chunk)

        phi, stderr = map_chunks(lambda a: jax.vmap(one)(*a), (keys, X), rows_per_chunk)
        base = jnp.broadcast_to(f(background).mean(axis=0), (X.shape[0], self.model.n_outputs))
        return phi, base, stderr

    @property
    def expected_value(self) -> jax.Array:
        """The mean model output over the background, ``[K]`` (a scalar for one output)."""
        base = self.model.fn(self.background).mean(axis=0)
        return base[0] if self.model.single_output else base

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted).
          key: PRNG key; ``None`` means ``jax.random.key(0)``. Row ``i`` uses ``fold_in(key, i)``,
            so results do not depend on chunks or blocks.
          progress: progress bar on stderr (``None``: only when stderr is a terminal).

        Returns:
          An :class:`Explanation`: ``values`` ``[n, M]`` (or ``[n, M, K]``), ``base_values`` the
          mean model output over the background, ``stderr`` the Monte Carlo standard errors.
        """
        names = column_names(X)
        X = as_matrix(X, "X", dtype=self.background.dtype)
        check_n_features(X, self.n_features, "X", "the background")
        check_finite(X, "X")
        key = as_key(key)
        rows, samples = self._plan(X.shape[0])
        show = wants_progress(progress) and not is_traced(X)
        bar = ProgressBar(X.shape[0]) if show else None
        call = lambda rows_x, first: self._program(self.background, rows_x, key, first, rows, samples)
        try:
            if bar is None:
                phi, base, stderr = call(X, 0)
            else:
                per_row = self.n_samples * (1 + self.model.n_outputs)
                phi, base, stderr = run_blocks(call, X, plan_blocks(X.shape[0], rows, per_row), bar)
        finally:
            if bar is not None:
                bar.close()
        feature_names = resolve_feature_names(self._names, self.n_features, self._bg_names, names)
        return _wrap(self.model, phi, base, stderr, X, names, feature_names)

    def shap_values(self, X: Any, key: Any = None) -> np.ndarray:
        """The values as NumPy, in shap's shapes: ``[n, M]`` or ``[n, M, K]``."""
        return np.asarray(self(X, key, progress=False).values)


@functools.lru_cache(maxsize=32)
def _cached_model(model: Callable, n_features: int, dtype: str) -> Model:
    zeros = jnp.zeros((2, n_features), dtype)
    return differentiable_model(model, n_features, dtype, zeros, "integrated_gradients")


@functools.lru_cache(maxsize=32)
def _cached_program(wrapped: Model, n_steps: int, rule: str, rows_per_chunk: int, steps_per_chunk: int):
    alphas, weights = quadrature(rule, n_steps)

    def program(X, baselines):
        one = lambda x, b: integrated_gradients_row(wrapped.fn, x, b, alphas, weights, steps_per_chunk)
        return map_chunks(lambda a: jax.vmap(one)(*a), (X, baselines), rows_per_chunk)

    return jax.jit(program)


def integrated_gradients(
    model: Callable,
    X: Any,
    baseline: Any = None,
    *,
    n_steps: int = 32,
    rule: str = "gauss_legendre",
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Explanation:
    r"""Integrated gradients of a JAX model along the straight path from a baseline, by quadrature.

    .. math::

        \phi_j(x) = (x_j - b_j) \int_0^1 \frac{\partial f}{\partial x_j}\bigl(b + \alpha(x - b)\bigr)\, d\alpha
        \approx (x_j - b_j) \sum_{s=1}^{S} w_s\, \frac{\partial f}{\partial x_j}\bigl(b + \alpha_s (x - b)\bigr)

    (Sundararajan, Taly & Yan, 2017). Completeness, ``sum_j phi_j = f(x) - f(b)``, holds for the
    integral; the quadrature leaves an error that ``values.sum(1) + base_values - model(X)``
    shows. The default Gauss-Legendre rule is exact when the model restricted to the path is a
    polynomial of degree below ``2 n_steps`` and converges geometrically for smooth (analytic)
    models such as tanh or GELU networks once its nodes resolve the model's curvature along the
    path (before that, for steep models and few nodes, it is no better than the midpoint rule),
    where the Riemann sums that most libraries use converge like ``1 / n_steps`` (left, right)
    or ``1 / n_steps**2`` (midpoint, trapezoid); ``bench/scenarios/gradient.py`` measures it. For ReLU networks (piecewise linear along the
    path) no rule converges faster than about ``1 / n_steps**2``.

    Args:
      model: JAX-traceable callable ``[n, M] -> [n]`` or ``[n, K]``.
      X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted).
      baseline: the reference, one row ``[M]`` for every row or ``[n, M]`` (one per row);
        ``None`` means zeros.
      n_steps: quadrature nodes (gradient evaluations) per row, default 32.
      rule: ``"gauss_legendre"`` (default), ``"riemann_left"``, ``"riemann_right"``,
        ``"riemann_middle"`` or ``"riemann_trapezoid"`` (see
        :func:`jaxshap._estimators._gradients.quadrature`).
      feature_names: optional names of the features.
      memory_budget: bytes one chunk of gradient evaluations may use.

    Returns:
      An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``), ``base_values``
      ``f(baseline)`` and ``stderr`` ``None``.

    Raises:
      TypeError: when ``model`` is not JAX-traceable.
      ValueError: for a baseline of the wrong shape, NaN or inf in ``X`` or the baseline, an
        unknown rule or too few steps.
    """
    names = column_names(X)
    X = as_matrix(X, "X")
    check_finite(X, "X")
    n, m = X.shape
    quadrature(rule, n_steps)  # validates rule and n_steps
    rule = "gauss_legendre" if rule == "gausslegendre" else rule
    budget = _check_budget(memory_budget)
    if baseline is None:
        baselines = jnp.zeros_like(X)
    else:
        base_rows = as_matrix(baseline, "baseline", dtype=X.dtype)
        check_n_features(base_rows, m, "baseline", "X")
        if base_rows.shape[0] not in (1, n):
            raise ValueError(
                f"`baseline` must be one row [M] or one row per explained row [{n}, {m}]; got {base_rows.shape[0]} rows."
            )
        check_finite(base_rows, "baseline")
        baselines = jnp.broadcast_to(base_rows, X.shape)
    dtype = str(jnp.dtype(X.dtype))
    try:
        wrapped = _cached_model(model, m, dtype)
    except TypeError as err:
        if "unhashable" not in str(err):
            raise
        wrapped = _cached_model.__wrapped__(model, m, dtype)
    rows, steps = plan_chunks(n, int(n_steps), 1, _bytes_per_point(wrapped, m, X.dtype), budget)
    program = _cached_program(wrapped, int(n_steps), rule, rows, steps)
    phi, base = program(X, baselines)
    feature_names = resolve_feature_names(feature_names, m, names)
    return _wrap(wrapped, phi, base, None, X, names, feature_names)


__all__ = ["GradientExplainer", "integrated_gradients", "QUADRATURE_RULES"]
