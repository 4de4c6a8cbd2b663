"""The observational value function under a multivariate normal: ``maskers.Gaussian``."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._estimators._covariance import prepare, sample_moments
from .._estimators._gaussian import conditional_draws, conditional_draws_rows
from .._core._inputs import as_key, as_matrix, check_finite, column_names, is_traced
from .._core._validate import integer
from ._sampled import ConditionalSampler

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

