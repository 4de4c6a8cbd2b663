r"""Validated multivariate normals: covariance checks, moments, and the standardised split.

A Gaussian :math:`\mathcal N(\mu, \Sigma)` is used in *standardised* coordinates
:math:`z = (x - \mu) / d` with :math:`d = \sqrt{\operatorname{diag}\Sigma}`, on the correlation
matrix :math:`C` (:func:`standardize`), so that the rank and conditioning policy is scale-free;
:mod:`jaxshap._estimators._gaussian` conditions on coalitions in those coordinates.

Policy for rank-deficient or nearly collinear covariances (:func:`standard_gaussian`):
a covariance must be symmetric and positive semi-definite up to a relative tolerance (eigenvalues
at least ``-1e-6`` times the largest), else ``ValueError``. Concrete moments and the split into
scales and correlations are computed in float64 through XLA (scale-free: the correlations do not
depend on the features' units) and only then rounded to the working dtype. A feature is constant
when its spread is zero or below the resolution of its own mean; constant features are treated as
independent of the rest. A correlation matrix is used exactly as given unless it is numerically
singular in the working precision (smallest eigenvalue below ``4 eps`` times the largest in
float32, ``16 eps`` in float64); only then it is shrunk toward independence,
:math:`C \to (C + \delta I) / (1 + \delta)`, lifting the smallest eigenvalue to ``1e-5``
(float32) or ``1e-8`` (float64) times the largest. Regression coefficients then stay bounded, so
nearly collinear data never produce the huge values an unguarded inverse gives; duplicated
features share their credit. What was done is returned as a :class:`Regularisation` status; the
caller decides what to do with it and warns (:func:`warn_regularised`), as :func:`prepare` does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core._inputs import is_traced
from .._core._platform import one_blas_thread
from .._core._validate import is_number, number

PSD_TOLERANCE = 1e-6
"""A covariance counts as PSD when its smallest eigenvalue is at least ``-PSD_TOLERANCE`` times the largest."""

RCOND_ULPS = {4: 4.0, 8: 16.0}
"""Default cut-off for "numerically singular", in units of the working precision's eps.

A correlation matrix whose smallest eigenvalue is at least this times its largest is used exactly
as given: float32 ``4 eps = 4.8e-7`` (condition numbers up to about ``2e6``), float64
``16 eps = 3.6e-15`` (up to about ``3e14``). Below it, its Cholesky factorisations, after rounding
to that precision, may break down or lose every digit."""

SINGULAR_FLOOR = {4: 1e-5, 8: 1e-8}
"""Where a numerically singular correlation matrix's smallest eigenvalue is lifted to, relative to
its largest (by default): far enough above the cut-off that the factorisations keep several
digits, so nearly collinear data never produce huge values."""

CONSTANT_ULPS = 2.0
"""A feature is constant when its standard deviation is at most this many ulps of its own mean
(a spread that the precision of its values cannot represent), or zero."""


def default_rcond(dtype: Any) -> float:
    """The default cut-off for a numerically singular correlation matrix: ``RCOND_ULPS`` times eps."""
    dtype = jnp.dtype(dtype)
    return float(RCOND_ULPS[8 if dtype.itemsize >= 8 else 4] * jnp.finfo(dtype).eps)


def default_floor(dtype: Any) -> float:
    """The default level a numerically singular correlation matrix is lifted to (:data:`SINGULAR_FLOOR`)."""
    return SINGULAR_FLOOR[8 if jnp.dtype(dtype).itemsize >= 8 else 4]


class StandardGaussian(NamedTuple):
    """A validated multivariate normal, in standardised coordinates (a pytree of arrays).

    Attributes:
      mean: ``mu``, ``[M]``.
      scale: ``d = sqrt(diag(Sigma))``, ``[M]``; zero for constant features.
      safe_scale: ``d`` with zeros replaced by one (to standardise a row without dividing by 0).
      corr: the regularised correlation matrix ``C``, ``[M, M]``, symmetric positive definite
        (constant features have a unit diagonal and no correlations).
      shrinkage: ``delta`` of the shrinkage toward independence (0 when none was needed).
    """

    mean: jax.Array
    scale: jax.Array
    safe_scale: jax.Array
    corr: jax.Array
    shrinkage: jax.Array

    def standardize(self, x: jax.Array) -> jax.Array:
        """``z = (x - mu) / d``, with constant features divided by one."""
        return (x - self.mean) / self.safe_scale


def check_numeric(x: Any, name: str) -> None:
    """Raise a ``TypeError`` naming ``name`` unless ``x`` holds real numbers."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(x).dtype
        except Exception:  # pragma: no cover - depends on the object
            dtype = np.dtype(object)
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)) or np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"`{name}` must hold real numbers; got dtype {dtype}. Pass a numeric array.")


