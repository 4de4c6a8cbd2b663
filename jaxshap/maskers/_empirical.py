"""The empirical observational value function of Aas, Jullum & Loland (2021): ``maskers.Empirical``."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from .._estimators._covariance import prepare, sample_moments
from .._core._categorical import categorical_columns, category_codes, frame_categories, check_codes
from .._core._inputs import as_matrix, check_finite, column_names, is_traced
from .._core._validate import integer, number
from ._base import Masker
from ._independent import shap_sample_rows

DEFAULT_MAX_SAMPLES = 1000
"""Training rows a coalition value averages over at most (shapr's ``n_samples``)."""

ETA_RULE = "a number in (0, 1] (the share of the total kernel weight kept; 0.95 by default)"


def _check_eta(eta: Any) -> float:
    return number(eta, "eta", above=0.0, most=1.0, rule=ETA_RULE)


def _sortable(values: jax.Array) -> jax.Array:
    """Integer keys in the order of the float ``values`` (``-0.0`` read as ``+0.0``; no NaN):
    int64 for float64, else int32 (narrower floats widened to float32 first, exactly)."""
    wide = values.dtype == jnp.float64
    values = (values + 0.0).astype(jnp.float64 if wide else jnp.float32)
    bits = jax.lax.bitcast_convert_type(values, jnp.int64 if wide else jnp.int32)
    return jnp.where(bits < 0, bits ^ jnp.iinfo(bits.dtype).max, bits)


def _bisect(good: Callable[[jax.Array], jax.Array], lo: jax.Array, hi: jax.Array) -> jax.Array:
    """The least integer ``t`` in ``(lo, hi]`` with ``good(t)``, for ``good`` monotone and true
    at ``hi`` (``lo + 1`` when it is true at ``lo`` too): the interval halved as many times as
    the keys have bits, no sort."""

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # floor((lo + hi) / 2) without overflow
        ok = good(mid)
        return jnp.where(ok, lo, mid), jnp.where(ok, mid, hi)

    lo, hi = jnp.asarray(lo, hi.dtype), jnp.asarray(hi)
    return jax.lax.fori_loop(0, 8 * hi.dtype.itemsize, halve, (lo, hi))[1]


def _kept(share: jax.Array, eta: float, k: int) -> jax.Array:
    """``[N]`` bool: the rows a coalition keeps, from their shares ``[N]`` of the total weight.

    A share :math:`v` is within the ``eta`` cut when the shares larger than it sum to under
    ``eta``; the kept rows are those at least the least share within it (so the fewest largest
    shares making up ``eta``, with every share tied to the last), and at most ``k`` of them, the
    largest (ties at the boundary by lower index, as ``jax.lax.top_k``). Both bounds are
    monotone in the threshold, so one bisection on the shares' integer keys finds it: no sort.
    """
    key = _sortable(share)
    n = share.shape[0]

    def good(t):
        ok = jnp.where(key > t, share, 0.0).sum() < eta if eta < 1.0 else True
        return ok & ((key > t).sum() < k) if k < n else ok

    least = _bisect(good, -1, key.max())
    above = key > least
    ties = key == least
    return above | (ties & (jnp.cumsum(ties) <= k - above.sum()))


class Empirical(Masker):
    r"""Observational coalition values from kernel-weighted training rows (Aas, Jullum & Loland 2021).

    .. math::

        v_x(S) = \frac{\sum_{k \in K_S} w_k\, f(x_S, d_{k,\bar S})}{\sum_{k \in K_S} w_k},
        \qquad w_k = \exp\Bigl(-\frac{D_S(x, d_k)^2}{2\sigma^2}\Bigr),
        \qquad D_S(x, d)^2 = \frac{(x_S - d_S)^\top \Sigma_{SS}^{-1} (x_S - d_S)}{|S|},

    over the training rows :math:`d_k` ("Explaining individual predictions when features are
    dependent: More accurate approximations to Shapley values", Artificial Intelligence 298,
    2021, section 3.3; shapr's ``approach = "empirical"`` with a fixed ``sigma``).
    :math:`\Sigma` is the data's sample covariance and :math:`D_S` the Mahalanobis distance on
    the coalition's features, its square divided by :math:`|S|` as in the paper (shapr's code
    divides the square by :math:`|S|^2`, so for :math:`|S| > 1` its weights are flatter than
    these at the same ``sigma``). :math:`K_S` holds the fewest rows, by largest weight, whose
    weights make up at least a share ``eta`` of the total weight of all rows, together with any
    row whose weight ties with the last of them (so duplicated rows and categorical-only
    coalitions do not depend on the rows' order), and at most ``max_samples`` rows (the
    largest weights). The empty coalition gives every row of the marginal sample the same
    weight: :math:`v_x(\emptyset)` is the mean prediction over it (every row when there are at
    most ``max_samples``, else the ``max_samples`` rows ``shap.utils.sample`` keeps).

    Compiled per coalition: :math:`\Sigma_{SS}^{-1}` through the Cholesky factor of the
    correlation matrix with the rows and columns outside ``S`` replaced by the identity (its
    inverse applied to all ``N`` rows as one matrix product), the distances to all ``N`` rows,
    and the kept rows' threshold (``eta`` cut and ``max_samples`` cap at once) by one bisection
    on the weights' bit patterns, without a sort; the kept rows are gathered, in the rows'
    order, into ``max_samples`` slots (those left over hold weight zero). Weights are computed relative to the nearest row (as shapr
    does), so they never all underflow. With ``sigma`` very large and ``eta = 1`` every row
    counts alike and the values are :class:`Independent`'s; as ``sigma`` goes to 0 only the
    nearest row counts.

    **Categorical columns** (integer codes) take part through an indicator kernel: a row has
    weight only when it matches ``x`` exactly on every categorical feature in ``S``; they are
    left out of the Mahalanobis part, whose :math:`|S|` counts the continuous features of ``S``.
    When no row matches all of them, the rows that match on the most count (a documented
    fallback, so that the value stays defined). The explained rows hold the same codes.

    Args:
      data: training rows ``[N, M]`` (array or DataFrame; a pandas ``category`` column is read
        as its codes and counts as categorical, and its labels are kept in
        :attr:`column_categories`, so explainers map the same column of a DataFrame ``X`` to
        these codes).
      sigma: the kernel's bandwidth, positive (0.1, as Aas et al. and shapr).
      eta: in ``(0, 1]``: the share of the total weight the kept rows make up (0.95).
      max_samples: at most this many rows per coalition (default 1000, shapr's ``n_samples``;
        ``None``: all ``N``). It bounds the cost: ``evals_per_coalition`` is
        ``min(max_samples, N)`` model evaluations.
      categorical: indices or names of the categorical columns.
      feature_names: names of the ``M`` features (default: a DataFrame's columns).

    Raises:
      ValueError: for fewer than two rows, NaN or inf in ``data``, a ``sigma`` that is not
        positive, an ``eta`` outside ``(0, 1]``, a bad ``max_samples``, or a ``categorical``
        column that does not hold integer codes.

    Example::

        masker = jaxshap.maskers.Empirical(X_train, sigma=0.1, eta=0.95)
        expl = jaxshap.ExactExplainer(model, masker)(X)
    """

    def __init__(
        self,
        data: Any,
        sigma: float = 0.1,
        eta: float = 0.95,
        *,
        max_samples: int | None = DEFAULT_MAX_SAMPLES,
        categorical: Any = None,
        feature_names: Sequence[str] | None = None,
    ):
        names = column_names(data) if feature_names is None else [str(n) for n in feature_names]
        self.categories_ = frame_categories(data)  # the labels behind the codes, for X's category columns
        data, found = category_codes(data)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        n, m = x.shape
        if n < 2:
            raise ValueError(f"`data` has {n} row(s); the Mahalanobis distance needs a covariance, so at least 2.")
        if names is not None and len(names) != m:
            raise ValueError(f"`feature_names` has {len(names)} names but `data` has {m} features.")
        self.feature_names = None if names is None else tuple(names)
        self.sigma = number(sigma, "sigma", above=0.0, rule="a positive number (the kernel's bandwidth; 0.1 by default)")
        self.eta = _check_eta(eta)
        if max_samples is not None:
            max_samples = integer(max_samples, "max_samples", least=1, rule="a positive integer or None (every row)")
        self.max_samples = n if max_samples is None else min(max_samples, n)
        self.categorical = categorical_columns(categorical, m, names, found)
        if not is_traced(x):
            check_codes(np.asarray(x), self.categorical, names)
        if self.max_samples < n:  # the marginal sample first: the empty coalition averages over rows [0, n_kept)
            first = shap_sample_rows(n, self.max_samples)
            x = x[np.concatenate([first, np.setdiff1d(np.arange(n), first)])]
        self._continuous = tuple(j not in self.categorical for j in range(m))
        numeric = jnp.where(jnp.asarray(self._continuous), x, 0.0)  # categorical columns: constant, independent
        mean, cov = sample_moments(numeric)
        g = prepare(mean, cov, rcond=None, name="data", dtype=x.dtype, exact_moments=not is_traced(x))
        self.data = x
        self._scores = g.standardize(numeric)
        self._centre, self._unit, self._corr = g.mean, g.safe_scale, g.corr

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.data.shape[1]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs: ``min(max_samples, N)``."""
        return self.max_samples

    @property
    def fitted_rows(self) -> jax.Array:
        """The rows the coalition values average over (see :attr:`Masker.fitted_rows`)."""
        return self.data

    @property
    def probe_rows(self) -> jax.Array:
        """A few training rows, to probe a model's output shape."""
        return self.data[:16]

    def whitening(self, mask: jax.Array) -> jax.Array:
        """``L^{-1}`` ``[M, M]``: the inverse Cholesky factor of the correlation of the coalition's
        continuous features (identity outside them); it depends on the coalition only."""
        s = (mask & jnp.asarray(self._continuous)).astype(self.data.dtype)
        factor = jnp.linalg.cholesky(s[:, None] * self._corr * s[None, :] + jnp.diag(1.0 - s))
        return solve_triangular(factor, jnp.eye(factor.shape[0], dtype=factor.dtype), lower=True)

    def kept_weights(self, x: jax.Array, mask: jax.Array, whiten: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """``(rows [K], weights [K])``: the training rows coalition ``mask`` averages over for row
        ``x`` and their normalised weights (zero beyond the ``eta`` cut), ``K = min(max_samples, N)``.
        ``whiten`` is :meth:`whitening`'s ``L^{-1}`` for ``mask`` (computed here when ``None``)."""
        n, k, dtype = self.data.shape[0], self.max_samples, self.data.dtype
        s = (mask & jnp.asarray(self._continuous)).astype(dtype)
        whiten = self.whitening(mask) if whiten is None else whiten
        # L^{-1} (s * (z_x - z_k)) for every training row k, as z_x G - z_k G with G = diag(s) L^{-T}:
        # the rows' part depends on the coalition only (computed once for explained rows that share
        # coalitions), and over a batch of coalitions it is one plain matrix product of the scores
        # with the stacked G (XLA:CPU does not vectorise a batched product: it was most of the time)
        g = s[:, None] * whiten.T  # [M, M]
        whitened = ((x - self._centre) / self._unit) @ g - self._scores @ g  # [N, M]
        log_w = -(whitened**2).sum(1) / (jnp.maximum(s.sum(), 1.0) * 2.0 * self.sigma**2)
        none = jnp.asarray(jnp.finfo(dtype).min / 4, dtype)
        if self.categorical:
            cat = np.asarray(self.categorical)
            misses = ((self.data[:, cat] != x[cat]) & mask[cat]).sum(1)
            log_w = jnp.where(misses > misses.min(), none, log_w)
        empty = ~mask.any()
        log_w = jnp.where(empty, jnp.where(jnp.arange(n) < k, 0.0, none), log_w)
        share = jnp.exp(log_w - log_w.max())
        share = share / share.sum()
        kept = _kept(share, self.eta, k) | (empty & (jnp.arange(n) < k))
        if k < n:
            rows = jnp.nonzero(kept, size=k)[0]
            w = jnp.where(jnp.arange(k) < kept.sum(), share[rows], 0.0)
        else:
            rows, w = jnp.arange(n), jnp.where(kept, share, 0.0)
        return rows, w / w.sum()

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition in ``masks``.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions.

        Returns:
          ``[C, K]`` coalition values (kernel-weighted means over the kept training rows).
        """
        c, n = masks.shape[0], self.data.shape[0]
        # The distances hold [N, M] per coalition: batched so they take no more than the model's
        # inputs ([max_samples, M] per coalition) that the chunk planner budgets for.
        batch = c if n <= self.max_samples else max(1, (c * self.max_samples) // n)
        # The factorisations depend on the coalitions only: one batched Cholesky and one batched
        # triangular solve for all of them, outside the loop. Inside lax.map a remainder batch
        # would run its own LAPACK calls beside the loop's, which can deadlock XLA's CPU thread
        # pool (see jaxshap._core._platform).
        whiten = jax.vmap(self.whitening)(masks)
        rows, w = jax.lax.map(
            lambda args: self.kept_weights(x, *args), (masks, whiten), batch_size=min(batch, c)
        )
        inputs = jnp.where(masks[:, None, :], x[None, None, :], self.data[rows])
        return jnp.einsum("cbk,cb->ck", f(inputs), w)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """One draw per row: a training row picked with probability proportional to the kept
        weights of coalition ``given`` (:meth:`kept_weights`), the given columns kept: ``[N, M]``."""
        rows = jnp.asarray(rows, self.dtype)
        given = jnp.asarray(given, bool)

        whiten = self.whitening(given)

        def one(k, r):
            index, w = self.kept_weights(r, given, whiten)
            pick = jax.random.categorical(k, jnp.log(w))
            return jnp.where(given, r, self.data[index[pick]])

        return jax.vmap(one)(jax.random.split(key, rows.shape[0]), rows)

    def __repr__(self) -> str:
        shape = tuple(self.data.shape) if not is_traced(self.data) else "traced"
        return f"Empirical(data: {shape}, sigma: {self.sigma:g}, eta: {self.eta:g}, max_samples: {self.max_samples})"
