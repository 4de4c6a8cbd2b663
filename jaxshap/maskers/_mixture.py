"""The observational value function under a fitted Gaussian mixture: ``maskers.GaussianMixture``."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._estimators._covariance import standardize
from .._estimators._gaussian import coalition_factor, marginal_log_density
from .._estimators._density import bayesian_information_criterion, fit_mixture
from .._core._inputs import as_key, as_matrix, check_finite, column_names
from .._core._validate import choice, integer, number
from .._core._platform import one_blas_thread
from ._gaussian import DEFAULT_SAMPLES
from ._base import ConditionalSampler

STRICT_RCOND = 0.0
"""The components' correlations are used as fitted (``reg_covar`` keeps them positive definite)."""

DEFAULT_RESTARTS = 5
"""EM starts per number of components (``n_init``); the fit with the highest log-likelihood is kept.

EM from one k-means++ start ends in a poor local optimum often enough to matter: on the
conditional bench's three-component mixtures (2000 rows; M = 4, 8, 10; 8 training draws, 10 keys
each) 28 of 240 starts ended more than 0.01 nats per row below the best of their draw, and such a
fit raised the SHAP error of a linear model 4-5 fold (0.145 and 0.165 against 0.03). With starts
failing independently at that rate, five leave a poor fit about once in 30,000. scikit-learn's
``GaussianMixture`` offers the same restarts (``n_init``; its default is 1).
"""


def _refuse_categorical(data: Any, categorical: Any) -> None:
    """Raise when categorical columns are asked for or found (pandas ``category`` dtypes)."""
    dtypes = getattr(data, "dtypes", None)
    found = [] if dtypes is None or not hasattr(dtypes, "items") else [str(c) for c, d in dtypes.items() if str(d) == "category"]
    if (categorical is not None and len(categorical)) or found:
        named = f" (pandas category columns {found})" if found else ""
        raise ValueError(
            f"GaussianMixture models continuous features only and takes no `categorical` columns{named}: a "
            "mixture of normals puts probability on values between the codes. Use jaxshap.maskers.Empirical, "
            "which conditions on categorical columns, instead."
        )