def check_covariance(cov: Any, n_features: int, name: str = "cov") -> None:
    """Raise a ``ValueError`` unless a concrete ``cov`` is a symmetric PSD ``[M, M]`` matrix.

    Symmetry is checked to a relative tolerance of ``1e-5`` of the largest entry; positive
    semi-definiteness to ``-1e-6`` times the largest eigenvalue, computed in float64 by XLA
    (:func:`host64`). Traced covariances are only shape-checked.
    """
    shape = tuple(np.shape(cov))
    if shape != (n_features, n_features):
        raise ValueError(
            f"`{name}` must be a square covariance matrix of shape [{n_features}, {n_features}] "
            f"(one row and column per feature); got shape {shape}."
        )
    if is_traced(cov):
        return
    check_numeric(cov, name)
    c = np.asarray(cov, dtype=np.float64)
    if not np.isfinite(c).all():
        raise ValueError(f"`{name}` contains NaN or inf; pass a finite covariance matrix.")
    top = np.abs(c).max() if c.size else 0.0
    asym = np.abs(c - c.T).max() if c.size else 0.0
    if asym > 1e-5 * top:
        raise ValueError(
            f"`{name}` is not symmetric (largest |cov - cov.T| is {asym:.3g}, the largest entry "
            f"{top:.3g}); pass a covariance matrix, for example np.cov(data, rowvar=False)."
        )
    # Scaled by the largest entry, so that neither 1e-200 nor 1e200 under- or overflows.
    eig = host64(_eigvalsh, 0.5 * (c + c.T) / max(top, np.finfo(np.float64).tiny)) * top
    if eig[0] < -PSD_TOLERANCE * max(eig[-1], 0.0) or (eig[-1] <= 0 and eig[0] < 0):
        raise ValueError(
            f"`{name}` is not positive semi-definite: its smallest eigenvalue is {eig[0]:.3g} and its "
            f"largest {eig[-1]:.3g} (allowed: down to -{PSD_TOLERANCE:g} times the largest). Pass a "
            "valid covariance, for example np.cov(data, rowvar=False), or project yours onto the PSD cone."
        )


def host64(fn: Any, *args: Any) -> Any:
    """Run a jitted ``fn`` on concrete arrays in float64 through XLA, returning NumPy float64 arrays.

    The library's own host linear algebra (moments, eigenvalues, the correlation split) goes
    through XLA rather than NumPy, and with OpenBLAS capped at one thread
    (:func:`jaxshap._core._platform.one_blas_thread`): on a CPU, XLA's LAPACK calls run on
    SciPy's OpenBLAS, whose worker threads keep spinning after each call and slow the host's
    other work.
    """
    with jax.enable_x64(True), one_blas_thread():
        out = fn(*(jnp.asarray(np.asarray(a, np.float64)) for a in args))
        return jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), out)


