"""``LinearExplainer``: Shapley values of linear models, interventional or correlation-dependent."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._result._explanation import Explanation
from .._result._arrays import to_host
from .._core._validate import user_stacklevel
from .._estimators._covariance import check_numeric, host64, sample_moments, standard_gaussian, warn_regularised
from .._estimators._gaussian import exact_transform, precision_matrix, sampled_transform, to_data_units
from .._core._validate import DEFAULT_MEMORY_BUDGET, choice
from .._core._validate import memory_budget as check_memory_budget
from .._engine._explainer import drop_output_axis
from .._core._inputs import (
    align_columns,
    as_key,
    as_matrix,
    check_finite,
    check_n_features,
    check_walks,
    column_names,
    is_traced,
    default_output_names,
    put,
    resolve_feature_names,
)
from .._core._model import declared_output_names
from .._engine._shap_api import ShapAPI, linear_background
from .._engine._rows import RowExplainer
from ..maskers._kmeans import is_summary, summary_moments
from .._core._platform import one_blas_thread

MAX_AUTO_EXACT_FEATURES = 16
"""``method="auto"`` enumerates all coalitions up to this many features."""

MAX_EXACT_FEATURES = 22
"""``method="exact"`` refuses more features than this (``2**M`` factorisations)."""

PERTURBATIONS = ("interventional", "correlation_dependent")

FLOAT32_ONLY_SINGULAR = (
    "`{name}` is numerically singular in float32 (the correlation matrix's smallest eigenvalue "
    "is below 4.8e-7 times its largest) but not in float64: the transform was computed in "
    "float64, without regularisation, and rounded to float32; applying it in float32 can "
    "still lose digits (about 1% at condition number 1e8). Enable x64 "
    "(jax.config.update('jax_enable_x64', True)) for full precision."
)
"""The warning when a correlation matrix singular in float32 only gets a float64 transform."""

CPU_CHUNK_ROWS = 1024
"""Rows per chunk on a CPU: the products run at full speed there, and smaller calls waste little."""

_exact_transform = jax.jit(exact_transform)
_sampled_transform = jax.jit(sampled_transform, static_argnums=(3, 4))
_precision64 = jax.jit(precision_matrix)


def parse_linear_model(model: Any) -> tuple[Any, Any, bool]:
    """``(coef [K, M], intercept [K], single_output)`` from ``(coef, intercept)`` or a fitted model;
    NumPy arrays for concrete parameters, JAX arrays for traced ones.

    A fitted model is anything with ``coef_`` and ``intercept_`` (scikit-learn's linear models);
    a ``[1, M]`` coefficient matrix (binary logistic regression) counts as a single output.
    """
    if isinstance(model, tuple) and len(model) == 2:
        coef, intercept = model
    elif hasattr(model, "coef_") and hasattr(model, "intercept_"):
        coef, intercept = model.coef_, model.intercept_
    else:
        raise TypeError(
            "`model` must be a (coef, intercept) pair or a fitted linear model with `coef_` and "
            f"`intercept_` (such as sklearn.linear_model.LinearRegression); got {type(model).__name__}."
        )
    if not is_traced(coef):
        check_numeric(coef, "coef")
        coef = np.asarray(coef)
    if intercept is not None and not is_traced(intercept):
        check_numeric(intercept, "intercept")
    # concrete parameters stay NumPy: on the host, shaping them compiles nothing
    xp = jnp if is_traced(coef) or is_traced(intercept) else np
    if np.ndim(coef) == 2 and np.shape(coef)[0] == 1:
        coef = coef[0]
        intercept = xp.reshape(xp.asarray(intercept), (-1,))[0] if np.size(intercept) == 1 else intercept
    if np.ndim(coef) not in (1, 2) or np.shape(coef)[-1] == 0:
        raise ValueError(f"`coef` must have shape [M] or [K, M]; got shape {tuple(np.shape(coef))}.")
    single = np.ndim(coef) == 1
    coef = xp.atleast_2d(xp.asarray(coef))
    k = coef.shape[0]
    intercept = xp.asarray(0.0 if intercept is None else intercept)
    if intercept.ndim == 0:
        intercept = xp.broadcast_to(intercept, (k,))
    if intercept.shape != (k,):
        raise ValueError(
            f"`intercept` must be a scalar or have one entry per output ({k}); got shape {tuple(intercept.shape)}."
        )
    if not is_traced(coef) and not np.isfinite(np.asarray(coef)).all():
        raise ValueError("`coef` contains NaN or inf; pass finite coefficients.")
    if not is_traced(intercept) and not np.isfinite(np.asarray(intercept)).all():
        raise ValueError("`intercept` contains NaN or inf; pass a finite intercept.")
    return coef, intercept, single


class LinearExplainer(ShapAPI, RowExplainer):
    r"""Exact Shapley values of a linear model :math:`f(x) = \beta x + b`.

    * ``"interventional"`` (default, as in shap): features are perturbed independently of each
      other, :math:`\phi_j = \beta_j (x_j - \mu_j)`.
    * ``"correlation_dependent"``: the observational value
      :math:`v_x(S) = E[f(X) \mid X_S = x_S]` under :math:`X \sim \mathcal N(\mu, \Sigma)` fitted
      to ``data``; correlated features share credit (Aas, Jullum & Loland, 2021). The Shapley
      values are a fixed linear map :math:`\phi = T(x - \mu)`; ``T`` is computed once, here, by
      enumerating every coalition (``method="exact"``, the default up to 16 features) or by
      averaging ``n_permutations`` antithetic permutations (``"sampled"``; each permutation costs
      one Cholesky factorisation and one triangular inverse, :math:`O(M^3)`, and they are
      ``vmap``-ped). Explaining ``n`` rows is then one ``[n, M] x [M, M]`` product.

    The base value is :math:`E[f(X)] = \beta\mu + b` and efficiency holds exactly for every row,
    also for a sampled ``T`` (each permutation's contribution telescopes).

    Args:
      model: ``(coef, intercept)`` with ``coef`` of shape ``[M]`` or ``[K, M]`` (``K`` outputs), or
        a fitted linear model with ``coef_`` and ``intercept_`` (scikit-learn).
      data: samples ``[N, M]`` (array or DataFrame; the mean, and the covariance when needed, are
        estimated from them: interventional, from shap's sample of 100 rows of a larger
        background, as shap's ``LinearExplainer``), a ``(mean, cov)`` pair (``cov`` may be
        ``None`` for ``"interventional"``), a ``maskers.Independent`` masker (its rows;
        interventional), or a weighted summary (``jaxshap.kmeans(X, k)``: the weighted mean and
        covariance of its centres).
      feature_perturbation: ``"interventional"`` or ``"correlation_dependent"`` (``None``: the default).
      method: ``"auto"``, ``"exact"`` or ``"sampled"``, how to compute ``T`` (correlation-dependent only).
      n_permutations: walks averaged by the sampled method, an even number (a permutation and
        its reverse are two walks).
      key: PRNG key of the sampled method; ``None`` means ``jax.random.key(0)``.
      rcond: ``None`` (default): the correlation matrix is used exactly unless it is numerically
        singular (smallest eigenvalue below ``4 eps`` times the largest in float32, ``16 eps``
        in float64); then it is shrunk toward independence (smallest eigenvalue lifted to
        ``1e-5`` / ``1e-8`` times the largest) with a warning. In float32, a matrix singular in
        float32 but not in float64 gets a transform computed in float64 instead (with a
        warning). A number sets the cut-off and the floor to that value (see
        :mod:`jaxshap._estimators._gaussian`).
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes of working memory one chunk of rows may use (as for every explainer;
        rows are explained in chunks, with ``progress=``, ``devices=`` and
        :meth:`explain_batches` from the shared runtime, :class:`jaxshap._engine._rows.RowExplainer`).

    Attributes:
      expected_value: ``E[f(X)]``, ``[K]`` (a scalar for one output).
      transform: ``T`` of shape ``[K, M, M]`` (``phi[k] = T[k] (x - mu)``); ``None`` when interventional.

    Raises:
      ValueError: for shapes that do not match, a covariance that is not symmetric PSD, or an
        invalid option.

    Example::

        ex = jaxshap.LinearExplainer((coef, b), X_train, feature_perturbation="correlation_dependent")
        expl = ex(X)   # expl.values: [n, M]; expl.stderr is None
    """

    def __init__(
        self,
        model: Any,
        data: Any,
        feature_perturbation: str = "interventional",
        *,
        method: str = "auto",
        n_permutations: int = 1000,
        key: Any = None,
        rcond: float | None = None,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        self.memory_budget = check_memory_budget(memory_budget)
        choice(feature_perturbation, "feature_perturbation", PERTURBATIONS)
        choice(method, "method", ("auto", "exact", "sampled"))
        n_permutations = check_walks(n_permutations, 2)
        self.feature_perturbation = feature_perturbation
        coef, intercept, self._single = parse_linear_model(model)
        self._output_names = declared_output_names(model, coef.shape[0])  # a classifier's classes_
        correlated = feature_perturbation == "correlation_dependent"
        if is_summary(data):  # jaxshap.kmeans / shap.kmeans: the moments of the weighted rows
            data = summary_moments(data, correlated)
        data = linear_background(data, feature_perturbation)  # the rows shap's LinearExplainer uses
        mean, cov, names, dtype, from_data = self._moments(data, coef.shape[1], need_cov=correlated)
        self.n_features = coef.shape[1]
        self._names = None if feature_names is None else tuple(str(n) for n in feature_names)
        self._data_names = None if names is None else tuple(names)
        self.mean, self._mean_lo = _split_mean(mean, dtype)
        if is_traced(coef) or is_traced(intercept) or is_traced(mean):
            coef, intercept = jnp.asarray(coef, dtype), jnp.asarray(intercept, dtype)
            self._expected = coef @ self.mean + intercept + coef @ self._mean_lo
        else:  # beta mu + b in float64 on the host, rounded once
            self._expected = put(np.asarray(coef, np.float64) @ np.asarray(mean, np.float64)
                                 + np.asarray(intercept, np.float64), dtype)
            coef, intercept = put(coef, dtype), put(intercept, dtype)
        self.coef, self.intercept = coef, intercept
        self.transform = None
        self.method = None
        if correlated:
            name = "data" if from_data else "cov"
            g, wide = self._gaussian(mean, cov, rcond, name, dtype, from_data)
            self.gaussian = g
            self.method = method = self._resolve_method(method)
            if method == "sampled":
                self.n_permutations = n_permutations
            if wide is None:
                beta = coef * g.safe_scale[None, :]
                self.transform = to_data_units(self._transform(g, beta, method, key, n_permutations), g.safe_scale)
            else:
                with jax.enable_x64(True):
                    beta64 = jnp.asarray(np.asarray(coef, np.float64)) * wide.safe_scale[None, :]
                    t64 = self._transform(wide, beta64, method, key, n_permutations)
                    t64 = np.asarray(to_data_units(t64, wide.safe_scale))
                self.transform = jnp.asarray(t64, dtype)

    @staticmethod
    def _gaussian(mean, cov, rcond, name, dtype, from_data):
        """``(gaussian, wide)``: the standardised Gaussian, and its float64 twin when it is needed.

        A correlation matrix singular in float32 (by the default cut-off) but not in float64 is
        used unregularised: ``wide`` is then the float64 Gaussian the transform is computed
        from, and the float32 one carries its correlations rounded. Otherwise ``wide`` is
        ``None``. Warns, once, about whichever happened (the user's line is blamed).
        """
        g, status = standard_gaussian(mean, cov, rcond=rcond, name=name, dtype=dtype, exact_moments=from_data)
        if status.rank_deficient and rcond is None and jnp.dtype(dtype).itemsize < 8 and not is_traced(g.corr):
            with jax.enable_x64(True):
                g64, status64 = standard_gaussian(mean, cov, rcond=None, name=name, dtype=jnp.float64, exact_moments=from_data)
            if not status64.rank_deficient:
                warnings.warn(FLOAT32_ONLY_SINGULAR.format(name=name), UserWarning, stacklevel=user_stacklevel())
                return g._replace(corr=jnp.asarray(np.asarray(g64.corr), dtype), shrinkage=jnp.zeros((), dtype)), g64
        warn_regularised(status, name, stacklevel=user_stacklevel())
        return g, None

    def _resolve_method(self, method: str) -> str:
        """``"auto"`` resolved by the number of features; ``"exact"`` refused beyond its limit."""
        m = self.n_features
        if method == "auto":
            method = "exact" if m <= MAX_AUTO_EXACT_FEATURES else "sampled"
        if method == "exact" and m > MAX_EXACT_FEATURES:
            raise ValueError(
                f"method='exact' enumerates 2**M coalitions and supports at most {MAX_EXACT_FEATURES} "
                f"features; the data has {m}. Use method='sampled'."
            )
        return method

    @staticmethod
    def _transform(g, beta, method, key, n_permutations):
        """The standardised transform; concrete work runs with OpenBLAS on one thread.

        XLA's Cholesky factorisations on a CPU run on SciPy's OpenBLAS, whose spinning worker
        threads slow the host's other work (see :mod:`jaxshap._core._platform`).
        """
        if is_traced(g.corr) or is_traced(beta):
            if method == "exact":
                return _exact_transform(g.corr, beta)
            return _sampled_transform(as_key(key), g.corr, beta, n_permutations)
        with one_blas_thread():
            if method == "exact":
                t = _exact_transform(g.corr, beta)
            else:
                # The precision in float64 on the host: near the singularity cut-off an inverse
                # in float32 loses most of its digits.
                precision = jnp.asarray(host64(_precision64, g.corr), g.corr.dtype)
                t = _sampled_transform(as_key(key), g.corr, beta, n_permutations, None, precision)
            return jax.block_until_ready(t)

    @staticmethod
    def _moments(data: Any, n_features: int, need_cov: bool):
        """``(mean, cov, names, dtype, from_data)``; moments of data are float64 (NumPy) when concrete."""
        if isinstance(data, tuple) and len(data) == 2:
            mean, cov = data
            if not is_traced(mean):
                check_numeric(mean, "mean")
                mean = np.asarray(mean)
            if np.ndim(mean) != 1 or np.shape(mean)[0] != n_features:
                raise ValueError(
                    f"`mean` (data[0]) must have shape [{n_features}] to match `coef`; got shape {tuple(np.shape(mean))}."
                )
            if not is_traced(mean) and not np.isfinite(np.asarray(mean, np.float64)).all():
                raise ValueError("`mean` (data[0]) contains NaN or inf; pass a finite mean vector.")
            dtype = jnp.asarray(mean).dtype if jnp.issubdtype(jnp.asarray(mean).dtype, jnp.floating) else jnp.float32
            if need_cov:
                if cov is None:
                    raise ValueError("feature_perturbation='correlation_dependent' needs a covariance: pass (mean, cov).")
                if not is_traced(cov):
                    check_numeric(cov, "cov")
                    cov = np.asarray(cov)
                if jnp.issubdtype(jnp.asarray(cov).dtype, jnp.floating):
                    dtype = jnp.result_type(dtype, jnp.asarray(cov).dtype)
            elif cov is not None and not is_traced(cov):
                check_numeric(cov, "cov")
            return mean, cov, None, jax.dtypes.canonicalize_dtype(jnp.result_type(dtype, jnp.float32)), False
        if data is None:
            raise ValueError("`data` is required: pass background samples [N, M] or a (mean, cov) pair.")
        names = column_names(data)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        if x.shape[1] != n_features:
            raise ValueError(
                f"`data` has {x.shape[1]} features but `coef` has {n_features}; pass samples with the same columns."
            )
        if x.shape[0] < (2 if need_cov else 1):
            raise ValueError(
                f"`data` has {x.shape[0]} rows; estimating a covariance needs at least 2 (100 or more is usual)."
            )
        dtype = jax.dtypes.canonicalize_dtype(jnp.result_type(x.dtype, jnp.float32))
        if not need_cov:
            mean = _mean(x) if is_traced(x) else _mean(np.asarray(x, np.float64))
            return mean, None, names, dtype, not is_traced(x)
        mean, cov = sample_moments(x)
        return mean, cov, names, dtype, not is_traced(x)

    @property
    def expected_value(self) -> Any:
        """The base value ``f(E[x])``: NumPy outside traced code, a scalar for one output."""
        return to_host(self._expected[0] if self._single else self._expected)

    # --- the shared runtime's contract (see jaxshap._engine._rows) ---------------------------
    def _align(self, X: Any) -> Any:
        return align_columns(X, self._data_names, "X")

    def _validate(self, X: Any) -> jax.Array:
        X = align_columns(X, self._data_names, "X")
        X = as_matrix(X, "X", dtype=self.mean.dtype)
        check_n_features(X, self.n_features, "X", "the model's coefficients")
        check_finite(X, "X")
        return X

    def _bytes_per_row(self) -> int:
        k = self.coef.shape[0]
        return np.dtype(self.mean.dtype).itemsize * (2 * self.n_features + 3 * self.n_features * k + k)

    def _plan(self, n_rows: int, exact: bool = True):
        rows, _ = super()._plan(n_rows, exact)
        if jax.default_backend() == "cpu":  # a matrix product runs at full speed from ~1000 rows
            rows = min(rows, CPU_CHUNK_ROWS)
        return rows, None

    def _explain_rows(self, X, keys):
        """``phi = T (x - mu)`` (or ``beta_j (x_j - mu_j)``) for a chunk of rows; no key is used."""
        del keys
        values, base = _explain(X, self.mean, self._mean_lo, self.coef, self._expected, self.transform)
        return values, base, None

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        if self._single:
            phi, base = drop_output_axis((phi, base))
        feature_names = resolve_feature_names(self._names, self.n_features, self._data_names, names)
        outputs = None if self._single else (self._output_names or default_output_names(self.coef.shape[0]))
        return Explanation(phi, base, X, None, feature_names, outputs)

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None, devices: Any = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted; a JAX array
            sharded over devices along its rows is explained where it lies).
          key: accepted for a uniform explainer interface and unused: a sampled transform is
            drawn once, with the constructor's ``key``.
          progress: progress bar, as for every explainer (``None``: when stderr is a terminal).
          devices: ``None``, ``"local"`` or a sequence of devices to shard the rows over.

        Returns:
          An :class:`Explanation`; ``stderr`` is ``None`` (the transform is fixed; a sampled one
          carries Monte-Carlo error shared by every row, which is not estimated).
        """
        del key
        return super().__call__(X, None, progress=progress, devices=devices)


def _mean(x):
    """The column means in two passes (the mean, corrected by the mean of the residuals)."""
    first = x.mean(axis=0)
    return first + (x - first).mean(axis=0)


def _split_mean(mean: Any, dtype: Any) -> tuple[jax.Array, jax.Array]:
    """``mean`` as ``hi + lo`` in ``dtype``: a float64 mean keeps its digits in float32 arithmetic.

    ``x - hi`` is exact for ``x`` near ``hi`` (Sterbenz), so ``(x - hi) - lo`` centres a row at
    ``mean`` to the working precision of the *difference*, not of ``mean`` itself (a float32
    feature with mean ``1e6`` would otherwise be centred with an error of up to 0.03).
    """
    if is_traced(mean):
        mean = jnp.asarray(mean, dtype)
        return mean, jnp.zeros_like(mean)
    full = np.asarray(mean, np.float64)
    hi = np.asarray(full, dtype)
    return put(hi, dtype), put(full - hi.astype(np.float64), dtype)


def _explain(X, mean, mean_lo, coef, expected, transform):
    centred = (X - mean) - mean_lo
    if transform is None:
        values = centred[:, :, None] * coef.T[None, :, :]
    else:
        values = jnp.einsum("kjm,nm->njk", transform, centred)
    base = jnp.broadcast_to(expected, (X.shape[0], expected.shape[0]))
    return values, base
