"""``GradientExplainer`` (expected gradients) and ``integrated_gradients`` for JAX models."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._estimators._gradients import QUADRATURE_RULES, expected_gradients_row, integrated_gradients_row, quadrature
from .._result._explanation import Explanation
from .._core._chunking import ProgressBar, chunk_capacity, map_chunks, plan_chunks, wants_progress
from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._engine._explainer import drop_output_axis
from .._core._inputs import (
    as_key,
    as_matrix,
    check_finite,
    check_n_features,
    column_names,
    is_traced,
    resolve_feature_names,
)
from .._core._model import Model, model_errors, wrap_model
from .._engine._rows import RowExplainer
from .._core._validate import integer, number
from .._core._validate import memory_budget as check_memory_budget
from ..maskers import Independent
from ..maskers._base import SHAPLEY


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


def check_plain_background(masker: Any, who: str) -> None:
    """Raise for a background these explainers would misread: a weighted one (a k-means summary,
    whose rows they would use unweighted) or a masker whose attribution is not the Shapley value
    (a ``Partition`` masker's Owen values, whose hierarchy they would ignore)."""
    if masker.attribution != SHAPLEY:
        raise ValueError(
            f"{who} computes Shapley values and cannot honour a {type(masker).__name__} masker's "
            f"{masker.attribution} values; pass its background rows (`masker.data`) for Shapley values, "
            "or use ExactExplainer / PermutationExplainer with the masker."
        )
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


def _wrap(model: Model, phi, base, stderr, X, feature_names) -> Explanation:
    if model.single_output:  # through NumPy on a CPU: a new number of rows compiles nothing
        phi, base, stderr = drop_output_axis((phi, base, stderr))
    output_names = None if model.single_output else [f"Output {k}" for k in range(model.n_outputs)]
    return Explanation(phi, base, X, stderr, feature_names, output_names)


def _plan_points(n_rows: int, exact: bool, points_per_row: int, model: Model, n_features: int, dtype: Any, budget: int):
    """``(rows_per_chunk, points_per_chunk)`` for rows of ``points_per_row`` gradient evaluations:
    balanced over ``n_rows`` rows when ``exact``, else the largest chunk that fits the budget."""
    args = (points_per_row, 1, _bytes_per_point(model, n_features, dtype), budget)
    return plan_chunks(n_rows, *args) if exact else chunk_capacity(*args)


class GradientExplainer(RowExplainer):
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
    the model's parameters works (second derivatives of the model). It is a pytree (the
    background and the arrays of a model given as ``partial(mlp, params)`` are leaves), so
    ``jax.jit`` and ``jax.grad`` take it as an argument, and it runs on the shared runtime
    (:class:`jaxshap._engine._rows.RowExplainer`): ``progress=``, ``devices=``,
    :meth:`explain_batches`, and one compiled program per configuration.

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
        n_samples = integer(n_samples, "n_samples", least=2, rule="an integer of at least 2 (gradient evaluations per row)")
        local_smoothing = number(local_smoothing, "local_smoothing", least=0,
                                 rule="a non-negative number (a noise standard deviation)")
        if background is None:
            raise ValueError("`background` is required: pass background rows [B, M] (for example 100 training rows).")
        # every background row is kept (the cost is n_samples per row, whatever their number)
        masker = background if isinstance(background, Independent) else Independent(background, max_samples=None)
        check_plain_background(masker, "GradientExplainer")
        self.background = masker.data
        self.n_features = masker.n_features
        self.n_samples = int(n_samples)
        self.local_smoothing = float(local_smoothing)
        self.memory_budget = check_memory_budget(memory_budget)
        self.model = differentiable_model(model, self.n_features, self.background.dtype, self.background, "GradientExplainer")
        self._names = None if feature_names is None else tuple(str(n) for n in feature_names)
        self._bg_names = None if masker.feature_names is None else tuple(masker.feature_names)

    @property
    def expected_value(self) -> jax.Array:
        """The mean model output over the background, ``[K]`` (a scalar for one output)."""
        base = self.model.fn(self.background).mean(axis=0)
        return base[0] if self.model.single_output else base

    # --- the shared runtime's contract (see jaxshap._engine._rows) ---------------------------
    def _validate(self, X: Any) -> jax.Array:
        X = as_matrix(X, "X", dtype=self.background.dtype)
        check_n_features(X, self.n_features, "X", "the background")
        check_finite(X, "X")
        return X

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, int]:
        """``(rows_per_chunk, samples_per_chunk)``: whole rows of ``n_samples`` gradient
        evaluations per chunk, or one row in chunks of samples when a row does not fit."""
        return _plan_points(
            n_rows, exact, self.n_samples, self.model, self.n_features, self.background.dtype, self.memory_budget
        )

    def _bytes_per_row(self) -> int:
        return self.n_samples * _bytes_per_point(self.model, self.n_features, self.background.dtype)

    def _evals_per_row(self) -> int:
        return self.n_samples * (1 + self.model.n_outputs)  # a forward and K reverse passes each

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        return self._explain_local(X, keys, X.shape[0], self._plan(1)[1])

    def _explain_local(self, X, keys, rows_per_chunk, samples_per_chunk, n_valid=None):
        """Rows ``X [b, M]`` with keys ``keys [b]``, chunk by chunk; the base value is computed once."""
        f, background = self.model.fn, self.background

        def one(k, x):
            return expected_gradients_row(k, f, x, background, self.n_samples, self.local_smoothing, samples_per_chunk)

        phi, stderr = map_chunks(lambda a: jax.vmap(one)(*a), (keys, X), rows_per_chunk, n_valid)
        base = jnp.broadcast_to(f(background).mean(axis=0), (X.shape[0], self.model.n_outputs))
        return phi, base, stderr

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        feature_names = resolve_feature_names(self._names, self.n_features, self._bg_names, names)
        return _wrap(self.model, phi, base, stderr, X, feature_names)

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None, devices: Any = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted; a JAX array
            sharded over devices along its rows is explained where it lies).
          key: PRNG key; ``None`` means ``jax.random.key(0)``. Row ``i`` uses ``fold_in(key, i)``,
            so results do not depend on chunks, blocks, batches or devices.
          progress: progress bar on stderr (``None``: only when stderr is a terminal).
          devices: ``None`` (run where ``X`` lies), ``"local"`` or a sequence of devices to shard
            the rows over.

        Returns:
          An :class:`Explanation`: ``values`` ``[n, M]`` (or ``[n, M, K]``), ``base_values`` the
          mean model output over the background, ``stderr`` the Monte Carlo standard errors.

        Rows are explained by the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`):
        chunks under ``memory_budget``, row counts padded to a few capacities (a new ``n``
        rarely compiles), one compiled program for every explainer of the same configuration,
        and :meth:`explain_batches` for streams.
        """
        return super().__call__(X, key, progress=progress, devices=devices)

    def shap_values(self, X: Any, key: Any = None) -> np.ndarray:
        """The values as NumPy, in shap's shapes: ``[n, M]`` or ``[n, M, K]``."""
        return np.asarray(self(X, key, progress=False).values)


@functools.lru_cache(maxsize=32)
def _cached_model(model: Callable, n_features: int, dtype: str) -> Model:
    zeros = jnp.zeros((2, n_features), dtype)
    return differentiable_model(model, n_features, dtype, zeros, "integrated_gradients")


class _IntegratedGradients(RowExplainer):
    """Integrated gradients on the shared runtime: a row is ``[x, b]`` (``[2M]``), the explained
    row followed by its baseline, so per-row baselines travel with the rows through chunks,
    padding, blocks and devices. One compiled program serves every call with the same model,
    rule and number of steps (and rows within a capacity)."""

    def __init__(self, model: Model, n_features: int, n_steps: int, rule: str, memory_budget: int):
        self.model, self.n_features = model, n_features
        self.n_steps, self.rule, self.memory_budget = n_steps, rule, memory_budget

    def _validate(self, X: Any) -> jax.Array:  # rows are built and checked by integrated_gradients
        return X

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, int]:
        return _plan_points(n_rows, exact, self.n_steps, self.model, self.n_features, self.model.dtype, self.memory_budget)

    def _bytes_per_row(self) -> int:
        return self.n_steps * _bytes_per_point(self.model, self.n_features, self.model.dtype)

    def _evals_per_row(self) -> int:
        return self.n_steps * (1 + self.model.n_outputs)

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        return self._explain_local(X, keys, X.shape[0], self._plan(1)[1])

    def _explain_local(self, X, keys, rows_per_chunk, steps_per_chunk, n_valid=None):
        del keys  # deterministic
        alphas, weights = quadrature(self.rule, self.n_steps)
        m, f = self.n_features, self.model.fn
        one = lambda xb: integrated_gradients_row(f, xb[:m], xb[m:], alphas, weights, steps_per_chunk)
        phi, base = map_chunks(jax.vmap(one), X, rows_per_chunk, n_valid)
        return phi, base, None

    def _wrap(self, phi, base, stderr, X, names):  # integrated_gradients wraps the results itself
        return phi, base


def integrated_gradients(
    model: Callable,
    X: Any,
    baseline: Any = None,
    *,
    n_steps: int = 32,
    rule: str = "gauss_legendre",
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    progress: bool | None = None,
    devices: Any = None,
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
      progress: progress bar on stderr (``None``: only when stderr is a terminal).
      devices: ``None`` (run where ``X`` lies), ``"local"`` or a sequence of devices to shard
        the rows over (as for every explainer).

    The rows run on the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`): chunks
    under ``memory_budget``, row counts padded to a few capacities, and one compiled program for
    every call with the same model, rule and ``n_steps``, so a new number of rows or a second
    call rarely compiles.

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
    budget = check_memory_budget(memory_budget)
    if baseline is None:
        base_rows = jnp.zeros((1, m), X.dtype)
    else:
        base_rows = as_matrix(baseline, "baseline", dtype=X.dtype)
        check_n_features(base_rows, m, "baseline", "X")
        if base_rows.shape[0] not in (1, n):
            raise ValueError(
                f"`baseline` must be one row [M] or one row per explained row [{n}, {m}]; got {base_rows.shape[0]} rows."
            )
        check_finite(base_rows, "baseline")
    if is_traced(X) or is_traced(base_rows) or len(X.devices()) > 1:  # (sharded rows stay sharded)
        rows = jnp.concatenate([X, jnp.broadcast_to(base_rows, X.shape)], axis=1)
    else:  # through NumPy: a new number of rows compiles nothing
        rows = np.concatenate([np.asarray(X), np.broadcast_to(np.asarray(base_rows), X.shape)], axis=1)
        rows = jax.device_put(rows, next(iter(X.devices())))
    dtype = str(jnp.dtype(X.dtype))
    try:
        wrapped = _cached_model(model, m, dtype)
    except TypeError as err:
        if "unhashable" not in str(err):
            raise
        wrapped = _cached_model.__wrapped__(model, m, dtype)
    feature_names = resolve_feature_names(feature_names, m, names)
    explainer = _IntegratedGradients(wrapped, m, int(n_steps), rule, budget)
    if n == 0:
        phi, base = explainer._empty(rows, None)
        return _wrap(wrapped, phi, base, None, X, feature_names)
    show = wants_progress(progress) and not is_traced(rows)
    bar = ProgressBar(n) if show else None
    with model_errors():
        try:
            phi, base, _ = explainer._run(rows, as_key(None), 0, devices, bar, blocked=show)
        finally:
            if bar is not None:
                bar.close()
    return _wrap(wrapped, phi, base, None, X, feature_names)


__all__ = ["GradientExplainer", "integrated_gradients", "QUADRATURE_RULES"]