_eigvalsh = jax.jit(jnp.linalg.eigvalsh)


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite (zero) gradient at and below 0."""
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


def correlation(mean: jax.Array, cov: jax.Array, constant_tol: Any = None) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Split :math:`\Sigma = D C D` into scales and a correlation matrix (traceable).

    A feature is constant when its standard deviation is zero or at most ``constant_tol`` times
    the magnitude of its own mean (by default :data:`CONSTANT_ULPS` ulps of the dtype): a spread
    its precision cannot represent. Constant features get ``d = 0`` and are made independent of
    the rest (unit diagonal, no correlations). Every other feature keeps its scale, however
    small or large next to the others: the split is scale-free. Gradients are finite also for
    constant features.

    Returns:
      ``(scale, safe_scale, corr)``: ``d`` with zeros for constant features, ``d`` with those
      zeros replaced by one, and ``C``.
    """
    cov = 0.5 * (cov + cov.T)
    var = jnp.diagonal(cov)
    std = safe_sqrt(var)
    if constant_tol is None:
        constant_tol = CONSTANT_ULPS * jnp.finfo(cov.dtype).eps
    constant = (var <= 0) | (std <= constant_tol * jnp.abs(mean))
    scale = jnp.where(constant, 0.0, std)
    safe = jnp.where(constant, 1.0, std)
    keep = ~constant
    both = keep[:, None] & keep[None, :]
    corr = jnp.where(both, cov, 0.0) / (safe[:, None] * safe[None, :])
    eye = jnp.eye(cov.shape[0], dtype=bool)
    corr = jnp.where(eye, 1.0, corr)
    return scale, safe, corr


def standardize(
    mean: jax.Array, cov: jax.Array, rcond: Any, constant_tol: Any = None, floor: Any = None
) -> StandardGaussian:
    r"""Split :math:`\Sigma = D C D` and regularise ``C`` (traceable; no checks, no warnings).

    The split is :func:`correlation`; then, only when ``C`` is numerically singular,
    :math:`\lambda_{\min} < \mathrm{rcond}\,\lambda_{\max}`, it is shrunk toward independence,
    :math:`C \leftarrow (C + \delta I)/(1 + \delta)` with
    :math:`\delta = \mathrm{floor}\,\lambda_{\max} - \lambda_{\min}` (:func:`shrink`;
    ``floor`` defaults to ``rcond``). The shrinkage amount is a regularisation constant: no
    gradient flows through it (the eigenvalues' derivatives are undefined at repeated eigenvalues).

    Args:
      mean: ``[M]``.
      cov: ``[M, M]`` symmetric PSD covariance.
      rcond: relative cut-off below which ``C`` counts as numerically singular.
      constant_tol: see :func:`correlation`.
      floor: the relative level the smallest eigenvalue of a singular ``C`` is lifted to.
    """
    scale, safe, corr = correlation(mean, cov, constant_tol)
    eig = jax.lax.stop_gradient(jnp.linalg.eigvalsh(corr))
    corr, delta = shrink(corr, rcond, eig[0], eig[-1], floor)
    return StandardGaussian(mean, scale, safe, corr, delta)


def shrink(corr: jax.Array, rcond: Any, smallest: Any, largest: Any, floor: Any = None) -> tuple[jax.Array, jax.Array]:
    r"""``(C + \delta I) / (1 + \delta)``, with ``\delta = floor * largest - smallest`` when
    ``smallest < rcond * largest`` (numerically singular) and ``\delta = 0`` otherwise.

    ``smallest`` and ``largest`` are the extreme eigenvalues of ``C``; ``floor`` (at least
    ``rcond``) defaults to ``rcond``. Returns the shrunk matrix and ``\delta``.
    """
    floor = rcond if floor is None else floor
    floor = jnp.maximum(jnp.asarray(floor, corr.dtype), jnp.asarray(rcond, corr.dtype))
    smallest, largest = jnp.asarray(smallest, corr.dtype), jnp.asarray(largest, corr.dtype)
    singular = smallest < rcond * largest
    delta = jnp.where(singular, jnp.maximum(floor * largest - smallest, 0.0), 0.0)
    eye = jnp.eye(corr.shape[0], dtype=corr.dtype)
    return (corr + delta * eye) / (1.0 + delta), delta


_standardize_host = jax.jit(standardize)


