"""The observational value functions under Gaussian dependence: a multivariate normal
(``maskers.Gaussian``) and a Gaussian copula with empirical marginals (``maskers.GaussianCopula``).
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from .._core._categorical import categorical_columns, category_codes
from .._core._inputs import as_key, as_matrix, check_finite, column_names, is_traced
from .._core._validate import integer
from .._estimators._covariance import prepare, sample_moments
from .._estimators._gaussian import conditional_draws, conditional_draws_rows
from ._base import ConditionalSampler


DEFAULT_SAMPLES = 2048


def antithetic_noise(key: Any, n_samples: int, n_features: int, dtype: Any) -> jax.Array:
    """``[n_samples, n_features]`` standard-normal draws in antithetic pairs ``(e, -e)`` from
    ``key`` (``None``: ``jax.random.key(0)``); for an even ``n_samples`` their mean is exactly zero."""
    half = jax.random.normal(as_key(key), ((n_samples + 1) // 2, n_features), dtype)
    return jnp.concatenate([half, -half], axis=0)[:n_samples]


class Gaussian(ConditionalSampler):
    r"""Observational (conditional) coalition values under :math:`X \sim \mathcal N(\mu, \Sigma)`.

    .. math::

        v_x(S) = E\bigl[f(X) \mid X_S = x_S\bigr]
               \approx \frac1N \sum_{n=1}^{N} f\bigl(x_S,\; \mu_{\bar S} + \Sigma_{\bar S S}
               \Sigma_{SS}^{-1}(x_S - \mu_S) + F_S\, \varepsilon_n\bigr),

    with :math:`F_S F_S^\top = \Sigma_{\bar S \bar S} - \Sigma_{\bar S S}\Sigma_{SS}^{-1}
    \Sigma_{S \bar S}` (the Schur complement), after Aas, Jullum & Loland (2021), "Explaining
    individual predictions when features are dependent: more accurate approximations to Shapley
    values". Unlike :class:`Independent`, a feature outside the coalition is drawn given the
    ones inside, so correlated features share credit (Janzing et al., 2020, contrast the two).

    The draws :math:`\varepsilon_n` are fixed when the masker is built and shared by every
    coalition and row (common random numbers: differences of coalition values, hence
    attributions, are much less noisy than the values themselves). They come in antithetic
    pairs :math:`\pm\varepsilon`, so the draws' mean is exactly the conditional mean and the
    values of a linear model carry no Monte-Carlo error at all. Per coalition, one Cholesky
    factorisation of the covariance with the coalition put first gives both the regression and
    the factor (see :mod:`jaxshap._estimators._gaussian`); rank-deficient covariances are regularised as
    described there, with a warning.

    Args:
      mean: ``[M]``.
      cov: ``[M, M]`` symmetric positive semi-definite covariance.
      n_samples: Monte-Carlo draws per coalition value (model evaluations per coalition).
      key: PRNG key for the draws; ``None`` means ``jax.random.key(0)``.
      rcond: ``None`` (default): the correlation matrix is used exactly unless it is numerically
        singular (smallest eigenvalue below ``4 eps`` times the largest in float32, ``16 eps``
        in float64); then it is shrunk toward independence, lifting the smallest eigenvalue to
        ``1e-5`` (float32) or ``1e-8`` (float64) times the largest, with a warning. A number
        sets the cut-off and the floor to that value.
      feature_names: optional names of the ``M`` features.

    Raises:
      ValueError: for a ``cov`` that does not match ``mean``, is not symmetric or not PSD, or a
        non-positive ``n_samples``.

    Example::

        masker = jaxshap.maskers.Gaussian.fit(X_train)
        expl = jaxshap.ExactExplainer(model, masker)(X)
    """

    def __init__(
        self,
        mean: Any,
        cov: Any,
        n_samples: int = DEFAULT_SAMPLES,
        key: Any = None,
        *,
        rcond: float | None = None,
        feature_names: Sequence[str] | None = None,
    ):
        self._setup(mean, cov, n_samples, key, rcond, feature_names)

    def _setup(self, mean, cov, n_samples, key, rcond, feature_names, **prepare_options) -> None:
        n_samples = integer(n_samples, "n_samples", least=1, rule=f"a positive integer ({DEFAULT_SAMPLES} is the default)")
        if not is_traced(mean):
            mean = np.asarray(mean)
        if not is_traced(cov):
            cov = np.asarray(cov)
        prepare_options.setdefault("name", "cov")
        self._g = prepare(mean, cov, rcond=rcond, **prepare_options)
        # the mean's rounding to the working dtype, kept apart: rows are centred at the mean to the
        # precision of the difference (a float32 feature with mean 1e6 loses 0.03 of its unit otherwise)
        lo = 0.0 if is_traced(mean) else np.asarray(mean, np.float64) - np.asarray(self._g.mean, np.float64)
        self._mean_lo = jnp.zeros_like(self._g.mean) + jnp.asarray(lo, self._g.mean.dtype)
        m = self._g.mean.shape[0]
        if feature_names is not None and len(feature_names) != m:
            raise ValueError(f"`feature_names` has {len(feature_names)} names but `mean` has {m} features.")
        self.feature_names = None if feature_names is None else tuple(str(n) for n in feature_names)
        self.noise = antithetic_noise(key, n_samples, m, self._g.mean.dtype)

    @classmethod
    def fit(
        cls, data: Any, n_samples: int = DEFAULT_SAMPLES, key: Any = None, *, rcond: float | None = None
    ) -> "Gaussian":
        """A Gaussian masker with the sample mean and covariance (``ddof=1``) of ``data`` ``[N, M]``.

        Feature names come from a DataFrame's columns. Fewer rows than features give a
        rank-deficient covariance, which is regularised with a warning. The moments are
        computed in float64 (centred, two passes) and the masker works in ``data``'s dtype.

        Raises:
          ValueError: for fewer than two rows or NaN/inf in ``data``.
        """
        names = column_names(data)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        if x.shape[0] < 2:
            raise ValueError(f"`data` has {x.shape[0]} row(s); fitting a covariance needs at least 2.")
        mean, cov = sample_moments(x)
        obj = cls.__new__(cls)
        obj._setup(mean, cov, n_samples, key, rcond, names, name="data", dtype=x.dtype, exact_moments=not is_traced(x))
        return obj

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def mean(self) -> jax.Array:
        return self._g.mean

    @property
    def cov(self) -> jax.Array:
        """The regularised covariance actually used, ``D C D``."""
        d = self._g.scale
        return d[:, None] * self._g.corr * d[None, :]

    @property
    def n_features(self) -> int:
        return self._g.mean.shape[0]

    @property
    def dtype(self):
        return self._g.mean.dtype

    @property
    def probe_rows(self) -> jax.Array:
        """The mean, as one valid input row for probing a model's output shape."""
        return self._g.mean[None, :]

    def conditional_samples(self, x: jax.Array, masks: jax.Array) -> jax.Array:
        """Draws of ``X`` given ``X_S = x_S`` for each coalition: ``[C, n_samples, M]``."""
        g, lo = self._g, self._mean_lo
        z = g.standardize(x) - lo / g.safe_scale

        def one(mask):
            draws = conditional_draws(g.corr, mask, z, self.noise)
            return jnp.where(mask[None, :], x[None, :], g.mean + (lo + g.scale * draws))

        return jax.vmap(one)(masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        r"""One draw of :math:`X_{\bar G} \mid X_G = r_G` for each row ``r``: ``[N, M]``.

        The exact Gaussian conditional of each row (regression on its own given values plus the
        Schur complement's factor times fresh noise), one factorisation for all rows. The noise
        comes in antithetic pairs, row ``n`` and row ``n + ceil(N / 2)`` drawing
        :math:`\pm\varepsilon`, so a chain of such draws averages exactly to the chain of
        conditional means when the rows start equal (a linear model's causal values carry no
        Monte-Carlo error); rows of different pairs are independent.

        Args:
          key: PRNG key of the noise.
          rows: ``[N, M]`` rows holding the given values.
          given: ``[M]`` boolean, ``True`` where the value is given (kept).
        """
        g, lo = self._g, self._mean_lo
        n, m = rows.shape
        half = jax.random.normal(key, ((n + 1) // 2, m), g.mean.dtype)
        noise = jnp.concatenate([half, -half], axis=0)[:n]
        z = (rows - g.mean - lo) / g.safe_scale
        draws = conditional_draws_rows(g.corr, given, z, noise)
        return jnp.where(given[None, :], rows, g.mean + (lo + g.scale * draws))

    def __repr__(self) -> str:
        m = self.n_features if not is_traced(self._g.mean) else "traced"
        return f"Gaussian(features: {m}, n_samples: {self.n_samples})"


def _levels(sorted_values: np.ndarray) -> np.ndarray:
    """``[N, M]`` CDF levels of each column's order statistics: mean rank / (N + 1) (ties share it)."""
    n = sorted_values.shape[0]
    out = np.empty_like(sorted_values, dtype=np.float64)
    for j in range(sorted_values.shape[1]):
        col = sorted_values[:, j]
        below = np.searchsorted(col, col, side="left")
        upto = np.searchsorted(col, col, side="right")
        out[:, j] = (below + upto + 1) / 2.0 / (n + 1)
    return out


_per_feature = jax.vmap(jnp.interp, in_axes=(-1, 1, 1), out_axes=-1)


def normal_cdf(z: jax.Array) -> jax.Array:
    r"""The standard normal CDF :math:`\Phi(z) = \tfrac12 \bigl(1 + \operatorname{erf}(z / \sqrt 2)\bigr)`.

    One ``erf`` (a rational polynomial that XLA vectorises). ``jax.scipy.special.ndtr`` computes
    both ``erf`` and ``erfc`` under a select, for relative accuracy deep in the lower tail, and
    costs about four times as much on a CPU; it was most of the copula's time per draw. The
    back-transform needs only the level's *absolute* accuracy (it picks one of the quantile
    table's ``2 (N + 1)`` cells), which is a few float epsilons either way.
    """
    return 0.5 + 0.5 * jax.lax.erf(z * np.asarray(np.sqrt(0.5), z.dtype))


def _quantile_table(sorted_values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    r"""``[G + 1, M]``: each column's quantile function at the levels ``k / G``, ``G = 2 (N + 1)``.

    Every level :math:`\bar r / (N + 1)` is a multiple of :math:`1 / G` (a mean rank is a
    multiple of 1/2), so the quantile function, piecewise linear in the level through the
    knots, is linear between consecutive grid points: interpolating in this table is exact and
    finds its cell by an index computation instead of a search.
    """
    steps = 2 * (sorted_values.shape[0] + 1)
    grid = np.arange(steps + 1) / steps
    return np.stack([np.interp(grid, levels[:, j], sorted_values[:, j]) for j in range(sorted_values.shape[1])], 1)


class GaussianCopula(ConditionalSampler):
    r"""Observational coalition values under a Gaussian copula with the data's marginals.

    Each feature is mapped to normal scores by its empirical CDF,
    :math:`z_j = \Phi^{-1}(\hat F_j(x_j))`; the scores are taken to be jointly normal, with the
    mean and covariance of the training rows' scores; a coalition is conditioned on in
    :math:`z`-space exactly as :class:`Gaussian` does (the shared conditioning algebra of
    :mod:`jaxshap._estimators._gaussian`), and the draws are mapped back by each feature's
    empirical quantile function:

    .. math::

        v_x(S) \approx \frac1N \sum_{n=1}^{N} f\bigl(x_S,\;
            \hat F_{\bar S}^{-1}(\Phi(z_{\bar S, n}))\bigr), \qquad
            z_{\bar S, n} \sim \mathcal N\bigl(z_{\bar S} \mid z_S = \Phi^{-1}(\hat F_S(x_S))\bigr),

    after Aas, Jullum & Loland (2021), "Explaining individual predictions when features are
    dependent: More accurate approximations to Shapley values" (Artificial Intelligence 298,
    section 3.2; shapr's ``approach = "copula"``).

    The CDF and quantile function of a feature are the piecewise-linear interpolation through
    the points :math:`(x_{(r)}, \bar r / (N + 1))`, where :math:`x_{(r)}` are the training
    values sorted and :math:`\bar r` is the mean rank of the value (tied values share it), so
    a training value maps to the normal score of its rank and back to itself. Beyond the
    smallest and largest training values the CDF is held at its end levels, so draws stay in
    the data's range. The draws :math:`\varepsilon_n` are fixed when the masker is built and
    shared by every coalition and row (common random numbers), in antithetic pairs, as in
    :class:`Gaussian`.

    Args:
      data: training rows ``[N, M]`` (array or DataFrame), continuous features only.
      n_samples: Monte-Carlo draws per coalition value (model evaluations per coalition).
      key: PRNG key for the draws; ``None`` means ``jax.random.key(0)``.
      rcond: cut-off for a numerically singular correlation matrix of the scores, as in
        :class:`Gaussian`.
      categorical: categorical columns are refused (a copula needs continuous marginals).
      feature_names: names of the ``M`` features (default: a DataFrame's columns).

    Raises:
      ValueError: for fewer than two rows, NaN or inf in ``data``, a bad ``n_samples``, or any
        categorical column (``categorical=`` or a pandas ``category`` column; use
        :class:`Empirical` for those).
    """

    def __init__(
        self,
        data: Any,
        n_samples: int = DEFAULT_SAMPLES,
        key: Any = None,
        *,
        rcond: float | None = None,
        categorical: Any = None,
        feature_names: Sequence[str] | None = None,
    ):
        names = column_names(data) if feature_names is None else [str(n) for n in feature_names]
        data, found = category_codes(data)
        x = as_matrix(data, "data")
        n, m = x.shape
        cat = categorical_columns(categorical, m, names, found)
        if cat:
            shown = ", ".join(repr(names[j]) if names is not None else str(j) for j in cat)
            raise ValueError(
                f"`categorical`: GaussianCopula models continuous features only, and column(s) {shown} are "
                "categorical. Use jaxshap.maskers.Empirical(data, categorical=...), whose kernel matches "
                "categories exactly."
            )
        check_finite(x, "data")
        if is_traced(x):
            raise ValueError("`data` must be concrete (not traced): the empirical CDFs are built on the host.")
        if n < 2:
            raise ValueError(f"`data` has {n} row(s); fitting a copula needs at least 2.")
        if names is not None and len(names) != m:
            raise ValueError(f"`feature_names` has {len(names)} names but `data` has {m} features.")
        self.feature_names = None if names is None else tuple(names)
        n_samples = integer(n_samples, "n_samples", least=1, rule=f"a positive integer ({DEFAULT_SAMPLES} is the default)")
        values = np.sort(np.asarray(x, np.float64), axis=0)
        levels = _levels(values)
        self.sorted_values = jnp.asarray(values, x.dtype)
        self.levels = jnp.asarray(levels, x.dtype)
        table = _quantile_table(values, levels)  # [G + 1, M]
        self._steps = table.shape[0] - 1
        # cell k of feature j at row k * M + j: (quantile at k / G, rise to (k + 1) / G)
        self._cells = jnp.asarray(np.stack([table[:-1], np.diff(table, axis=0)], -1).reshape(-1, 2), x.dtype)
        mean, cov = sample_moments(self.scores(x))
        self._g = prepare(mean, cov, rcond=rcond, name="data", dtype=x.dtype, exact_moments=True)
        self.noise = antithetic_noise(key, n_samples, m, x.dtype)

    # --- the marginal transforms -----------------------------------------------------------------
    def scores(self, rows: jax.Array) -> jax.Array:
        """Normal scores :math:`\\Phi^{-1}(\\hat F_j(x_j))` of rows ``[..., M]``."""
        flat = rows.reshape(-1, rows.shape[-1])
        return ndtri(_per_feature(flat, self.sorted_values, self.levels)).reshape(rows.shape)

    def from_scores(self, z: jax.Array) -> jax.Array:
        """Rows ``[..., M]`` with normal scores ``z``: each feature's quantile function at :math:`\\Phi(z_j)`."""
        flat = z.reshape(-1, z.shape[-1])
        m = flat.shape[-1]
        t = normal_cdf(flat) * self._steps  # the level in grid steps: its cell is an index, no search
        cell = jnp.clip(jnp.floor(t).astype(jnp.int32), 0, self._steps - 1)
        # in bounds by the clip (NaN too): promising it lets XLA skip the gather's bounds masks
        start, rise = jnp.moveaxis(self._cells.at[cell * m + jnp.arange(m)].get(mode="promise_in_bounds"), -1, 0)
        return (start + (t - cell) * rise).reshape(z.shape)

    def _draws(self, mask: jax.Array, x: jax.Array, z: jax.Array, noise: jax.Array) -> jax.Array:
        """Rows ``[n, M]`` drawn given ``x_S`` (standardised scores ``z``) through the ``noise``
        ``[n, M]``, ``x_S`` kept."""
        g = self._g
        draws = g.mean + g.scale * conditional_draws(g.corr, mask, z, noise)
        return jnp.where(mask[None, :], x[None, :], self.from_scores(draws))

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.sorted_values.shape[1]

    @property
    def dtype(self):
        return self.sorted_values.dtype

    @property
    def probe_rows(self) -> jax.Array:
        """The feature-wise medians, as one valid input row for probing a model's output shape."""
        return self.from_scores(jnp.zeros((1, self.n_features), self.dtype))

    def conditional_samples(self, x: jax.Array, masks: jax.Array) -> jax.Array:
        """Draws of ``X`` given ``X_S = x_S`` for each coalition: ``[C, n_samples, M]``."""
        z = self._g.standardize(self.scores(x))
        return jax.vmap(lambda mask: self._draws(mask, x, z, self.noise))(masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """One draw of the columns not ``given`` per row, from the copula's conditional given the
        ``given`` ones (fresh normal draws from ``key``, independent across rows): ``[N, M]``."""
        rows = jnp.asarray(rows, self.dtype)
        given = jnp.asarray(given, bool)
        noise = jax.random.normal(key, rows.shape, self.dtype)
        z = self._g.standardize(self.scores(rows))
        return jax.vmap(lambda r, zr, e: self._draws(given, r, zr, e[None, :])[0])(rows, z, noise)

    def __repr__(self) -> str:
        return f"GaussianCopula(features: {self.n_features}, rows: {self.sorted_values.shape[0]}, n_samples: {self.n_samples})"