class GaussianMixture(ConditionalSampler):
    r"""Observational (conditional) coalition values under a Gaussian mixture fitted to data.

    The data's distribution is modelled as :math:`p(x) = \sum_c \pi_c \mathcal N(x; \mu_c,
    \Sigma_c)` with full covariances, fitted by EM (see :mod:`jaxshap._estimators._density`).
    The conditional distribution of the other features given :math:`x_S` is again a mixture:
    of the components' Gaussian conditionals (Schur complements, as in :class:`Gaussian`) with
    the re-weighted weights

    .. math::

        \pi_c(x_S) = \frac{\pi_c\, \mathcal N(x_S; \mu_{c,S}, \Sigma_{c,SS})}
                          {\sum_d \pi_d\, \mathcal N(x_S; \mu_{d,S}, \Sigma_{d,SS})},

    and :math:`v_x(S) = E[f(X) \mid X_S = x_S]` is the mean of the model over ``n_samples``
    exact draws from it. A mixture's conditionals can be skewed or multimodal and their spread
    can depend on :math:`x_S`, which a single Gaussian's cannot (Aas, Jullum & Løland, 2021,
    name mixtures among the parametric conditionals; Olsen et al., 2022, compare them).

    **The draws.** Draw ``n`` takes a stratified uniform :math:`u_n` and a standard-normal
    vector :math:`\varepsilon_n`, both fixed when the masker is built and shared by every
    coalition and row (common random numbers). Its component is the inverse of the cumulative
    re-weighted weights at :math:`u_n`, so each component gets its share of the draws to within
    one stratum; its value is that component's conditional draw with noise
    :math:`\varepsilon_n` (:func:`jaxshap._estimators._gaussian.coalition_factor`). The strata
    :math:`u_k = (k + U_k) / h`, :math:`k < h = \lceil n/2 \rceil`, :math:`U_k \sim U(0, 1)`, are
    used twice, with :math:`+\varepsilon_k` and :math:`-\varepsilon_k` (antithetic pairs in one
    component), so with one component the values of a linear model carry no Monte-Carlo error.

    Args:
      data: ``[N, M]`` rows (array or DataFrame, whose columns name the features); concrete (the
        fit runs when the masker is built; the built masker goes through ``jax.jit`` and
        ``jax.grad`` as any masker).
      n_components: ``K``, the number of mixture components; or several candidates (a sequence
        such as ``range(1, 7)``), each fitted from the same ``key`` (the best of ``n_init``
        starts), of which the one with the lowest Bayesian information criterion
        :math:`-2 N \bar\ell + p \log N` is kept (:math:`\bar\ell` the fit's mean
        log-likelihood, :math:`p = K - 1 + K M + K M (M+1)/2` its free parameters; Schwarz,
        1978; Fraley & Raftery, 2002, choose mixtures so).
      key: PRNG key (or int seed) for the initial centres, the strata and the noise; ``None``
        means ``jax.random.key(0)``.
      n_samples: Monte-Carlo draws per coalition value (model evaluations per coalition).
      max_iter: the most EM iterations.
      tol: EM stops when the mean log-likelihood changes by less than this.
      reg_covar: added to every covariance's diagonal (in the data's units squared).
      init: ``"k-means++"`` (default) or ``"random"`` (``K`` distinct rows) for the centres
        whose hard assignment starts EM.
      n_init: EM starts per number of components, from ``key`` and keys folded from it; the fit
        with the highest log-likelihood is kept (the first among equals), so more starts never
        lower it and ``n_init=1`` is the single fit from ``key``. The default, 5, is chosen
        because one start ends in a poor local optimum about once in eight on three
        well-separated clusters (see ``DEFAULT_RESTARTS``); each start costs one more EM run
        when the masker is built, nothing when it explains.
      categorical: refused (a mixture of normals has no categorical columns); pandas
        ``category`` columns are refused too.

    Attributes:
      weights: ``[K]`` fitted mixing weights.
      means: ``[K, M]``.
      covariances: ``[K, M, M]``, regularised.
      log_likelihood: mean log-likelihood of ``data`` under the fit.
      converged: whether the kept fit's EM met ``tol`` within ``max_iter`` iterations (a warning
        says when not).
      n_iter: EM iterations of the kept fit.
      history: ``[n_iter]`` mean log-likelihood at each iteration of the kept fit (non-decreasing
        for EM).
      bic: ``{K: BIC}`` of every candidate fitted (one entry for a single ``n_components``).

    Raises:
      ValueError: for fewer rows than components, NaN/inf in ``data``, non-positive sizes or
        tolerances, a negative ``reg_covar``, or categorical columns (naming ``categorical``
        and :class:`jaxshap.maskers.Empirical`).

    Example::

        masker = jaxshap.maskers.GaussianMixture(X_train, n_components=3, key=0)
        expl = jaxshap.ExactExplainer(model, masker)(X)
    """

    def __init__(
        self,
        data: Any,
        n_components: int | Sequence[int],
        key: Any = None,
        *,
        n_samples: int = DEFAULT_SAMPLES,
        max_iter: int = 100,
        tol: float = 1e-3,
        reg_covar: float = 1e-6,
        init: str = "k-means++",
        n_init: int = DEFAULT_RESTARTS,
        categorical: Any = None,
    ):
        _refuse_categorical(data, categorical)
        candidates = _candidates(n_components)
        n_samples = integer(n_samples, "n_samples", least=1, rule=f"a positive integer ({DEFAULT_SAMPLES} is the default)")
        max_iter = integer(max_iter, "max_iter", least=1)
        tol = number(tol, "tol", above=0.0)
        reg_covar = number(reg_covar, "reg_covar", least=0.0)
        init = choice(init, "init", ("k-means++", "random"))
        n_init = integer(n_init, "n_init", least=1, rule=f"a positive integer ({DEFAULT_RESTARTS} is the default)")
        names = column_names(data)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        k = max(candidates)
        if x.shape[0] < k:
            raise ValueError(f"`data` has {x.shape[0]} row(s); a mixture of n_components={k} needs at least {k}.")
        self.feature_names = None if names is None else tuple(str(n) for n in names)
        key_fit, key_u, key_noise = jax.random.split(as_key(key), 3)
        fit, self.bic_ = _select(key_fit, x, candidates, n_init, max_iter, tol, reg_covar, init)
        dtype = x.dtype
        self.weights = jnp.asarray(fit.weights, dtype)
        self.means = jnp.asarray(fit.means, dtype)
        self.covariances = jnp.asarray(fit.covariances, dtype)
        self._components = _standardised(fit.means, fit.covariances, dtype)
        # NumPy arrays, hence pytree leaves: as static fields their values would enter the compiled
        # program's cache key, and every fitted instance would compile its own program
        self.n_iter = np.asarray(int(fit.n_iter))
        self.converged = np.asarray(bool(fit.converged))
        self.log_likelihood = np.asarray(float(fit.log_likelihood))
        self.history_ = np.asarray(fit.history, np.float64)[: int(fit.n_iter)]  # its length varies: kept out of the tree
        half = (n_samples + 1) // 2
        strata = (jnp.arange(half, dtype=dtype) + jax.random.uniform(key_u, (half,), dtype)) / half
        noise = jax.random.normal(key_noise, (half, x.shape[1]), dtype)
        self.strata = jnp.concatenate([strata, strata])[:n_samples]
        self.noise = jnp.concatenate([noise, -noise], axis=0)[:n_samples]
        if not self.converged:
            warnings.warn(
                f"GaussianMixture: EM did not converge in max_iter={max_iter} iterations (the mean log-likelihood "
                f"changed by more than tol={tol:g}); raise max_iter or tol.", UserWarning, stacklevel=2)

    @property
    def history(self) -> np.ndarray | None:
        """``[n_iter]`` mean log-likelihood at each EM iteration (``None`` on a copy rebuilt inside a
        JAX transformation: its length varies between fits, so it is not part of the pytree)."""
        return getattr(self, "history_", None)

    @property
    def bic(self) -> dict[int, float] | None:
        """``{K: BIC}`` of the candidate numbers of components (``None`` on a copy rebuilt inside a
        JAX transformation)."""
        return getattr(self, "bic_", None)

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    @property
    def dtype(self):
        return self.means.dtype

    @property
    def probe_rows(self) -> jax.Array:
        """The component means, as valid input rows for probing a model's output shape."""
        return self.means

    def conditional_weights(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        r"""The re-weighted weights :math:`\pi_c(x_S)` of one coalition: ``[K]``."""
        return jax.nn.softmax(self._conditionals(x, mask)[0])

    def _conditionals(self, x, mask):
        """``(log weights [K], order [M], factors [K, M, M], first [M], w [K, M])`` given ``x_S``."""
        g = self._components
        z = (x[None, :] - g.mean) / g.safe_scale  # [K, M]
        order, factors, first, w = jax.vmap(coalition_factor, (0, None, 0))(g.corr, mask, z)
        log_scale = jnp.where(mask[None, :], jnp.log(g.safe_scale), 0.0).sum(1)
        log_density = jax.vmap(marginal_log_density)(factors, first, w) - log_scale
        return jnp.log(self.weights) + log_density, order[0], factors, first[0], w

    def _draw(self, x, mask, strata, noise):
        """Draws ``[n, M]`` of ``X`` given ``X_S = x_S`` for uniforms ``[n]`` and noise ``[n, M]``."""
        g = self._components
        logits, order, factors, first, w = self._conditionals(x, mask)
        cdf = jnp.cumsum(jax.nn.softmax(logits))
        comp = jnp.minimum(jnp.searchsorted(cdf / cdf[-1], strata), self.n_components - 1)
        white = jnp.where(first[None, :], w[comp], noise[:, order])
        draws = jnp.einsum("nij,nj->ni", factors[comp], white)[:, jnp.argsort(order)]
        return jnp.where(mask[None, :], x[None, :], g.mean[comp] + g.scale[comp] * draws)

    def conditional_samples(self, x: jax.Array, masks: jax.Array) -> jax.Array:
        """Draws of ``X`` given ``X_S = x_S`` for each coalition: ``[C, n_samples, M]``."""
        return jax.vmap(lambda mask: self._draw(x, mask, self.strata, self.noise))(masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        r"""One draw of :math:`X_{\bar G} \mid X_G = r_G` per row, from the mixture's conditional.

        Each row draws its component from its own re-weighted weights and its noise afresh
        (independent uniforms and normals from ``key``).
        """
        rows = jnp.asarray(rows, self.dtype)
        given = jnp.asarray(given, bool)
        k_u, k_e = jax.random.split(key)
        u = jax.random.uniform(k_u, (rows.shape[0], 1), self.dtype)
        eps = jax.random.normal(k_e, (rows.shape[0], 1, rows.shape[1]), self.dtype)
        return jax.vmap(lambda r, ui, ei: self._draw(r, given, ui, ei)[0])(rows, u, eps)

    def __repr__(self) -> str:
        return f"GaussianMixture(features: {self.n_features}, components: {self.n_components}, n_samples: {self.n_samples})"


def _candidates(n_components: Any) -> tuple[int, ...]:
    """The candidate numbers of components, sorted: one positive integer, or a non-empty sequence of them.

    Raises:
      ValueError: naming ``n_components``.
    """
    if isinstance(n_components, (str, bytes)) or not hasattr(n_components, "__iter__"):
        return (integer(n_components, "n_components", least=1),)
    rule = "a positive integer or a non-empty sequence of them (candidates chosen by BIC)"
    found = tuple(sorted({integer(k, "n_components", least=1, rule=rule) for k in n_components}))
    if not found:
        raise ValueError(f"`n_components` must be {rule}; got an empty sequence.")
    return found


def _select(key, x, candidates, n_init, max_iter, tol, reg_covar, init):
    """``(fit, {K: BIC})``: each candidate's best of ``n_init`` EM fits from one key, the candidate
    with the lowest BIC kept (the fewest components among equals)."""
    n, m = x.shape
    fits, bic = {}, {}
    for k in candidates:
        fits[k] = _best_of(key, x, k, n_init, max_iter, tol, reg_covar, init)
        bic[k] = bayesian_information_criterion(float(fits[k].log_likelihood), n, k, m)
    return fits[min(bic, key=bic.get)], bic


def restart_keys(key: jax.Array, n_init: int) -> list[jax.Array]:
    """The keys of ``n_init`` EM starts: ``key`` itself, then ``fold_in(key, i)`` for ``i >= 1``
    (so the first start is the single fit from ``key``)."""
    return [key] + [jax.random.fold_in(key, i) for i in range(1, n_init)]


def _best_of(key, x, k, n_init, max_iter, tol, reg_covar, init):
    """The fit with the highest mean log-likelihood of ``n_init`` EM starts (the first among
    equals); every start runs the same compiled program."""
    best, best_ll = None, -np.inf
    for start in restart_keys(key, n_init):
        fit = _fit64(start, x, k, max_iter, tol, reg_covar, init)
        ll = float(fit.log_likelihood)
        if best is None or ll > best_ll:  # a NaN likelihood never displaces a finite one
            best, best_ll = fit, (ll if np.isfinite(ll) else -np.inf)
    return best


def _fit64(key, x, k, max_iter, tol, reg_covar, init):
    """EM in float64 on the host (one BLAS thread, as the library's other host algebra)."""
    with jax.enable_x64(True), one_blas_thread():
        fit = fit_mixture(key, jnp.asarray(np.asarray(x, np.float64)), k, max_iter, tol, reg_covar, init)
        return jax.tree_util.tree_map(np.asarray, fit)


def _standardised(means, covariances, dtype):
    """The components as stacked standardised Gaussians (scales and correlations), in ``dtype``."""
    with jax.enable_x64(True):
        g = jax.vmap(lambda mu, c: standardize(mu, c, STRICT_RCOND))(jnp.asarray(means), jnp.asarray(covariances))
        g = jax.tree_util.tree_map(np.asarray, g)
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), g)