@dataclass(frozen=True)
class Regularisation:
    """What :func:`standard_gaussian` did to the correlation matrix: the status a caller decides on.

    Attributes:
      rank_deficient: the correlation matrix was numerically singular in the working precision
        (smallest eigenvalue below ``rcond`` times the largest) and was shrunk toward
        independence. ``False`` for traced inputs, whose shrinkage is not known on the host.
      shrinkage: ``delta`` of the shrinkage (0 when none was needed; ``None`` when traced).
      rcond: the cut-off used.
      floor: the level the smallest eigenvalue of a singular matrix is lifted to, relative to
        the largest.
    """

    rank_deficient: bool
    shrinkage: float | None
    rcond: float
    floor: float

    def message(self, name: str) -> str:
        """The warning that says what was done to ``name``'s correlations."""
        return (
            f"`{name}` is rank-deficient or nearly collinear (the correlation matrix's smallest "
            f"eigenvalue is below {self.rcond:.3g} times its largest, e.g. duplicated features or fewer "
            f"rows than features); correlations are shrunk toward independence by delta={self.shrinkage:.3g} "
            f"(smallest eigenvalue lifted to {self.floor:.3g} times the largest) so that conditioning stays "
            "stable (set `rcond` to change the cut-off and the floor)."
        )


def warn_regularised(status: Regularisation, name: str, stacklevel: int = 2) -> None:
    """Warn (``UserWarning``) when ``status`` says the correlations were shrunk; else nothing.

    ``stacklevel`` counts from the caller, as for :func:`warnings.warn`.
    """
    if status.rank_deficient:
        warnings.warn(status.message(name), UserWarning, stacklevel=stacklevel + 1)


def _check_moments(mean: Any, cov: Any, name: str, exact_moments: bool) -> None:
    """Raise unless ``mean`` is a finite vector and ``cov`` a symmetric PSD matrix to match."""
    mean_name = "mean" if name == "cov" else name
    if np.ndim(mean) != 1:
        raise ValueError(f"`{mean_name}` must be a vector of shape [M]; got shape {tuple(np.shape(mean))}.")
    m = np.shape(mean)[0]
    if m == 0:
        raise ValueError(f"`{mean_name}` is empty; a Gaussian needs at least one feature.")
    if not is_traced(mean):
        check_numeric(mean, mean_name)
    if exact_moments and not is_traced(cov):
        # Sample moments computed here: symmetric and PSD by construction (only finiteness is
        # left to check, against overflow), so the eigensolve of the check is skipped.
        if not np.isfinite(np.asarray(cov)).all():
            raise ValueError(f"`{name}` has a covariance too large to represent; rescale the features.")
    else:
        check_covariance(cov, m, name)
    if not is_traced(mean) and not np.isfinite(np.asarray(mean, np.float64)).all():
        raise ValueError(f"`{mean_name}` contains NaN or inf; pass a finite mean vector.")


def _cut_off(rcond: Any, dtype: Any) -> tuple[float, float]:
    """``(rcond, floor)``: the defaults of ``dtype`` for ``None``, else the checked number twice."""
    if rcond is None:
        return default_rcond(dtype), default_floor(dtype)
    if not is_number(rcond):
        raise TypeError(f"`rcond` must be a number in [0, 1) or None; got {rcond!r}.")
    rcond = number(rcond, "rcond", least=0.0, below=1.0, rule="a number in [0, 1) (None for the default)")
    return rcond, rcond


def _standardize_concrete(mean: Any, cov: Any, rcond: float, floor: float, dtype: Any,
                          exact_moments: bool) -> StandardGaussian:
    """:func:`standardize` in float64 on the host (:func:`host64`), then cast to ``dtype``."""
    cov_dtype = np.asarray(cov).dtype
    resolution = np.float64 if exact_moments or not np.issubdtype(cov_dtype, np.floating) else cov_dtype
    tol = CONSTANT_ULPS * float(np.finfo(resolution).eps)
    top = float(np.abs(np.asarray(cov, np.float64)).max()) or 1.0
    # Scaled by the largest entry (mean and cov together), so no square under- or overflows.
    root = np.sqrt(top)
    g64 = host64(lambda mu, c: _standardize_host(mu, c, rcond, tol, floor), np.asarray(mean) / root, np.asarray(cov) / top)
    return StandardGaussian(
        jnp.asarray(np.asarray(mean, np.float64), dtype),
        jnp.asarray(g64.scale * root, dtype),
        jnp.asarray(g64.safe_scale * np.where(g64.scale > 0, root, 1.0), dtype),
        jnp.asarray(g64.corr, dtype),
        jnp.asarray(g64.shrinkage, dtype),
    )


def standard_gaussian(
    mean: Any,
    cov: Any,
    *,
    rcond: float | None,
    name: str = "cov",
    dtype: Any = None,
    exact_moments: bool = False,
) -> tuple[StandardGaussian, Regularisation]:
    """Validate ``(mean, cov)``, standardise and regularise; return the Gaussian and what was done.

    Concrete inputs are standardised in float64 through XLA (:func:`host64`) and only then cast to
    ``dtype``: the correlation matrix is of order one whatever the features' units, so data
    scaled by ``1e-20`` or ``1e20`` give the same correlations, and no variance under- or
    overflows float32. Traced inputs (inside ``jax.jit`` or ``jax.grad``) are standardised in
    ``dtype``. Nothing is warned: the :class:`Regularisation` status says whether the
    correlation matrix was shrunk, and the caller decides (:func:`warn_regularised`).

    Args:
      mean: ``[M]``.
      cov: ``[M, M]``.
      rcond: relative cut-off and floor for the eigenvalues of the correlation matrix. ``None``
        (the default): a matrix counts as numerically singular below :func:`default_rcond`
        (``4 eps`` in float32, ``16 eps`` in float64) and is then lifted to :func:`default_floor`
        (``1e-5``, ``1e-8``); any other matrix is used exactly as given. A number: one value
        for both.
      name: the argument to name in errors (``"data"`` when the moments were estimated from data).
      dtype: the working dtype (default: from ``mean`` and ``cov``, at least float32).
      exact_moments: the moments were computed in float64 from the data (so a feature is
        constant only when its float64 spread is below float64's resolution); otherwise the
        resolution of ``cov``'s own dtype decides.

    Returns:
      ``(gaussian, status)``: the :class:`StandardGaussian` and its :class:`Regularisation`.

    Raises:
      TypeError: for a ``mean`` or ``cov`` that does not hold numbers, or an ``rcond`` that is
        not a number.
      ValueError: for a ``mean`` that is not a finite vector, a ``cov`` of the wrong shape,
        not symmetric, or not positive semi-definite, or an ``rcond`` outside ``[0, 1)``.
    """
    _check_moments(mean, cov, name, exact_moments)
    if dtype is None:
        dtype = jnp.result_type(jnp.asarray(mean).dtype, jnp.asarray(cov).dtype, jnp.float32)
        if not jnp.issubdtype(dtype, jnp.floating):
            dtype = jnp.float32
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    rcond, floor = _cut_off(rcond, dtype)
    if is_traced(mean) or is_traced(cov):
        g = standardize(jnp.asarray(mean, dtype), jnp.asarray(cov, dtype), rcond, None, floor)
    else:
        g = _standardize_concrete(mean, cov, rcond, floor, dtype, exact_moments)
    delta = None if is_traced(g.shrinkage) else float(g.shrinkage)
    return g, Regularisation(delta is not None and delta > 0, delta, rcond, floor)


def prepare(mean: Any, cov: Any, *, rcond: float | None, **options: Any) -> StandardGaussian:
    """:func:`standard_gaussian` (same arguments), warning (``UserWarning``) when the correlations
    were shrunk: for callers that only report the regularisation. The warning points at the
    caller's caller.
    """
    g, status = standard_gaussian(mean, cov, rcond=rcond, **options)
    warn_regularised(status, options.get("name", "cov"), stacklevel=3)
    return g


def _moments(data: jax.Array) -> tuple[jax.Array, jax.Array]:
    n = data.shape[0]
    first = data.mean(axis=0)
    centred = data - first
    correction = centred.mean(axis=0)  # compensates the rounding of the first mean
    centred = centred - correction
    return first + correction, centred.T @ centred / (n - 1)


_moments64 = jax.jit(_moments)


def sample_moments(data: Any) -> tuple[Any, Any]:
    """Sample mean and unbiased covariance (``ddof=1``) of rows ``[N, M]``, ``N >= 2``.

    Two passes (the mean, then the centred cross-products, with the mean corrected by the mean
    of the residuals). Concrete data are reduced in float64 through XLA (:func:`host64`), and the
    float64 moments are returned as NumPy arrays: a float32 feature with mean ``1e6`` and
    standard deviation 1 keeps all its digits. Traced data are reduced in their own dtype.
    """
    if is_traced(data):
        return _moments(data)
    return host64(_moments64, data)

